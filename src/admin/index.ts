// The admin component: the admin API server and the platform-callback server.
export { buildAdminServer, type AdminServerOptions } from './server.ts';
export { buildCallbackServer, type CallbackServerOptions } from './callback-server.ts';
export { createReadiness, type ReadinessOptions } from './readiness.ts';
export { AdminConfigError, AdminError, toErrorReply, type ErrorBody } from './errors.ts';
export type * from './deps.ts';
