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

const END = Buffer.from('\r\n\r\n', 'latin1');
const PREFIX = 'CONNECT ';

/**
 * The CONNECT head at the start of `chunk`, or undefined when node's server should read it (not CONNECT, not
 * whole, too long, or anything unusual in it).
 */
export function readConnectHead(chunk: Buffer): ConnectHead | undefined {
  // "CONNECT", as llhttp takes it (case-sensitive), then one space.
  if (chunk.length < 18 || chunk[0] !== 0x43 || chunk[7] !== 0x20) return undefined;
  const blank = chunk.indexOf(END);
  if (blank < 0 || blank + 4 > CONNECT_HEAD_MAX) return undefined;
  const head = chunk.toString('latin1', 0, blank);
  if (!head.startsWith(PREFIX)) return undefined;

  let lineEnd = head.indexOf('\r\n');
  if (lineEnd < 0) lineEnd = head.length;
  // Request line: CONNECT SP target SP HTTP/1.x, the target of the characters an authority can hold here
  // (parseConnectTarget's); any other is node's to refuse (it answers HPE_INVALID_URL to some).
  const version = lineEnd - 9;
  if (version <= PREFIX.length || head.charCodeAt(version) !== 0x20) return undefined;
  if (!head.startsWith('HTTP/1.', version + 1)) return undefined;
  const minor = head.charCodeAt(lineEnd - 1);
  if (minor !== 0x31 && minor !== 0x30) return undefined;
  for (let i = PREFIX.length; i < version; i++) {
    if (!isTargetChar(head.charCodeAt(i))) return undefined;
  }
  const target = head.slice(PREFIX.length, version);

  let authorization: string | undefined;
  let lines = 0;
  for (let start = lineEnd + 2; start < head.length;) {
    if (++lines > HEADER_LINES_MAX) return undefined;
    let end = head.indexOf('\r\n', start);
    if (end < 0) end = head.length;
    const colon = headerName(head, start, end);
    if (colon < 0) return undefined;
    // Field value: visible characters, spaces and tabs (no obs-text, no control characters: node's to judge).
    let from = colon + 1;
    let to = end;
    for (let i = from; i < to; i++) {
      const c = head.charCodeAt(i);
      if ((c < 0x20 && c !== 0x09) || c >= 0x7f) return undefined;
    }
    while (from < to && isBlank(head.charCodeAt(from))) from++;
    while (to > from && isBlank(head.charCodeAt(to - 1))) to--;
    const nameLength = colon - start;
    if (nameLength === 19 && head.slice(start, colon).toLowerCase() === 'proxy-authorization') {
      // Node keeps the first of two; a client sending two is odd enough to be node's to read.
      if (authorization !== undefined) return undefined;
      authorization = head.slice(from, to);
    } else if (nameLength === 14 || nameLength === 17) {
      // A body on a CONNECT (Content-Length, Transfer-Encoding) is node's to judge.
      const name = head.slice(start, colon).toLowerCase();
      if (name === 'content-length' || name === 'transfer-encoding') return undefined;
    }
    start = end + 2;
  }
  return { target, authorization, end: blank + 4 };
}

/** The colon after a header line's name of token characters (RFC 9110 §5.6.2), or -1. */
function headerName(head: string, start: number, end: number): number {
  for (let i = start; i < end; i++) {
    const c = head.charCodeAt(i);
    if (c === 0x3a /* : */) return i > start ? i : -1;
    if (!isTokenChar(c)) return -1;
  }
  return -1;
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
