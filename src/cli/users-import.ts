// `rotor users import FILE`: users from a CSV file (a header row naming the fields of POST /v1/users; dotted
// names such as `quota.bytes` and `quota.period` build the nested fields; a cell holding JSON ([…] or {…})
// is read as JSON; empty cells are left out) or a JSON file (an array of records, or {"users": [...]}),
// sent to the running daemon's POST /v1/users/batch, `--batch` rows at a time (default 1,000). Every row
// is validated by the daemon on its own; rows that fail are listed on stderr with their line (CSV) or
// index (JSON) and do not stop the others. Passwords the daemon generated are printed once on stdout as
// CSV (`name,password`), or written to `--passwords FILE` (mode 0600). When no daemon listens at the
// config's admin address (or with `--store`), the rows go into the config's store instead, as creations the
// daemon finishes when it starts (src/users/store-import.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { configuredPorts } from '../config/ports.ts';
import { ConfigError } from '../config/load.ts';
import { RotorError } from '../errors/rotor-error.ts';
import { UsageError } from './exit.ts';

/** The import stopped part-way: the daemon could not be reached, or refused a batch. The message says how far it got. */
class ImportError extends RotorError {
  constructor(message: string) {
    super('IMPORT_FAILED', message, { httpStatus: 502 });
  }
}

export interface ImportArgs {
  file: string;
  /** http://host:port of the admin API (default: the config's admin.host:admin.port). */
  admin: string | undefined;
  /** Bearer token (default: the config's admin.token, or $ROTOR_ADMIN_TOKEN). */
  token: string | undefined;
  batch: number | undefined;
  passwords: string | undefined;
  /** Write into the store even when a daemon answers (it is not running against this store). */
  store?: boolean;
}

export interface ImportSummary {
  rows: number;
  created: number;
  failed: number;
  ms: number;
}

interface BatchAnswer {
  created: number;
  errors: { index: number; name: string | null; code: string; message: string }[];
  passwords: Record<string, string>;
}

const NUMBER_FIELDS = new Set(['sessTime', 'quota.bytes', 'rateBytesPerSec', 'maxConnections', 'pricePerGb', 'listen.port']);
const BOOLEAN_FIELDS = new Set(['enabled', 'metrics']);
const NULLABLE_FIELDS = new Set(['expiresAt', 'pricePerGb', 'listen', 'instances', 'products']);

/** RFC 4180 rows: quoted fields ("" for a quote), commas, CRLF or LF line ends. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      field = '';
      if (row.length > 1 || row[0] !== '') rows.push(row);
      row = [];
    } else field += c;
  }
  if (quoted) throw new UsageError('the CSV ends inside a quoted field');
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

function cellValue(key: string, cell: string, line: number): unknown {
  if (NULLABLE_FIELDS.has(key) && cell === 'null') return null;
  if (NUMBER_FIELDS.has(key)) {
    const n = Number(cell);
    // Left as text when not a number: the daemon names the field in its row error.
    return cell.trim() !== '' && Number.isFinite(n) ? n : cell;
  }
  if (BOOLEAN_FIELDS.has(key)) return cell === 'true' ? true : cell === 'false' ? false : cell;
  if (/^\s*[[{]/.test(cell)) {
    try {
      return JSON.parse(cell) as unknown;
    } catch {
      throw new UsageError(`line ${line}, ${key}: the cell starts like JSON but is not valid JSON`);
    }
  }
  return cell;
}

/** CSV text → records (and each record's line number, for messages). */
export function recordsFromCsv(text: string): { records: Record<string, unknown>[]; lines: number[] } {
  const rows = parseCsv(text);
  const header = rows.shift();
  if (!header || !header.includes('name')) throw new UsageError('the CSV needs a header row with a `name` column');
  const records: Record<string, unknown>[] = [];
  const lines: number[] = [];
  rows.forEach((cells, r) => {
    const line = r + 2;
    const rec: Record<string, unknown> = {};
    header.forEach((key, c) => {
      const cell = cells[c] ?? '';
      if (cell === '' || key === '') return;
      const value = cellValue(key, cell, line);
      const path = key.split('.');
      let at = rec;
      for (const part of path.slice(0, -1)) at = (at[part] ??= {}) as Record<string, unknown>;
      at[path[path.length - 1]!] = value;
    });
    records.push(rec);
    lines.push(line);
  });
  return { records, lines };
}

export function readImportFile(file: string): { records: unknown[]; where: (i: number) => string } {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const trimmed = text.trimStart();
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new UsageError(`${file}: not valid JSON`);
    }
    const records = Array.isArray(parsed) ? parsed : (parsed as { users?: unknown }).users;
    if (!Array.isArray(records)) throw new UsageError(`${file}: expected an array of users or {"users": [...]}`);
    return { records, where: (i) => `record ${i}` };
  }
  const { records, lines } = recordsFromCsv(text);
  return { records, where: (i) => `line ${lines[i]}` };
}

function adminBase(config: Config, override: string | undefined): string {
  if (override !== undefined) {
    if (!/^https?:\/\/[^/]+$/.test(override.replace(/\/$/, ''))) throw new UsageError('--admin must be http://host:port');
    return override.replace(/\/$/, '');
  }
  const { host, port } = config.admin;
  if (port === 0) throw new UsageError('admin.port is 0 in the config: give --admin http://host:port');
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

export async function runUsersImport(
  args: ImportArgs,
  config: Config,
  out: (text: string) => void,
  note: (text: string) => void,
): Promise<ImportSummary> {
  const started = Date.now();
  const { records, where } = readImportFile(args.file);
  let result = args.store === true ? undefined : await sendToDaemon(args, config, records, where, note);
  if (result === undefined) {
    if (args.store !== true)
      note(`no daemon answers at ${adminBase(config, undefined)}: importing into the store (${config.store.path})\n`);
    result = await importToStore(config, records, where, note);
  }
  const { created, failed, passwords } = result;
  if (passwords.length > 0) {
    const csv = `name,password\n${passwords.map(([n, p]) => `${n},${p}`).join('\n')}\n`;
    if (args.passwords !== undefined) writeFileSync(args.passwords, csv, { mode: 0o600 });
    else out(csv);
  }
  const summary = { rows: records.length, created, failed, ms: Date.now() - started };
  note(
    `imported ${created} of ${records.length} users in ${(summary.ms / 1000).toFixed(1)} s${failed > 0 ? `; ${failed} rows failed (above)` : ''}\n`,
  );
  return summary;
}

interface ImportResult {
  created: number;
  failed: number;
  passwords: [string, string][];
}

/** The rows through the running daemon's POST /v1/users/batch; undefined when no daemon listens at the config's admin address. */
async function sendToDaemon(
  args: ImportArgs,
  config: Config,
  records: unknown[],
  where: (i: number) => string,
  note: (text: string) => void,
): Promise<ImportResult | undefined> {
  const base = adminBase(config, args.admin);
  const token = args.token ?? process.env.ROTOR_ADMIN_TOKEN ?? config.admin.token;
  const size = args.batch ?? 1_000;
  let created = 0;
  let failed = 0;
  const passwords: [string, string][] = [];
  for (let from = 0; from < records.length; from += size) {
    const chunk = records.slice(from, from + size);
    let res: Response;
    try {
      res = await fetch(`${base}/v1/users/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ users: chunk }),
        signal: AbortSignal.timeout(30 * 60_000),
      });
    } catch (err) {
      const code = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      // Nobody listens at the config's own admin address: no daemon runs, the store is written instead.
      if (from === 0 && code === 'ECONNREFUSED' && args.admin === undefined) return undefined;
      throw new ImportError(`no daemon answered at ${base} (${code}); ${created} users created before`);
    }
    if (res.status === 401) throw new ConfigError([{ key: 'admin.token', problem: 'the running daemon refused it' }]);
    const body = (await res.json().catch(() => undefined)) as BatchAnswer | { error?: { code: string; message: string } } | undefined;
    if (!res.ok || body === undefined || !('created' in body)) {
      const e = body && 'error' in body ? body.error : undefined;
      throw new ImportError(
        `the daemon refused the batch of rows ${from}-${from + chunk.length - 1}: ${res.status} ${e ? `${e.code}: ${e.message}` : ''}; ${created} users created before`,
      );
    }
    created += body.created;
    failed += body.errors.length;
    for (const e of body.errors) note(`${where(from + e.index)}${e.name ? ` (${e.name})` : ''}: ${e.code}: ${e.message}\n`);
    for (const [name, pw] of Object.entries(body.passwords)) passwords.push([name, pw]);
    note(`${Math.min(from + size, records.length)}/${records.length} rows sent, ${created} created\n`);
  }
  return { created, failed, passwords };
}

/**
 * The rows written into the store as creation intents (src/users/store-import.ts), which the daemon finishes
 * (sub accounts made) when it starts.
 */
async function importToStore(
  config: Config,
  records: unknown[],
  where: (i: number) => string,
  note: (text: string) => void,
): Promise<ImportResult> {
  const { openBackends } = await import('../store/backends.ts');
  const { importIntoStore } = await import('../users/store-import.ts');
  const { portsByNumber } = await import('../users/port-check.ts');
  const { lockStore } = await import('../store/store-lock.ts');
  // Refused while a daemon runs on this store: it would not see the rows, and both would write the file.
  const lock = lockStore(config.store.path, 'rotor users import --store');
  let backends: Awaited<ReturnType<typeof openBackends>>;
  try {
    backends = await openBackends(config.store.path, { prefix: config.fleet.prefix });
  } catch (err) {
    lock?.release();
    throw err;
  }
  try {
    const result = await importIntoStore(backends.users, records, {
      reservedPorts: portsByNumber(configuredPorts(config)),
      configUsers: config.users.map((u) => u.name),
      tls: config.proxy.https !== undefined,
    });
    for (const e of result.errors) note(`${where(e.index)}${e.name ? ` (${e.name})` : ''}: ${e.code}: ${e.message}\n`);
    if (result.created > 0)
      note(`${result.created} users written to the store; the daemon makes their platform sub accounts when it starts\n`);
    return { created: result.created, failed: result.errors.length, passwords: Object.entries(result.passwords) };
  } finally {
    await backends.close();
    lock?.release();
  }
}
