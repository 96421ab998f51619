// The accounts component: platform accounts kept in step with the config, the IP whitelist, balances, the
// flow-use log and traffic return.
export * from './errors.ts';
export * from './main-account.ts';
export * from './reconcile.ts';
export * from './whitelist.ts';
export * from './balances.ts';
export * from './traffic.ts';
