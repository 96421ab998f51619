// The webhook signature: `X-Rotor-Signature: sha256=<hex HMAC-SHA256 of the raw body with events.secret>`
// (GitHub's X-Hub-Signature-256 shape), so a receiver can check a body came from Rotor before trusting it.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-rotor-signature';

export function signBody(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/** For receivers written in Node: compares in constant time. */
export function verifySignature(body: string, secret: string, header: string | undefined): boolean {
  if (!header) return false;
  const want = Buffer.from(signBody(body, secret));
  const got = Buffer.from(header);
  return want.length === got.length && timingSafeEqual(want, got);
}
