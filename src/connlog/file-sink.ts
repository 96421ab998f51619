// The optional JSON-lines file of connection records (config log.access.file), rotated by size through
// rotating-file-stream: the current file keeps its name and older ones become <name>.1 … <name>.<rotate>.
// One write per batch, never per connection.
import { basename, dirname } from 'node:path';
import { mkdirSync } from 'node:fs';
import { createStream, type RotatingFileStream } from 'rotating-file-stream';
import type { ConnectionRecord, RecordSink } from './types.ts';

export interface FileSinkOptions {
  /** The file's path. */
  file: string;
  /** Rotate when the file reaches this size: rotating-file-stream's size text, e.g. '100M', '10K'. */
  maxSize: string;
  /** Rotated files kept. */
  rotate: number;
}

export class JsonLinesFileSink implements RecordSink {
  private readonly stream: RotatingFileStream;
  private failure: Error | undefined;

  constructor(options: FileSinkOptions) {
    const dir = dirname(options.file);
    mkdirSync(dir, { recursive: true });
    this.stream = createStream(basename(options.file), {
      path: dir,
      size: options.maxSize as `${number}M`,
      rotate: options.rotate,
    });
    // An 'error' with no listener would end the process; the next write reports it instead.
    this.stream.on('error', (err: Error) => {
      this.failure = err;
    });
  }

  write(records: readonly ConnectionRecord[]): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    let text = '';
    for (const r of records) text += `${JSON.stringify(r)}\n`;
    return new Promise((resolve, reject) => {
      this.stream.write(text, (err) => (err ? reject(err) : resolve()));
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.stream.end(() => resolve());
    });
  }
}
