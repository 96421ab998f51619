// The dashboard's server side: GET /ui/ serves the single-page app (web/ui: HTML, its modules and CSS) and
// /ui/vendor/<file> the few browser modules it imports from node_modules (Preact, htm, uPlot, Pico CSS), by a
// fixed list, so nothing comes from a CDN and it works offline. Everything here is a static asset and public:
// the page itself holds no data. It asks for the admin token and sends it as a bearer token to /v1 (same
// origin), where the admin server's authorization applies as to any other client.
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AdminError, notFound } from '../errors.ts';
import { InternalError } from '../../errors/rotor-error.ts';

/** web/ui at the package root (the same from src/admin/ui and from a compiled dist/admin/ui). */
export const WEB_ROOT = fileURLToPath(new URL('../../../web/ui/', import.meta.url));

const require = createRequire(import.meta.url);

/** A package's folder, found from its entry point (not every package exports its package.json). */
export function packageDir(name: string): string {
  let dir = dirname(require.resolve(name));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name) return dir;
    const up = dirname(dir);
    if (up === dir) throw new InternalError(`package ${name} not found from its entry point`);
    dir = up;
  }
}

/** URL name → [package, file inside it]. The import map in web/ui/index.html names the same files. */
export const VENDOR: Record<string, [pkg: string, file: string]> = {
  'preact.mjs': ['preact', 'dist/preact.mjs'],
  'preact-hooks.mjs': ['preact', 'hooks/dist/hooks.mjs'],
  'htm.mjs': ['htm', 'dist/htm.mjs'],
  'htm-preact.mjs': ['htm', 'preact/index.mjs'],
  'uplot.mjs': ['uplot', 'dist/uPlot.esm.js'],
  'uplot.css': ['uplot', 'dist/uPlot.min.css'],
  'pico.css': ['@picocss/pico', 'css/pico.min.css'],
};

/**
 * Content-Security-Policy for the dashboard: scripts only from this origin plus the one inline import map
 * (allowed by its hash), no framing, no plugins. A stolen token is the worst a script injection could do,
 * so no inline script runs.
 */
export function dashboardCsp(indexHtml: string): string {
  const hashes = [...indexHtml.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)].map(
    (m) =>
      `'sha256-${createHash('sha256')
        .update(m[1] as string, 'utf8')
        .digest('base64')}'`,
  );
  return [
    "default-src 'self'",
    `script-src 'self' ${hashes.join(' ')}`.trim(),
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export function registerDashboard(app: FastifyInstance, root = WEB_ROOT): void {
  const index = join(root, 'index.html');
  if (!existsSync(index)) {
    // An install without web/ (a trimmed image): the API runs on, the dashboard says what is missing.
    app.get('/ui/*', { schema: { hide: true } }, async () => {
      throw new AdminError(503, 'DASHBOARD_MISSING', `the dashboard's files are not installed (${index})`);
    });
    return;
  }
  const csp = dashboardCsp(readFileSync(index, 'utf8'));
  const vendor = new Map(Object.entries(VENDOR).map(([name, [pkg, file]]) => [name, { root: packageDir(pkg), file }]));

  void app.register(async (ui) => {
    ui.addHook('onSend', async (_request, reply) => {
      reply.header('content-security-policy', csp);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
    });
    await ui.register(fastifyStatic, {
      root,
      prefix: '/ui/',
      index: 'index.html',
      dotfiles: 'ignore',
      // The page changes with the package; a reload always gets the current one.
      cacheControl: false,
      setHeaders: (reply) => void reply.header('cache-control', 'no-cache'),
    });
    // The app's one page, for /ui and /ui/ alike (the router ignores a trailing slash; every URL in it is absolute).
    ui.get('/ui/', { schema: { hide: true } }, async (_request, reply) => reply.sendFile('index.html'));
    ui.get<{ Params: { file: string } }>('/ui/vendor/:file', { schema: { hide: true } }, async (request, reply) => {
      const entry = vendor.get(request.params.file);
      if (!entry) throw notFound(`asset ${request.params.file}`);
      return reply.sendFile(entry.file, entry.root);
    });
  });
}
