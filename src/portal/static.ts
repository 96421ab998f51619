// The portal's page: web/portal/index.html, its module (web/portal/app/portal.js), the dashboard's modules it
// shares (web/ui/app: components, charts, formats, the access generator, usage views; none of them touches the
// admin token) and the same vendor files as the dashboard (Preact, htm, uPlot, Pico CSS), each by a fixed
// list and read once. Every URL in the page is relative, so it works under any configured path.
import type { FastifyInstance } from 'fastify';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dashboardCsp, packageDir, VENDOR, WEB_ROOT } from '../admin/ui/dashboard.ts';
import { PortalError } from './errors.ts';

export const PORTAL_ROOT = fileURLToPath(new URL('../../web/portal/', import.meta.url));

/** URL name under <path>app/ → file. */
const APP: Record<string, string> = {
  'portal.js': join(PORTAL_ROOT, 'app/portal.js'),
  'components.js': join(WEB_ROOT, 'app/components.js'),
  'chart.js': join(WEB_ROOT, 'app/chart.js'),
  'format.js': join(WEB_ROOT, 'app/format.js'),
  'access.js': join(WEB_ROOT, 'app/access.js'),
  'usage-view.js': join(WEB_ROOT, 'app/usage-view.js'),
};
const STYLES: Record<string, string> = {
  'style.css': join(WEB_ROOT, 'style.css'),
  'portal.css': join(PORTAL_ROOT, 'portal.css'),
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};
const typeOf = (file: string) => TYPES[file.slice(file.lastIndexOf('.'))] ?? 'application/octet-stream';

export function registerPortalPage(app: FastifyInstance, base: string): void {
  const index = join(PORTAL_ROOT, 'index.html');
  if (!existsSync(index)) {
    app.get(base, { schema: { hide: true } }, async () => {
      throw new PortalError(503, 'PORTAL_MISSING', `the portal's files are not installed (${index})`);
    });
    return;
  }
  const html = readFileSync(index, 'utf8');
  const csp = dashboardCsp(html);
  // Every file is read here, at start-up, so no request waits on the disk (or blocks the event loop).
  const cache = new Map<string, Buffer>();
  const vendorFiles = Object.values(VENDOR).map(([pkg, path]) => join(packageDir(pkg), path));
  for (const file of [...Object.values(APP), ...Object.values(STYLES), ...vendorFiles]) {
    try {
      cache.set(file, readFileSync(file));
    } catch {
      // Missing from this installation: its URL answers PORTAL_MISSING.
    }
  }
  const read = (file: string) => {
    const b = cache.get(file);
    if (!b) throw new PortalError(503, 'PORTAL_MISSING', `the portal's files are not installed (${file})`);
    return b;
  };
  const send = (reply: import('fastify').FastifyReply, file: string, body?: string | Buffer) =>
    reply
      .header('content-type', typeOf(file))
      .header('content-security-policy', csp)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cache-control', 'no-cache')
      .send(body ?? read(file));

  // The page's URLs are relative to it: /portal (no slash) would resolve them against /.
  app.get(base, { schema: { hide: true } }, async (request, reply) =>
    (request.raw.url ?? '').split('?')[0]!.endsWith('/') ? send(reply, index, html) : reply.redirect(base, 302),
  );
  app.get<{ Params: { file: string } }>(`${base}app/:file`, { schema: { hide: true } }, async (request, reply) => {
    const file = APP[request.params.file];
    if (!file || !Object.hasOwn(APP, request.params.file)) throw new PortalError(404, 'NOT_FOUND', `no file ${request.params.file}`);
    return send(reply, file);
  });
  app.get<{ Params: { file: string } }>(`${base}css/:file`, { schema: { hide: true } }, async (request, reply) => {
    const file = STYLES[request.params.file];
    if (!file || !Object.hasOwn(STYLES, request.params.file)) throw new PortalError(404, 'NOT_FOUND', `no file ${request.params.file}`);
    return send(reply, file);
  });
  app.get<{ Params: { file: string } }>(`${base}vendor/:file`, { schema: { hide: true } }, async (request, reply) => {
    const entry = Object.hasOwn(VENDOR, request.params.file) ? VENDOR[request.params.file] : undefined;
    if (!entry) throw new PortalError(404, 'NOT_FOUND', `no file ${request.params.file}`);
    return send(reply, join(packageDir(entry[0]), entry[1]));
  });
}
