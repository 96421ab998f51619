// The logger's redaction: by key (pino redact paths) and in free text (redactText, also applied to
// messages and error messages).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { redactText } from '../../src/telemetry/logger.ts';
import { captureLogger } from '../support/logger.ts';

describe('redactText', () => {
  test('every proxy-string form loses its password, the rest stays', () => {
    const cases: Array<[string, string]> = [
      ['socks5://u1:hunter2@127.0.0.1:1080', 'socks5://u1:***@127.0.0.1:1080'],
      ['drawn u1:hunter2@127.0.0.1:1080 ok', 'drawn u1:***@127.0.0.1:1080 ok'],
      ['drawn 127.0.0.1:1080:u1:hunter2 ok', 'drawn 127.0.0.1:1080:u1:*** ok'],
      ['Authorization: Bearer tok.en-1', 'Authorization: Bearer ***'],
      ['Proxy-Authorization: Basic dTE6aHVudGVyMg==', 'Proxy-Authorization: Basic ***'],
      // A Redis URL with only requirepass has no user; a password may hold '@' (the authority ends at its last one).
      ['store redis://:s3cret@127.0.0.1:6379/0 down', 'store redis://:***@127.0.0.1:6379/0 down'],
      ['http://u:p@w0rd@127.0.0.1:8080/a@b', 'http://u:***@127.0.0.1:8080/a@b'],
      ['drawn u1:p@w0rd@127.0.0.1:1080 ok', 'drawn u1:***@127.0.0.1:1080 ok'],
      ['"url":"socks5://u:p@x@127.0.0.1:1","mail":"a@b.com"', '"url":"socks5://u:***@127.0.0.1:1","mail":"a@b.com"'],
    ];
    for (const [input, want] of cases) assert.equal(redactText(input), want);
  });

  test('JSON members named like a secret lose their value, escaped quotes included', () => {
    const text = JSON.stringify({ user: 'u1', password: 'hun"ter2', pwd: 'x1', appSecret: 's3', nested: { token: 't0' } });
    const out = redactText(text);
    for (const secret of ['hun', 'ter2', 'x1', 's3', 't0']) assert.ok(!out.includes(secret), out);
    assert.match(out, /"user":"u1"/);
  });

  test('ordinary text is left alone', () => {
    for (const text of [
      'listening on 127.0.0.1:8080',
      'mail a@b.com',
      'at 2026-01-01 10:00:00',
      'IP not in whitelist 1.2.3.4',
      '[::1]:80',
      'http://127.0.0.1:8080/a@b',
      'redis://127.0.0.1:6379',
    ]) {
      assert.equal(redactText(text), text);
    }
  });
});

describe('createLogger', () => {
  test('secret keys, error messages and message text are redacted', () => {
    const { logger, text } = captureLogger();
    const err = Object.assign(new Error('dial u1:hunter2@127.0.0.1:1 failed'), { node: { host: '127.0.0.1', password: 'hunter2' } });
    logger.warn({ err, config: { platform: { appSecret: 'S3CRET-KEY' } }, user: { pwd: 'pw-9' } }, 'draw returned 127.0.0.1:1:u1:hunter2');
    logger.flush();
    const out = text();
    assert.match(out, /draw returned/);
    for (const secret of ['hunter2', 'S3CRET-KEY', 'pw-9']) assert.ok(!out.includes(secret), out);
  });
});

describe('pretty logging (a terminal)', () => {
  test('formats on this thread: no transport worker is started', async () => {
    const { readdirSync } = await import('node:fs');
    const { pino } = await import('pino');
    const { createLogger } = await import('../../src/telemetry/logger.ts');
    const threads = () => readdirSync('/proc/self/task').length;
    const before = threads();
    const log = createLogger({ level: 'info', pretty: true });
    const stream = (log as unknown as Record<symbol, { constructor: { name: string } }>)[pino.symbols.streamSym];
    assert.notEqual(stream?.constructor.name, 'ThreadStream');
    assert.equal(threads(), before);
  });
});
