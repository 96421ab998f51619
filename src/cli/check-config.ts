// `rotor check-config`: validate, then print the effective config (defaults and env overrides applied) as
// YAML with secrets redacted.
import { stringify } from 'yaml';
import type { Config } from '../config/schema.ts';
import { redactConfig } from '../config/redact.ts';

export function renderConfig(config: Config, file: string): string {
  return `# effective configuration from ${file} (environment overrides applied, secrets redacted)\n${stringify(redactConfig(config))}`;
}

/**
 * How each user will draw, from the platform's product records (src/pool/draw-plan.ts), as YAML comments:
 * the users whose config a product refuses or adjusts are named before the daemon runs. Embedded mode asks a
 * throwaway sandbox; an unreachable platform is one comment line, not a failure (the config itself is valid).
 */
export async function renderDrawPlans(config: Config): Promise<string> {
  const { PlatformClient, platformEndpoint } = await import('../platform/client.ts');
  const { Catalog } = await import('../orders/catalog.ts');
  const { ProductCatalog } = await import('../accounting/products.ts');
  const { planUsers, describePlan } = await import('../pool/draw-plan.ts');
  let sim: { baseUrl: string; appKey: string; appSecret: string; close(): Promise<void> } | undefined;
  try {
    let platform = config.platform;
    if (platform.mode === 'embedded') {
      const { startSimulator } = await import('../sim/index.ts');
      sim = await startSimulator({ upstreams: false });
      platform = { ...platform, baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret };
    }
    const client = new PlatformClient({
      ...platformEndpoint(platform),
      timeoutMs: Math.min(platform.timeoutMs, 5000),
      retries: 0,
    });
    try {
      const products = new ProductCatalog({ client });
      const catalog = new Catalog({ client });
      const users = [];
      for (const u of config.users) users.push({ ...u, product: u.product || ((await products.productFor('')) ?? '') });
      const plans = await planUsers(users, (no) => catalog.product(no));
      const lines = ["# draw plans (from the platform's product records):"];
      for (const p of plans) {
        if (p.error) lines.push(`#   ${p.user.name}: plan unknown: ${p.error}`);
        else if (p.plan) {
          lines.push(`#   ${describePlan(p.user, p.productNo, p.plan)}`);
          for (const note of p.plan.notes) lines.push(`#     - ${note}`);
        }
      }
      return `${lines.join('\n')}\n`;
    } finally {
      client.close();
    }
  } catch (err) {
    return `# draw plans: the platform could not be asked (${err instanceof Error ? err.message : String(err)})\n`;
  } finally {
    await sim?.close();
  }
}
