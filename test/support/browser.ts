// Debian's Chromium driven by playwright-core (never a downloaded browser): a fresh profile per launch in a
// temp dir, loopback only, nothing fetched in the background. ROTOR_CHROMIUM overrides the executable.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = process.env.ROTOR_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Chromium with a fresh user-data-dir (removed on close), headless unless ROTOR_HEADFUL is set. `args` are
 * added to CHROMIUM_ARGS (a proxy to browse through, for instance).
 */
export async function launchChromium(
  viewport: { width: number; height: number } = VIEWPORTS.desktop,
  options: { args?: string[] } = {},
): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'rotor-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: !process.env.ROTOR_HEADFUL,
    args: [...CHROMIUM_ARGS, ...(options.args ?? [])],
    viewport,
    timeout: 60_000,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
