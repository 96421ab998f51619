// One ioredis connection as the fleet uses it: fail fast, never queue. With the offline queue off and one
// retry per command, a caller sees a typed StoreUnavailableError within `commandTimeoutMs` when Redis is
// gone instead of a promise that waits for a reconnect; ioredis keeps reconnecting in the background and
// the next call after Redis is back simply works. The outage is logged once at error level (and its end
// once at info), not once per failed call.
import { Redis, ReplyError, type RedisOptions } from 'ioredis';
import type { Logger } from '../telemetry/logger.ts';
import { redactText } from '../telemetry/logger.ts';
import { StoreError, StoreUnavailableError } from './errors.ts';

export interface RedisConnectionOptions {
  /** For logs and CLIENT SETNAME (e.g. 'rotor-store'). */
  name?: string;
  logger?: Logger;
  /** Give up on a command after this long (ms); default 1000. */
  commandTimeoutMs?: number;
  /** Give up connecting after this long (ms); default 2000. */
  connectTimeoutMs?: number;
  /** Longest wait between reconnect attempts (ms); default 1000. */
  maxReconnectDelayMs?: number;
}

/** A Redis reply error a Lua script raised on purpose: `ROTOR_<CODE> message`. */
const OWN_ERROR = /^ROTOR_([A-Z_]+)\b\s*(.*)$/s;

export class RedisConnection {
  readonly client: Redis;
  private readonly logger: Logger | undefined;
  private readonly name: string;
  private down = false;
  private closed = false;

  constructor(url: string, options: RedisConnectionOptions = {}) {
    this.logger = options.logger;
    this.name = options.name ?? 'rotor';
    const maxDelay = options.maxReconnectDelayMs ?? 1000;
    const redisOptions: RedisOptions = {
      lazyConnect: true,
      connectionName: this.name,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? 1000,
      connectTimeout: options.connectTimeoutMs ?? 2000,
      // Keep reconnecting for ever, never faster than every 50 ms nor slower than maxDelay.
      retryStrategy: (times) => Math.min(maxDelay, 50 * 2 ** Math.min(times, 10)),
      autoResubscribe: false,
      enableReadyCheck: true,
    };
    this.client = new Redis(url, redisOptions);
    // Without a listener ioredis prints every connection error; the outage is reported once instead.
    this.client.on('error', (err: Error) => this.markDown(err));
    this.client.on('close', () => {
      if (!this.closed) this.markDown(new Error('connection closed'));
    });
    this.client.on('ready', () => {
      if (this.down) this.logger?.info({ redis: this.name }, 'redis is reachable again');
      this.down = false;
    });
  }

  /** Connects (once); rejects with StoreUnavailableError when Redis cannot be reached in time. */
  async connect(): Promise<void> {
    if (this.client.status === 'ready') return;
    try {
      if (this.client.status === 'wait') await this.client.connect();
      else await this.waitReady();
    } catch (err) {
      throw this.toStoreError(err, 'connect');
    }
  }

  /** True while the connection is usable. */
  get ready(): boolean {
    return this.client.status === 'ready';
  }

  /** Runs one Redis operation, mapping every failure to a StoreError with a stable code. */
  async run<T>(what: string, op: (client: Redis) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    try {
      return await op(this.client);
    } catch (err) {
      throw this.toStoreError(err, what);
    }
  }

  toStoreError(err: unknown, what: string): StoreError {
    if (err instanceof StoreError) return err;
    const message = redactText(err instanceof Error ? err.message : String(err));
    if (err instanceof ReplyError) {
      const own = OWN_ERROR.exec(message);
      if (own) return new StoreError(`STORE_${own[1]}`, `${what}: ${own[2]}`);
      return new StoreError('STORE_FAILED', `${what}: redis refused: ${message}`, { cause: err });
    }
    // A fault of Rotor's own code inside the operation (a stack overflow from a spread, a TypeError) is not an
    // outage: retrying it cannot help, so it must not read as 'redis unavailable' to a caller that retries those.
    if (err instanceof RangeError || err instanceof TypeError || err instanceof ReferenceError || err instanceof SyntaxError)
      return new StoreError('STORE_FAILED', `${what}: failed in Rotor before reaching redis: ${message}`, { cause: err });
    // Connection closed, not writeable (offline queue off), retries exhausted, command timeout.
    return new StoreUnavailableError(`${what}: redis unavailable: ${message}`, { cause: err });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (this.client.status === 'ready') await this.client.quit();
      else this.client.disconnect();
    } catch {
      this.client.disconnect();
    }
  }

  private waitReady(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onReady = () => {
        this.client.off('end', onEnd);
        resolve();
      };
      const onEnd = () => {
        this.client.off('ready', onReady);
        reject(new Error('connection ended'));
      };
      this.client.once('ready', onReady);
      this.client.once('end', onEnd);
    });
  }

  private markDown(err: Error): void {
    if (this.down || this.closed) return;
    this.down = true;
    this.logger?.error(
      { redis: this.name, err: { message: redactText(err.message) } },
      'redis is unreachable: shared state unavailable; retrying in the background',
    );
  }
}
