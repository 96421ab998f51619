// The `sockopt` module (N-API setsockopt/getsockopt: Node has none), loaded once; null where it cannot load.
import { createRequire } from 'node:module';

export interface SockOpt {
  setsockopt(socket: unknown, level: number, name: number, value: number): void;
}

let binding: SockOpt | null | undefined;

export function sockoptBinding(): SockOpt | null {
  if (binding !== undefined) return binding;
  try {
    binding = createRequire(import.meta.url)('sockopt') as SockOpt;
  } catch {
    binding = null;
  }
  return binding;
}
