// Merchant numbers Rotor generates. 'R' + time in base 36 + random base-36 characters: sortable by time,
// unique without coordination, and inside every limit at once (≤ 32 characters, [A-Za-z0-9_], so the same
// shape serves appOrderNo, release orderNo, change appOrderNo (≤ 64) and resetNo).
import { createHash, randomBytes, randomUUID } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

export function newMerchantNo(now: number = Date.now()): string {
  const bytes = randomBytes(12);
  let rand = '';
  for (const b of bytes) rand += ALPHABET[b % 36];
  return `R${now.toString(36)}${rand}`;
}

/** A merchant number derived from a fact, so the same fact can never be ordered twice (auto-renew). */
export function derivedMerchantNo(prefix: string, fact: string): string {
  return `${prefix}${createHash('sha256')
    .update(fact)
    .digest('hex')
    .slice(0, 30 - prefix.length)}`;
}

export function newReqId(): string {
  return randomUUID().replaceAll('-', '');
}
