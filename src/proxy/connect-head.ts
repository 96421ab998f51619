// A CONNECT request head read straight from a client's first bytes, for the HTTP listener's fast path: node's HTTP
// server costs a tunnel a parser, an IncomingMessage and a handful of listeners it drops again at once. Only a
// head that node would take exactly as it is read here is served this way: whole in the first chunk, within
// node's header size limit, HTTP/1.0 or 1.1, plain tokens and visible characters throughout. Anything else
// (`undefined`) goes to node's server byte for byte, so every refusal and edge case stays node's.

/** node:http's default maxHeaderSize: a longer head goes to node, whose parser refuses it. */
export const CONNECT_HEAD_MAX = 16 * 1024;
/** Header lines read here at most; a head with more goes to node. */
const HEADER_LINES_MAX = 64;

export interface ConnectHead {
  /** The request target as sent (`host:port`); parseConnectTarget validates it. */
  target: string;
  /** The Proxy-Authorization value (surrounding blanks trimmed, as node does), if sent. */
  authorization: string | undefined;
  /** Where the head ends in the chunk (after its blank line): bytes from here are the tunnel's. */
  end: number;
}

const PREFIX = 8; // "CONNECT "
const PROXY_AUTHORIZATION = bytes('proxy-authorization');
const CONTENT_LENGTH = bytes('content-length');
const TRANSFER_ENCODING = bytes('transfer-encoding');

/**
 * The CONNECT head at the start of `chunk`, or undefined when node's server should read it (not CONNECT, not
 * whole, too long, or anything unusual in it). One pass over the bytes: only the target and the credentials
 * become strings.
 */
export function readConnectHead(chunk: Buffer): ConnectHead | undefined {
  const size = Math.min(chunk.length, CONNECT_HEAD_MAX);
  // "CONNECT", as llhttp takes it (case-sensitive), then one space.
  if (size < 18) return undefined;
  for (let i = 0; i < PREFIX; i++) if (chunk[i] !== CONNECT_BYTES[i]) return undefined;

  // Request line: CONNECT SP target SP HTTP/1.x CRLF, the target of the characters an authority can hold here
  // (parseConnectTarget's); any other is node's to refuse (it answers HPE_INVALID_URL to some).
  let i = PREFIX;
  while (i < size && isTargetChar(chunk[i]!)) i++;
  const targetEnd = i;
  if (targetEnd === PREFIX || i + 11 > size || chunk[i] !== 0x20) return undefined;
  i++;
  for (let k = 0; k < HTTP_1_BYTES.length; k++, i++) if (chunk[i] !== HTTP_1_BYTES[k]) return undefined;
  const minor = chunk[i++];
  if ((minor !== 0x31 && minor !== 0x30) || chunk[i] !== 0x0d || chunk[i + 1] !== 0x0a) return undefined;
  i += 2;

  let authorization: string | undefined;
  for (let lines = 0; ; lines++) {
    if (i + 1 >= size) return undefined; // not whole (or over the size limit): node's
    if (chunk[i] === 0x0d) {
      if (chunk[i + 1] !== 0x0a) return undefined;
      return { target: chunk.toString('latin1', PREFIX, targetEnd), authorization, end: i + 2 };
    }
    if (lines === HEADER_LINES_MAX) return undefined;
    // Field name: token characters, then a colon.
    const name = i;
    while (i < size && isTokenChar(chunk[i]!)) i++;
    if (i === name || i >= size || chunk[i] !== 0x3a) return undefined;
    const colon = i++;
    // Field value up to CRLF: visible characters, spaces and tabs (no obs-text, no control characters: node's).
    let c = 0;
    while (i < size && ((c = chunk[i]!) >= 0x20 || c === 0x09) && c < 0x7f) i++;
    if (i + 1 >= size || c !== 0x0d || chunk[i + 1] !== 0x0a) return undefined;
    let from = colon + 1;
    let to = i;
    i += 2;
    if (sameName(chunk, name, colon, PROXY_AUTHORIZATION)) {
      // Node keeps the first of two; a client sending two is odd enough to be node's to read.
      if (authorization !== undefined) return undefined;
      while (from < to && isBlank(chunk[from]!)) from++;
      while (to > from && isBlank(chunk[to - 1]!)) to--;
      authorization = chunk.toString('latin1', from, to);
    } else if (sameName(chunk, name, colon, CONTENT_LENGTH) || sameName(chunk, name, colon, TRANSFER_ENCODING)) {
      // A body on a CONNECT is node's to judge.
      return undefined;
    }
  }
}

const CONNECT_BYTES = bytes('CONNECT ');
const HTTP_1_BYTES = bytes('HTTP/1.');

function bytes(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

/** Whether chunk[start, colon) is `lower` in any letter case (`lower` all lower-case). */
function sameName(chunk: Buffer, start: number, colon: number, lower: Uint8Array): boolean {
  if (colon - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    const c = chunk[start + i]!;
    // Letters by their lower case; the other token characters compare as they are.
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== lower[i]) return false;
  }
  return true;
}

/** [A-Za-z0-9._-:[]] */
function isTargetChar(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5b) || (c >= 0x30 && c <= 0x3a) || c === 0x2e || c === 0x2d || c === 0x5f || c === 0x5d
  );
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** tchar: ALPHA / DIGIT / "!#$%&'*+-.^_`|~" */
function isTokenChar(c: number): boolean {
  if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39)) return true;
  switch (c) {
    case 0x21:
    case 0x23:
    case 0x24:
    case 0x25:
    case 0x26:
    case 0x27:
    case 0x2a:
    case 0x2b:
    case 0x2d:
    case 0x2e:
    case 0x5e:
    case 0x5f:
    case 0x60:
    case 0x7c:
    case 0x7e:
      return true;
    default:
      return false;
  }
}
