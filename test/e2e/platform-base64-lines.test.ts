// Seed part 5, AES rule 4: "Ciphertext is Base64-encoded", in no named writing. A platform written in Java with a
// MIME encoder (sun.misc.BASE64Encoder, the classic AES sample) or in Python with base64.encodebytes writes its
// `data` in lines of 76 characters. The daemon on such a platform (CRLF lines, switched on after the start) draws
// and serves its customer; the same rig without the variant is the control.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeConnectGet } from './harness.ts';
import { mimeWrap, poolError, startVariantRig, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';

for (const variant of ['Base64 in CRLF lines of 76', 'control: one line'] as const) {
  describe(`the daemon on a platform writing its Base64 as ${variant}`, () => {
    let rig: VariantRig;
    before(async () => {
      rig = await startVariantRig({ hooksAfterStart: variant.startsWith('control') ? {} : { encode: (b) => mimeWrap(b, 76, '\r\n') } });
    });
    after(async () => rig?.close());

    test("a customer's CONNECT is served (the draw's answer decrypts)", async () => {
      const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/hello', 20_000);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig)}`);
      assert.equal(r.body, 'hello from target');
      assert.ok((rig.platform.calls.get('DrawByPwd') ?? 0) >= 1);
    });
  });
}
