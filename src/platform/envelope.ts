// The encrypted envelope of seed part 5: AES-CBC, PKCS#7, key = the secret's bytes, IV = its first 16 bytes.
// Shared by the client and the sandbox simulator, so both sides speak exactly the same wire format.
import { createCipheriv, createDecipheriv } from 'node:crypto';
import { RotorError } from '../errors/rotor-error.ts';

export type ApiVersion = 'v2' | '2.0';

export interface RequestEnvelope {
  version: string;
  encrypt: string;
  appKey: string;
  reqId: string;
  params: string;
}

export interface ResponseEnvelope {
  reqId: string;
  code: number;
  msg: string;
  data?: string;
}

export class SecretLengthError extends RotorError {
  constructor(length: number) {
    super('SECRET_LENGTH', `appSecret must be 16, 24 or 32 bytes, got ${length}`);
  }
}

export class DecryptError extends RotorError {
  constructor(reason: string) {
    super('DECRYPT_FAILED', `cannot decrypt: ${reason}`);
  }
}

const WHITESPACE = /[ \t\r\n]/;
const WHITESPACE_ALL = /[ \t\r\n]+/g;

/** A prepared cipher for one secret; validates the key length once. */
export class AesEnvelope {
  private readonly key: Buffer;
  private readonly iv: Buffer;
  private readonly algorithm: string;

  constructor(secret: string) {
    const key = Buffer.from(secret, 'utf8');
    if (key.length !== 16 && key.length !== 24 && key.length !== 32) throw new SecretLengthError(key.length);
    this.key = key;
    this.iv = key.subarray(0, 16);
    this.algorithm = `aes-${key.length * 8}-cbc`;
  }

  encrypt(plaintext: string): string {
    const cipher = createCipheriv(this.algorithm, this.key, this.iv);
    return Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]).toString('base64');
  }

  /**
   * Throws DecryptError on bad base64, a wrong key or bad padding; never anything else. Base64 written in lines
   * (CRLF or LF every 76 characters: Java's MIME encoders and sun.misc.BASE64Encoder, Python's encodebytes) is
   * read as one text: spaces, tabs and line breaks are dropped before the alphabet and padding are checked.
   */
  decrypt(base64: string): string {
    if (typeof base64 !== 'string' || base64.length === 0) throw new DecryptError('empty ciphertext');
    const text = WHITESPACE.test(base64) ? base64.replace(WHITESPACE_ALL, '') : base64;
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) throw new DecryptError('not base64');
    const bytes = Buffer.from(text, 'base64');
    if (bytes.length === 0 || bytes.length % 16 !== 0) throw new DecryptError('ciphertext is not a whole number of blocks');
    try {
      const decipher = createDecipheriv(this.algorithm, this.key, this.iv);
      return Buffer.concat([decipher.update(bytes), decipher.final()]).toString('utf8');
    } catch {
      throw new DecryptError('bad key or padding');
    }
  }

  encryptJson(value: unknown): string {
    return this.encrypt(JSON.stringify(value ?? {}));
  }

  /** Decrypts and parses; a reply that decrypts to something other than JSON is a DecryptError too. */
  decryptJson(base64: string): unknown {
    const text = this.decrypt(base64);
    try {
      return JSON.parse(text);
    } catch {
      throw new DecryptError('plaintext is not JSON');
    }
  }
}
