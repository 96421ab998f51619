// Seeded generators of malformed and random inputs for the listeners. Every complete, authenticated request
// names a loopback target only (127.0.0.1, ::1, localhost): random hosts appear only where the input can
// never be dialed (bad credentials, truncated before the end, unparseable), so the fuzz never leaves the machine.
export type Rnd = () => number;

export const int = (rnd: Rnd, n: number): number => Math.floor(rnd() * n);
export const pick = <T>(rnd: Rnd, list: readonly T[]): T => list[int(rnd, list.length)]!;
export const bytes = (rnd: Rnd, n: number): Buffer => Buffer.from(Array.from({ length: n }, () => int(rnd, 256)));

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.';
const word = (rnd: Rnd, n: number): string => Array.from({ length: n }, () => ALNUM[int(rnd, ALNUM.length)]).join('');

/** Proxy user names: valid users with valid and invalid options, unknown users, empty, oversized, odd bytes. */
export function username(rnd: Rnd, valid: string): string {
  switch (int(rnd, 9)) {
    case 0:
      return valid;
    case 1:
      return `${valid}-session-${word(rnd, 1 + int(rnd, 12))}`;
    case 2:
      return `${valid}-session-${word(rnd, 4)}-sesstime-${pick(rnd, ['1', '0', '-1', '999', 'x', ''])}`;
    case 3:
      return `${valid}-${pick(rnd, ['region', 'product', 'instance', 'bogus', ''])}-${word(rnd, int(rnd, 8))}`;
    case 4:
      return `${valid}-session-`;
    case 5:
      return '';
    case 6:
      return word(rnd, 1 + int(rnd, 40));
    case 7:
      return 'x'.repeat(255);
    default:
      return bytes(rnd, int(rnd, 30)).toString('latin1');
  }
}

export interface Socks5Case {
  input: Buffer;
  /** complete and authenticated, towards the echo target: the handshake should succeed */
  expectSuccess: boolean;
  /** first byte is not 5: the server must not answer anything */
  expectSilence: boolean;
}

/**
 * One SOCKS5 input: random bytes, or a greeting / RFC 1929 / request stage built right up to the stage under
 * test and broken there (wrong version, zero or oversized lengths, truncation, bad commands and address
 * types, IPv6), or a complete request to a loopback target.
 */
export function socks5Case(rnd: Rnd, creds: { user: string; pass: string }, echoPort: number, closedPort: number): Socks5Case {
  const stage = int(rnd, 4);
  if (stage === 0) {
    const input = bytes(rnd, int(rnd, 80));
    return { input, expectSuccess: false, expectSilence: input.length > 0 && input[0] !== 5 };
  }
  const goodGreeting = Buffer.from([5, 1, 2]);
  if (stage === 1) {
    const ver = rnd() < 0.8 ? 5 : int(rnd, 256);
    const n = pick(rnd, [0, 1, 2, 3, 255, int(rnd, 256)]);
    const methods = Array.from({ length: n }, () => (rnd() < 0.3 ? 2 : int(rnd, 256)));
    let input = Buffer.from([ver, n, ...methods]);
    if (rnd() < 0.4) input = input.subarray(0, int(rnd, input.length + 1));
    if (rnd() < 0.2) input = Buffer.concat([input, bytes(rnd, int(rnd, 300))]);
    return { input, expectSuccess: false, expectSilence: input.length > 0 && input[0] !== 5 };
  }
  const goodAuth = authBytes(1, creds.user, creds.pass);
  if (stage === 2) {
    const ver = rnd() < 0.8 ? 1 : int(rnd, 256);
    const user = rnd() < 0.5 ? username(rnd, creds.user) : creds.user;
    const pass = pick(rnd, [creds.pass, '', 'wrong', 'p'.repeat(255), bytes(rnd, int(rnd, 20)).toString('latin1')]);
    let auth = authBytes(ver, user, pass);
    // Declared lengths that lie: longer than what follows, or zero with bytes after.
    if (rnd() < 0.2) auth[1] = int(rnd, 256);
    if (rnd() < 0.4) auth = auth.subarray(0, int(rnd, auth.length + 1));
    const input = Buffer.concat([goodGreeting, auth]);
    return { input, expectSuccess: false, expectSilence: false };
  }
  // stage 3: the request
  const ver = rnd() < 0.85 ? 5 : int(rnd, 256);
  const cmd = rnd() < 0.75 ? 1 : pick(rnd, [2, 3, 0, int(rnd, 256)]);
  const rsv = rnd() < 0.9 ? 0 : int(rnd, 256);
  const atyp = pick(rnd, [1, 3, 4, 4, 3, 0, 2, int(rnd, 256)]);
  const port = pick(rnd, [echoPort, echoPort, closedPort, 0]);
  let addr: Buffer;
  let loopback = true;
  if (atyp === 1) addr = Buffer.from([127, 0, 0, 1]);
  else if (atyp === 4) addr = Buffer.from([...new Array<number>(15).fill(0), 1]);
  else if (atyp === 3) {
    const name = pick(rnd, ['localhost', '', '']);
    addr = Buffer.concat([Buffer.from([Buffer.byteLength(name)]), Buffer.from(name)]);
  } else {
    addr = bytes(rnd, int(rnd, 20));
    loopback = false;
  }
  const portBytes = Buffer.from([port >> 8, port & 0xff]);
  const req = Buffer.concat([Buffer.from([ver, cmd, rsv, atyp]), addr, portBytes]);
  const truncate = rnd() < 0.35 || !loopback;
  const cut = truncate ? req.subarray(0, int(rnd, req.length)) : req;
  const extra = !truncate && rnd() < 0.2 ? Buffer.from('early data\n') : Buffer.alloc(0);
  const input = Buffer.concat([goodGreeting, goodAuth, cut, extra]);
  const complete = !truncate && ver === 5 && cmd === 1 && rsv === 0 && (atyp === 1 || atyp === 4 || (atyp === 3 && addr[0]! > 0));
  // Only IPv4 is sure to reach the echo target (it listens on 127.0.0.1; ::1 and localhost may be refused).
  return { input, expectSuccess: complete && atyp === 1 && port === echoPort && port > 0, expectSilence: false };
}

function authBytes(ver: number, user: string, pass: string): Buffer {
  const u = Buffer.from(user, 'latin1').subarray(0, 255);
  const p = Buffer.from(pass, 'latin1').subarray(0, 255);
  return Buffer.concat([Buffer.from([ver, u.length]), u, Buffer.from([p.length]), p]);
}

export interface HttpCase {
  input: Buffer;
  /** the input holds at least one complete request head */
  complete: boolean;
}

const basic = (user: string, pass: string): string => `Basic ${Buffer.from(`${user}:${pass}`, 'latin1').toString('base64')}`;

/**
 * One HTTP input: random bytes, or one to five pipelined request heads with odd methods, request targets,
 * versions, header names and values, credentials, bodies and framing, huge headers; sometimes truncated.
 */
export function httpCase(rnd: Rnd, creds: { user: string; pass: string }, targetPort: number): HttpCase {
  if (rnd() < 0.1) return { input: bytes(rnd, int(rnd, 200)), complete: false };
  const count = rnd() < 0.7 ? 1 : 2 + int(rnd, 4);
  const heads: string[] = [];
  for (let i = 0; i < count; i++) heads.push(httpRequest(rnd, creds, targetPort));
  let input = Buffer.from(heads.join(''), 'latin1');
  let complete = true;
  if (rnd() < 0.25) {
    input = input.subarray(0, int(rnd, input.length));
    complete = input.includes('\r\n\r\n');
  }
  return { input, complete };
}

function httpRequest(rnd: Rnd, creds: { user: string; pass: string }, targetPort: number): string {
  const authorized = rnd() < 0.35;
  const connect = rnd() < 0.45;
  const method = connect
    ? 'CONNECT'
    : pick(rnd, ['GET', 'GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'TRACE', 'get', 'G E T', '', word(rnd, 1 + int(rnd, 10))]);
  // Loopback targets only when the request may be dialed; odd ones otherwise.
  const loop = pick(rnd, [
    `127.0.0.1:${targetPort}`,
    `[::1]:${targetPort}`,
    `localhost:${targetPort}`,
    '127.0.0.1:1',
    '127.0.0.1:0',
    '127.0.0.1:99999',
  ]);
  const odd = pick(rnd, ['', ':80', 'host', '[::1', '[zz]:1', 'a b:1', 'x'.repeat(3000) + ':1', '127.0.0.1:-1', '%00:1', '*']);
  const hostPort = authorized || rnd() < 0.5 ? loop : odd;
  const target = connect
    ? hostPort
    : pick(rnd, [
        `http://${hostPort}/`,
        `http://${hostPort}/p?q=${word(rnd, 5)}`,
        '/',
        '/relative',
        `https://${hostPort}/`,
        `ftp://${hostPort}/`,
        'http://',
        '*',
      ]);
  const version = pick(rnd, ['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9', 'HTTP/1.1 extra', '', 'http/1.1']);
  const lines = [`${method} ${target} ${version}`.trimEnd()];
  if (rnd() < 0.8) lines.push(`Host: ${hostPort}`);
  if (authorized)
    lines.push(`Proxy-Authorization: ${basic(rnd() < 0.7 ? creds.user : username(rnd, creds.user), rnd() < 0.8 ? creds.pass : 'wrong')}`);
  else if (rnd() < 0.5)
    lines.push(
      `Proxy-Authorization: ${pick(rnd, ['Basic', 'Basic !!!', 'Bearer x', basic('', ''), basic('nobody', 'x'), `Basic ${'A'.repeat(5000)}`])}`,
    );
  const extra = int(rnd, 6);
  for (let i = 0; i < extra; i++) {
    lines.push(
      pick(rnd, [
        `X-${word(rnd, 6)}: ${word(rnd, 20)}`,
        `${word(rnd, 8)}:${bytes(rnd, 10)
          .toString('latin1')
          .replace(/[\r\n]/g, '')}`,
        'Bad Header: x',
        ': empty-name',
        'no-colon',
        `Content-Length: ${pick(rnd, ['0', '5', '-1', 'abc', '99999999999', '1, 2'])}`,
        'Transfer-Encoding: chunked',
        'Transfer-Encoding: gzip, chunked',
        'Connection: close',
        'Connection: keep-alive',
        'Expect: 100-continue',
        `X-Huge: ${'h'.repeat(pick(rnd, [1000, 9000, 20_000]))}`,
      ]),
    );
  }
  let text = lines.join('\r\n') + '\r\n\r\n';
  if (rnd() < 0.15) text += pick(rnd, ['hello', '5\r\nhello\r\n0\r\n\r\n', 'zz\r\n', bytes(rnd, 16).toString('latin1')]);
  return text;
}

/** A well-formed greeting, RFC 1929 auth and CONNECT to 127.0.0.1:port. */
export function validConnect(creds: { user: string; pass: string }, port: number): Buffer {
  return Buffer.concat([
    Buffer.from([5, 1, 2]),
    authBytes(1, creds.user, creds.pass),
    Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, port >> 8, port & 0xff]),
  ]);
}
