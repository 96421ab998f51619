// The CPU table of `npm run bench` (bench/run.ts): each process's CPU per operation over all repetitions of a
// case, as bench/ab.ts reads it: the CPU of every measured window summed, divided by the operations of those
// windows summed. A median of per-repetition ratios read a gateway that was slowed by the machine's load in one
// repetition (fewer operations, each costing more: less work per wake-up, the time-driven work spread over fewer)
// as if that repetition were typical; the sums weigh each repetition by the operations it did.
import { fmt } from './stats.ts';

export const ROLES = ['gateway', 'upstream', 'target', 'client'] as const;
export type Role = (typeof ROLES)[number];

/** One measured window: one case, one path, one repetition. */
export interface CpuWindow {
  key: string;
  path: string;
  rep: number;
  ops: number;
  seconds: number;
  /** CPU ms each process spent in the window (all threads, ended ones included). */
  cpu: Partial<Record<Role, number>>;
  /** Of the gateway's, its main thread's. */
  gatewayMain?: number;
}

export const CPU_HEADERS = ['case', 'per', 'path', 'gateway', '(main', '+ other)', 'upstream', 'target', 'client', 'sum', 'ops'];
/** Columns right-aligned in a markdown table. */
export const CPU_NUMERIC = [3, 4, 5, 6, 7, 8, 9, 10];
const UNITS: Record<string, string> = { M1: 'request', M2: 'tunnel', M3: 'MiB', M4: 'tunnel' };

const per = (ms: number, ops: number): string => (ops > 0 && Number.isFinite(ms) ? fmt(ms / ops) : '-');

/** Σ CPU / Σ operations by case and path, in the order the cases were first measured and `paths` gives. */
export function cpuRows(windows: readonly CpuWindow[], paths: readonly string[]): string[][] {
  const keys = [...new Set(windows.map((w) => w.key))];
  const out: string[][] = [];
  for (const key of keys) {
    for (const path of paths) {
      const ws = windows.filter((w) => w.key === key && w.path === path && w.ops > 0);
      if (ws.length === 0) continue;
      const ops = ws.reduce((a, w) => a + w.ops, 0);
      const total = (role: Role): number =>
        ws.some((w) => w.cpu[role] === undefined) ? NaN : ws.reduce((a, w) => a + (w.cpu[role] ?? 0), 0);
      const byRole = ROLES.map(total);
      const main = ws.some((w) => w.gatewayMain === undefined) ? NaN : ws.reduce((a, w) => a + w.gatewayMain!, 0);
      const sum = byRole.filter((x) => Number.isFinite(x)).reduce((a, b) => a + b, 0);
      out.push([
        key,
        UNITS[key.slice(0, 2)] ?? 'op',
        path,
        per(byRole[0]!, ops),
        per(main, ops),
        per(byRole[0]! - main, ops),
        per(byRole[1]!, ops),
        per(byRole[2]!, ops),
        per(byRole[3]!, ops),
        per(sum, ops),
        String(ops),
      ]);
    }
  }
  return out;
}

export const DETAIL_HEADERS = ['case', 'rep', 'path', 'ops', 'ops/s', 'gateway ms', 'main', 'other', 'gateway per op'];

/** Every window of the gateways (the evidence behind the sums: rate and CPU per operation per repetition). */
export function cpuDetailRows(windows: readonly CpuWindow[]): string[][] {
  return windows
    .filter((w) => w.cpu.gateway !== undefined)
    .map((w) => [
      w.key,
      String(w.rep + 1),
      w.path,
      String(w.ops),
      fmt(w.ops / w.seconds),
      fmt(w.cpu.gateway!),
      w.gatewayMain === undefined ? '-' : fmt(w.gatewayMain),
      w.gatewayMain === undefined ? '-' : fmt(w.cpu.gateway! - w.gatewayMain),
      per(w.cpu.gateway!, w.ops),
    ]);
}
