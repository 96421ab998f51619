// A real pino logger (createLogger, redaction included) whose JSON lines a test can read back.
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/telemetry/logger.ts';

export function captureLogger(level = 'debug'): { logger: Logger; text: () => string } {
  let out = '';
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out += chunk.toString();
      cb();
    },
  });
  return { logger: createLogger({ level, pretty: false, destination }), text: () => out };
}
