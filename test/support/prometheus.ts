// The one reader of Prometheus text exposition in the tests (what GET /metrics answers): samples with their
// labels, and the two questions tests ask of them. Label values are compared as written (escapes kept).

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Every sample line of `text` (comments and blank lines skipped). */
export function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(LABEL)) labels[pair[1]!] = pair[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

const matches = (s: Sample, name: string, labels: Record<string, string>): boolean =>
  s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);

/** The first sample `name` whose labels include every pair of `labels`; undefined when there is none. */
export function findSample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return parseSamples(text).find((s) => matches(s, name, labels))?.value;
}

/** The sum of the samples `name` whose labels include every pair of `labels` (0 when there is none). */
export function sumSamples(text: string, name: string, labels: Record<string, string> = {}): number {
  return parseSamples(text)
    .filter((s) => matches(s, name, labels))
    .reduce((sum, s) => sum + s.value, 0);
}
