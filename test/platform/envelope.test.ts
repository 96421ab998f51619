import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { AesEnvelope, DecryptError, SecretLengthError } from '../../src/platform/envelope.ts';

describe('AES envelope (seed part 5)', () => {
  test('known-answer vector: TestMessage under qwertyuiop123456asdfghjk', () => {
    const env = new AesEnvelope('qwertyuiop123456asdfghjk');
    assert.equal(env.encrypt('TestMessage'), 'gzwsunohuhAvu75NKQhEHQ==');
    assert.equal(env.decrypt('gzwsunohuhAvu75NKQhEHQ=='), 'TestMessage');
  });

  const openssl = spawnSync('openssl', ['version'], { encoding: 'utf8' });
  const haveOpenssl = openssl.status === 0;
  const secrets = {
    128: 'abcdefghijklmnop',
    192: 'qwertyuiop123456asdfghjk',
    256: '0123456789abcdefABCDEFGHIJKLMNOP',
  } as const;
  const plaintexts = ['', 'x', 'exactly16bytes!!', '{"appUsername":"alice","sessTime":"5","note":"ünïcødé ✓"}', 'a'.repeat(1000)];

  for (const [bits, secret] of Object.entries(secrets)) {
    test(`AES-${bits}-CBC agrees with openssl enc`, { skip: haveOpenssl ? false : 'openssl not found on PATH' }, () => {
      const env = new AesEnvelope(secret);
      const key = Buffer.from(secret, 'utf8');
      for (const plain of plaintexts) {
        const out = spawnSync(
          'openssl',
          ['enc', `-aes-${bits}-cbc`, '-K', key.toString('hex'), '-iv', key.subarray(0, 16).toString('hex'), '-base64', '-A'],
          { input: plain, encoding: 'utf8' },
        );
        assert.equal(out.status, 0, out.stderr);
        const expected = out.stdout.trim();
        assert.equal(env.encrypt(plain), expected, `plaintext of ${plain.length} bytes`);
        assert.equal(env.decrypt(expected), plain);
      }
    });
  }

  test('secrets of other lengths are refused', () => {
    for (const s of ['', 'short', '0123456789abcde', '0123456789abcdef0', 'x'.repeat(31), 'x'.repeat(33), 'x'.repeat(64)]) {
      assert.throws(
        () => new AesEnvelope(s),
        (e: unknown) => e instanceof SecretLengthError && e.code === 'SECRET_LENGTH' && !e.message.includes(s || '\u0000'),
      );
    }
  });

  test('a reply under another key is a DecryptError, never a crash', () => {
    const a = new AesEnvelope('abcdefghijklmnop');
    const b = new AesEnvelope('ponmlkjihgfedcba');
    const cipher = a.encryptJson({ hello: 'world' });
    assert.throws(() => b.decryptJson(cipher), DecryptError);
    assert.throws(() => a.decryptJson('not base64 !!'), DecryptError);
    assert.throws(() => a.decryptJson(a.encrypt('not json')), DecryptError);
    assert.deepEqual(a.decryptJson(cipher), { hello: 'world' });
  });

  test('Base64 written in lines (CRLF or LF every 76 characters, a final line end) decrypts; alphabet, padding and blocks still checked', () => {
    const a = new AesEnvelope('abcdefghijklmnop');
    const value = { list: Array.from({ length: 20 }, (_, i) => `socks5://user${i}:pass@127.0.0.1:${40000 + i}`) };
    const cipher = a.encryptJson(value);
    assert.ok(cipher.length > 300 && cipher.endsWith('='), 'long enough for several lines, and padded');
    const wrap = (eol: string, width = 76) => (cipher.match(new RegExp(`.{1,${width}}`, 'g')) ?? []).join(eol) + eol;
    for (const text of [wrap('\r\n'), wrap('\n'), wrap('\r\n', 64), ` ${wrap('\n')}\t`]) assert.deepEqual(a.decryptJson(text), value);
    // A character dropped from one line: not a whole number of blocks (or bad padding), never a wrong plaintext.
    const cut = wrap('\r\n').replace(/^(.{10})./, '$1');
    assert.throws(() => a.decryptJson(cut), DecryptError);
    // Padding only at the end, the alphabet as before.
    assert.throws(() => a.decryptJson(`${cipher.slice(0, 20)}=\r\n${cipher.slice(20)}`), /not base64/);
    assert.throws(() => a.decryptJson(`-${wrap('\r\n').slice(1)}`), DecryptError);
    assert.throws(() => a.decryptJson('\r\n'), /not base64/);
  });
});
