// Issue 15 "Done when": a user with `listen` is reached by headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core) with `--proxy-server=http://127.0.0.1:<port>` and `socks5://127.0.0.1:<port>`
// and no credentials; a page served by a loopback target loads through Rotor (the page shows the address
// the target saw: one of the sandbox's upstream exits, not 127.0.0.1), and a screenshot of it is saved in
// the test's output directory (ROTOR_TEST_OUTPUT, else a temp dir) and its path printed.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CHROMIUM, VIEWPORTS, launchChromium } from '../support/browser.ts';
import { startGateway, type Gateway } from './harness.ts';

describe('headless Chromium through a user port, no credentials', () => {
  let gw: Gateway;
  let page: Server;
  let pagePort: number;
  let seen: string[] = [];
  const out = process.env.ROTOR_TEST_OUTPUT ?? mkdtempSync(join(tmpdir(), 'rotor-browser-'));

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install the Debian package chromium (.ci/run does)`);
    mkdirSync(out, { recursive: true });
    gw = await startGateway({
      config: {
        users: [
          { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32', '::1/128'] } },
        ],
      },
    });
    page = createServer((req, res) => {
      const from = req.socket.remoteAddress ?? '';
      seen.push(from);
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(
        `<!doctype html><html><head><title>through rotor</title></head><body style="font:20px sans-serif;padding:2em">` +
          `<h1 id="title">Loaded through Rotor</h1><p>user port, no credentials</p><p>the target saw <b id="from">${from}</b></p></body></html>`,
      );
    });
    pagePort = await new Promise<number>((r) => page.listen(0, '127.0.0.1', () => r((page.address() as AddressInfo).port)));
  });
  after(async () => {
    await new Promise<void>((r) => {
      page.closeAllConnections();
      page.close(() => r());
    });
    await gw.close();
  });

  for (const scheme of ['http', 'socks5'] as const) {
    test(`--proxy-server=${scheme}://127.0.0.1:<port>`, async () => {
      const port = gw.daemon.userPorts.portOf('alice')!;
      seen = [];
      const browser = await launchChromium(VIEWPORTS.desktop, {
        args: [
          `--proxy-server=${scheme}://127.0.0.1:${port}`,
          // Chromium sends loopback targets past any proxy unless told not to.
          '--proxy-bypass-list=<-loopback>',
        ],
      });
      try {
        const tab = browser.context.pages()[0] ?? (await browser.context.newPage());
        const res = await tab.goto(`http://127.0.0.1:${pagePort}/`, { timeout: 30_000 });
        assert.equal(res?.status(), 200);
        assert.equal(await tab.textContent('#title'), 'Loaded through Rotor');
        const from = await tab.textContent('#from');
        assert.ok(from && gw.exits.includes(from), `the target saw an upstream exit, not the browser: ${from}`);
        assert.ok(
          seen.every((a) => gw.exits.includes(a)),
          `every request came through Rotor: ${seen.join(', ')}`,
        );
        const shot = join(out, `user-port-${scheme}.png`);
        await tab.screenshot({ path: shot });
        assert.ok(statSync(shot).size > 1000);
        console.log(`# screenshot: ${shot}`);
      } finally {
        await browser.close();
      }
    });
  }
});
