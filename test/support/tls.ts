// Test certificates made with the openssl command (a real CA, a real leaf): a CA per test, leaves for the
// loopback names (127.0.0.1, ::1, localhost), each in PEM files under a temp dir removed by `cleanup()`.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCa {
  dir: string;
  /** PEM file of the CA certificate (what a client trusts). */
  certFile: string;
  keyFile: string;
  certPem(): string;
  /** A leaf signed by this CA: cert and key files, for `names` (IP addresses and DNS names). */
  leaf(name: string, names?: string[]): Promise<{ certFile: string; keyFile: string }>;
  cleanup(): void;
}

const LOOPBACK_NAMES = ['127.0.0.1', '::1', 'localhost'];

export async function makeCa(label = 'Rotor Test CA'): Promise<TestCa> {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-tls-'));
  const certFile = join(dir, 'ca.pem');
  const keyFile = join(dir, 'ca-key.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    `/CN=${label}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  let serial = 1;
  return {
    dir,
    certFile,
    keyFile,
    certPem: () => readFileSync(certFile, 'utf8'),
    async leaf(name, names = LOOPBACK_NAMES) {
      const key = join(dir, `${name}-key.pem`);
      const csr = join(dir, `${name}.csr`);
      const cert = join(dir, `${name}.pem`);
      const ext = join(dir, `${name}.ext`);
      const san = names.map((n) => (/^[0-9.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
      writeFileSync(ext, `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
      await run('openssl', [
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${name}`,
      ]);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        certFile,
        '-CAkey',
        keyFile,
        '-set_serial',
        String(serial++),
        '-days',
        '2',
        '-out',
        cert,
        '-extfile',
        ext,
      ]);
      return { certFile: cert, keyFile: key };
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
