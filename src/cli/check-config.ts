// `rotor check-config`: validate, then print the effective config (defaults and env overrides applied) as
// YAML with secrets redacted.
import { stringify } from 'yaml';
import type { Config } from '../config/schema.ts';
import { redactConfig } from '../config/redact.ts';

export function renderConfig(config: Config, file: string): string {
  return `# effective configuration from ${file} (environment overrides applied, secrets redacted)\n${stringify(redactConfig(config))}`;
}
