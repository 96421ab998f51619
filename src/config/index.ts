// The config component: schema and defaults (schema.ts), reading with env overrides (load.ts), redaction.
export {
  configSchema,
  isLoopbackHost,
  USER_NAME,
  SECRET_LENGTHS,
  type Config,
  type ConfigInput,
  type UserConfig,
  type PlatformConfig,
} from './schema.ts';
export {
  loadConfig,
  reloadConfig,
  parseConfig,
  resolveConfigFile,
  ConfigError,
  ENV_OVERRIDES,
  type ConfigIssue,
  type LoadOptions,
} from './load.ts';
export { redactConfig } from './redact.ts';
