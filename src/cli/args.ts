// Command-line parsing (node:util parseArgs): the subcommand is the first word; each subcommand accepts only
// its own options, so a misplaced option is a usage error rather than silently ignored.
import { parseArgs } from 'node:util';
import { UsageError } from './exit.ts';

export const USAGE = `usage: rotor <command> [options]

commands:
  start [--config FILE]                         run the daemon
  sim [--host H] [--port N]                     run the sandbox platform simulator alone
  call <Operation> [--params JSON|@FILE] [--config FILE]
                                                call one platform operation, print the decrypted answer
  check-config [--config FILE]                  validate a config, print it with secrets redacted
  users import FILE [--config FILE] [--admin URL] [--token T] [--batch N] [--passwords OUT] [--store]
                                                create users from a CSV (header row) or JSON file through
                                                the running daemon's admin API, or into the store when
                                                no daemon runs (--store: always); generated passwords on
                                                stdout (or OUT) as CSV

The config comes from --config, else $ROTOR_CONFIG, else config/default.yaml.
Exit codes: 0 ok, 2 bad usage or invalid config, 3 platform error, 4 transport failure.`;

export type Command =
  | { name: 'help' }
  | { name: 'start'; config: string | undefined }
  | { name: 'sim'; host: string | undefined; port: number | undefined }
  | { name: 'call'; operation: string; params: string | undefined; config: string | undefined }
  | { name: 'check-config'; config: string | undefined }
  | {
      name: 'users-import';
      file: string;
      config: string | undefined;
      admin: string | undefined;
      token: string | undefined;
      batch: number | undefined;
      passwords: string | undefined;
      store: boolean;
    };

const OPTIONS = {
  start: { config: { type: 'string', short: 'c' } },
  sim: { host: { type: 'string' }, port: { type: 'string' } },
  call: { params: { type: 'string', short: 'p' }, config: { type: 'string', short: 'c' } },
  'check-config': { config: { type: 'string', short: 'c' } },
  users: {
    config: { type: 'string', short: 'c' },
    admin: { type: 'string' },
    token: { type: 'string' },
    batch: { type: 'string' },
    passwords: { type: 'string' },
    store: { type: 'boolean' },
  },
} as const;

type CommandName = keyof typeof OPTIONS;

function isCommandName(s: string): s is CommandName {
  return Object.prototype.hasOwnProperty.call(OPTIONS, s);
}

export function parseCommand(argv: string[]): Command {
  const [first, ...rest] = argv;
  if (first === undefined) throw new UsageError('no command given');
  if (first === '--help' || first === '-h' || first === 'help') return { name: 'help' };
  if (!isCommandName(first)) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  if (rest.includes('--help') || rest.includes('-h')) return { name: 'help' };

  let values: Record<string, unknown>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: rest, options: OPTIONS[first], allowPositionals: true, strict: true }));
  } catch (err) {
    throw new UsageError(`${first}: ${(err as Error).message}`);
  }
  const str = (k: string) => values[k] as string | undefined;

  switch (first) {
    case 'call': {
      if (positionals.length !== 1) throw new UsageError('call: expected exactly one operation name');
      return { name: 'call', operation: positionals[0]!, params: str('params'), config: str('config') };
    }
    case 'sim': {
      if (positionals.length > 0) throw new UsageError(`sim: unexpected argument ${positionals[0]}`);
      const p = str('port');
      if (p !== undefined && !(/^\d+$/.test(p) && Number(p) <= 65_535)) throw new UsageError('sim: --port must be a number 0-65535');
      return { name: 'sim', host: str('host'), port: p === undefined ? undefined : Number(p) };
    }
    case 'users': {
      if (positionals[0] !== 'import' || positionals.length !== 2) throw new UsageError('users: expected `users import FILE`');
      const b = str('batch');
      if (b !== undefined && !(/^\d+$/.test(b) && Number(b) >= 1 && Number(b) <= 10_000))
        throw new UsageError('users import: --batch must be a number 1-10000');
      return {
        name: 'users-import',
        file: positionals[1]!,
        config: str('config'),
        admin: str('admin'),
        token: str('token'),
        batch: b === undefined ? undefined : Number(b),
        passwords: str('passwords'),
        store: values.store === true,
      };
    }
    default: {
      if (positionals.length > 0) throw new UsageError(`${first}: unexpected argument ${positionals[0]}`);
      return { name: first, config: str('config') };
    }
  }
}
