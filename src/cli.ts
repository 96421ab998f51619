// The `rotor` command (bin/rotor.js and `npm start` load this file). Parses the command line, runs one
// subcommand, and maps failures to the exit codes of docs/reference.md.
import { pino } from 'pino';
import { parseCommand, USAGE, type Command } from './cli/args.ts';
import { describeFailure, EXIT, UsageError } from './cli/exit.ts';
import { loadConfig, resolveConfigFile } from './config/load.ts';
import { createLogger } from './telemetry/logger.ts';

const out = (text: string) => process.stdout.write(text);

async function run(command: Command): Promise<number> {
  switch (command.name) {
    case 'help':
      out(`${USAGE}\n`);
      return EXIT.OK;
    case 'check-config': {
      const { renderConfig, renderDrawPlans } = await import('./cli/check-config.ts');
      const config = loadConfig({ file: command.config });
      out(renderConfig(config, resolveConfigFile({ file: command.config })));
      out(await renderDrawPlans(config));
      return EXIT.OK;
    }
    case 'call': {
      const config = loadConfig({ file: command.config });
      // stdout carries only the answer; logs go to stderr, quiet unless asked for.
      const logger = createLogger({ level: process.env.ROTOR_LOG_LEVEL || 'warn', pretty: false, destination: pino.destination(2) });
      const { runCall } = await import('./cli/call.ts');
      await runCall(command, config, logger, out);
      return EXIT.OK;
    }
    case 'sim': {
      const { runSim } = await import('./cli/sim.ts');
      await runSim(command, out);
      return EXIT.OK;
    }
    case 'users-import': {
      const config = loadConfig({ file: command.config });
      const { runUsersImport } = await import('./cli/users-import.ts');
      const summary = await runUsersImport(command, config, out, (text) => process.stderr.write(text));
      // Some rows not created: the input needs a fix (each row's reason is on stderr).
      return summary.failed > 0 ? EXIT.USAGE : EXIT.OK;
    }
    case 'start': {
      // Before the daemon's first full collection: process.nextTick's feedback stays monomorphic (./startup/tick-maps.ts).
      (await import('./startup/tick-maps.ts')).keepTickObjectMaps();
      (await import('./startup/heap.ts')).tuneHeapGrowth();
      const config = loadConfig({ file: command.config });
      const { runDaemon } = await import('./main.ts');
      // The file is resolved once so a SIGHUP reload reads the same file the daemon started with.
      return (await runDaemon(config, resolveConfigFile({ file: command.config }))) ? EXIT.OK : EXIT.INTERNAL;
    }
  }
}

async function main(argv: string[]): Promise<number> {
  try {
    return await run(parseCommand(argv));
  } catch (err) {
    const { exitCode, message } = describeFailure(err);
    // A platform refusal prints exactly `platform error <code>: <msg>` (docs/reference.md).
    if (err instanceof UsageError) process.stderr.write(`rotor: ${message}\n\n${USAGE}\n`);
    else process.stderr.write(`${message}\n`);
    return exitCode;
  }
}

const code = await main(process.argv.slice(2));
// One-shot commands end here even if a library left a handle open; stdout/stderr are synchronous for
// files and pipes on POSIX, so nothing written is lost.
process.exit(code);
