import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ExtractionError, fetchExtraction, parseExtractionBody } from '../../src/pool/extraction.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const routes = new Map<string, Handler>();
let server: Server;
let base: string;

function body(status: number, text: string, type = 'text/plain'): Handler {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': type });
    res.end(text);
  };
}

before(async () => {
  server = createServer((req, res) => {
    const h = routes.get(new URL(req.url ?? '/', 'http://x').pathname);
    if (h) h(req, res);
    else body(404, 'not found')(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const THREE = ['127.0.0.1:1081', '127.0.0.2:1082', '127.0.0.3:1083'];
const hosts = (r: { proxies: { host: string; port: number }[] }) => r.proxies.map((p) => `${p.host}:${p.port}`);

describe('txt extraction over HTTP, every delimiter of seed 4.16', () => {
  const delimiters: [string, string][] = [
    ['1 CRLF', '\r\n'],
    ['2 /br', '/br'],
    ['2 <br>', '<br>'],
    ['2 <br />', '<br />'],
    ['3 CR', '\r'],
    ['4 LF', '\n'],
    ['5 TAB', '\t'],
  ];
  for (const [name, d] of delimiters) {
    test(name, async () => {
      const path = `/txt/${encodeURIComponent(name)}`;
      routes.set(path, body(200, THREE.join(d) + d));
      const r = await fetchExtraction(`${base}${path}?key=k`, { defaultProtocol: 'socks5' });
      assert.deepEqual(hosts(r), THREE);
      assert.equal(r.rejected, 0);
      assert.ok(r.proxies.every((p) => p.protocol === 'socks5'));
    });
  }

  test('mixed delimiters and forms, URL strings not split at their //', async () => {
    routes.set('/mixed', body(200, 'socks5://u:p@brhost.local:1080/br127.0.0.1:8080:u2:p2\r\nhttp://a:b@127.0.0.9:3128\tbr.example:1/br'));
    const r = await fetchExtraction(`${base}/mixed`, { defaultProtocol: 'http' });
    assert.deepEqual(
      r.proxies.map((p) => [p.protocol, p.host, p.port, p.username, p.password]),
      [
        ['socks5', 'brhost.local', 1080, 'u', 'p'],
        ['http', '127.0.0.1', 8080, 'u2', 'p2'],
        ['http', '127.0.0.9', 3128, 'a', 'b'],
        ['http', 'br.example', 1, undefined, undefined],
      ],
    );
  });

  test('a bad line among good ones is counted, not fatal', async () => {
    routes.set('/partial', body(200, '127.0.0.1:1081\ngarbage line\n127.0.0.2:1082'));
    const r = await fetchExtraction(`${base}/partial`, { defaultProtocol: 'socks5' });
    assert.deepEqual(hosts(r), ['127.0.0.1:1081', '127.0.0.2:1082']);
    assert.equal(r.rejected, 1);
  });
});

describe('json extraction over HTTP', () => {
  const forms: [string, unknown][] = [
    [
      'data of objects',
      {
        code: 0,
        data: [
          { ip: '127.0.0.1', port: 1081 },
          { ip: '127.0.0.2', port: '1082', user: 'u', pass: 'p' },
          { ip: '127.0.0.3', port: 1083 },
        ],
      },
    ],
    [
      'list of objects',
      {
        list: [
          { host: '127.0.0.1', port: 1081 },
          { host: '127.0.0.2', port: 1082 },
          { host: '127.0.0.3', port: 1083 },
        ],
      },
    ],
    ['nested data.list', { code: 200, data: { list: THREE } }],
    ['bare array of strings', THREE],
    [
      'bare array of objects',
      [
        { ip: '127.0.0.1', port: 1081 },
        { ip: '127.0.0.2', port: 1082 },
        { ip: '127.0.0.3', port: 1083 },
      ],
    ],
  ];
  for (const [name, json] of forms) {
    test(name, async () => {
      const path = `/json/${encodeURIComponent(name)}`;
      routes.set(path, body(200, JSON.stringify(json), 'application/json'));
      const r = await fetchExtraction(`${base}${path}`, { defaultProtocol: 'socks5' });
      assert.deepEqual(hosts(r), THREE);
    });
  }

  test('object credentials and declared protocol are kept', async () => {
    routes.set(
      '/json/creds',
      body(200, JSON.stringify({ data: [{ ip: '::1', port: 1080, username: 'u', password: 'p', protocol: 'HTTP' }] })),
    );
    const r = await fetchExtraction(`${base}/json/creds`, { defaultProtocol: 'socks5' });
    assert.deepEqual(r.proxies, [{ protocol: 'http', host: '::1', port: 1080, username: 'u', password: 'p' }]);
  });
});

describe('extraction failures', () => {
  test('JSON error body → error_body with the supplier text, redacted', async () => {
    routes.set(
      '/err/json',
      body(200, JSON.stringify({ code: 1001, msg: 'ip 127.0.0.1 not in whitelist, see http://u:topsecret@x.example/' })),
    );
    await assert.rejects(fetchExtraction(`${base}/err/json`, { defaultProtocol: 'socks5' }), (err: unknown) => {
      assert.ok(err instanceof ExtractionError);
      assert.equal(err.code, 'EXTRACTION_FAILED');
      assert.equal(err.problem, 'error_body');
      assert.match(err.message, /not in whitelist/);
      assert.match(err.message, /1001/);
      assert.ok(!err.message.includes('topsecret'));
      return true;
    });
  });

  test('entries that do not parse: no password of theirs reaches the message or body', () => {
    for (const text of [
      'u1:hunter2@127.0.0.1:99999',
      '127.0.0.1:99999:u1:hunter2',
      JSON.stringify([{ ip: 'bad host', port: 1, user: 'u1', password: 'hunter2' }]),
      JSON.stringify([{ proxy: 'u1:hunter2@[::1' }]),
    ]) {
      assert.throws(
        () => parseExtractionBody(text, 'socks5'),
        (err: unknown) => {
          assert.ok(err instanceof ExtractionError && err.problem === 'error_body', text);
          assert.ok(!err.message.includes('hunter2'), err.message);
          assert.ok(!(err.body ?? '').includes('hunter2'), err.body);
          return true;
        },
      );
    }
  });

  test('plain-text error → error_body, truncated', async () => {
    routes.set('/err/txt', body(200, `balance exhausted ${'x'.repeat(1000)}`));
    await assert.rejects(fetchExtraction(`${base}/err/txt`, { defaultProtocol: 'socks5' }), (err: unknown) => {
      assert.ok(err instanceof ExtractionError && err.problem === 'error_body');
      assert.match(err.message, /balance exhausted/);
      assert.ok((err.body ?? '').length <= 201 + 1);
      return true;
    });
  });

  test('HTTP status → http_status; the link query (keys) is not in the message', async () => {
    routes.set('/err/500', body(500, 'internal'));
    await assert.rejects(fetchExtraction(`${base}/err/500?apikey=SECRETKEY`, { defaultProtocol: 'socks5' }), (err: unknown) => {
      assert.ok(err instanceof ExtractionError && err.problem === 'http_status');
      assert.match(err.message, /HTTP 500/);
      assert.ok(!err.message.includes('SECRETKEY'));
      return true;
    });
  });

  test('empty body and empty list → no_proxies', async () => {
    routes.set('/err/empty', body(200, '  \r\n'));
    routes.set('/err/emptylist', body(200, '{"data":[]}'));
    for (const p of ['/err/empty', '/err/emptylist']) {
      await assert.rejects(
        fetchExtraction(`${base}${p}`, { defaultProtocol: 'socks5' }),
        (err: unknown) => err instanceof ExtractionError && err.problem === 'no_proxies',
      );
    }
  });

  test('a silent server → timeout within the bound', async () => {
    routes.set('/slow', () => {
      /* never answers */
    });
    const started = Date.now();
    await assert.rejects(
      fetchExtraction(`${base}/slow`, { defaultProtocol: 'socks5', timeoutMs: 200 }),
      (err: unknown) => err instanceof ExtractionError && err.problem === 'timeout',
    );
    assert.ok(Date.now() - started < 2000);
  });

  test('refused connection → transport', async () => {
    const s = createServer();
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((resolve) => s.close(() => resolve()));
    await assert.rejects(
      fetchExtraction(`http://127.0.0.1:${port}/x`, { defaultProtocol: 'socks5' }),
      (err: unknown) => err instanceof ExtractionError && err.problem === 'transport' && /ECONNREFUSED/.test(err.message),
    );
  });

  test('a body over the cap → too_large', async () => {
    routes.set('/big', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const line = Buffer.from('127.0.0.1:1080\n'.repeat(10_000));
      for (let i = 0; i < 8; i++) res.write(line);
      res.end();
    });
    await assert.rejects(
      fetchExtraction(`${base}/big`, { defaultProtocol: 'socks5' }),
      (err: unknown) => err instanceof ExtractionError && err.problem === 'too_large',
    );
  });

  test('parseExtractionBody: UTF-8 BOM and non-JSON starting with {', () => {
    assert.deepEqual(hosts(parseExtractionBody('\uFEFF127.0.0.1:1\n', 'socks5')), ['127.0.0.1:1']);
    assert.throws(
      () => parseExtractionBody('{not json', 'socks5'),
      (err: unknown) => err instanceof ExtractionError && err.problem === 'error_body',
    );
  });
});
