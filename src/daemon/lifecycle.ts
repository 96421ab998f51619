// What the daemon started, in order, so that it stops in the reverse order: a component registered later
// (the listeners) stops before one it depends on (the connection log, the store).
import type { Logger } from '../telemetry/logger.ts';

export type StopFn = () => Promise<unknown> | unknown;

export class StopStack {
  private readonly stack: { name: string; stop: StopFn }[] = [];

  constructor(private readonly logger: Logger) {}

  onStop(name: string, stop: StopFn): void {
    this.stack.push({ name, stop });
  }

  /** Stops everything registered, newest first; one component's failure does not keep the others running. */
  async closeAll(): Promise<void> {
    while (this.stack.length > 0) {
      const { name, stop } = this.stack.pop()!;
      try {
        await stop();
      } catch (err) {
        this.logger.error({ err, component: name }, 'error while stopping');
      }
    }
  }
}

/** What every assembler is handed: the config it reads, where it registers its stop, logs and metrics. */
export interface AssemblyContext {
  readonly logger: Logger;
  readonly metrics: import('../telemetry/metrics.ts').Metrics;
  readonly stops: StopStack;
  /** The gateway's clock when a test injects one. */
  readonly now: (() => number) | undefined;
}

/** `{ now }` when a clock is injected, else nothing (the components' own default, Date.now). */
export function clockOption(ctx: AssemblyContext): { now?: () => number } {
  return ctx.now ? { now: ctx.now } : {};
}
