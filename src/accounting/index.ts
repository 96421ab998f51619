// The accounting component: per-user byte meters and limits, units, product facts, platform-side limit sync.
export * from './units.ts';
export * from './accounting.ts';
export * from './products.ts';
export * from './platform-sync.ts';
