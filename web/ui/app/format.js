// Numbers and times as an operator reads them.
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  if (n < 0) return 'unlimited';
  let v = n;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : 1)} ${UNITS[i]}`;
}

export const rate = (n) => (n ? `${bytes(n)}/s` : '0 B/s');

export const count = (n) => (n === undefined || n === null ? '–' : Number(n).toLocaleString('en-US'));

/** Epoch ms (or RFC 3339) as local date and time, to the second. */
export function time(v) {
  if (v === undefined || v === null || v === '' || v === 0) return '–';
  const d = new Date(typeof v === 'number' && v < 1e11 ? v * 1000 : v);
  if (Number.isNaN(d.getTime())) return String(v);
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function duration(ms) {
  if (ms === undefined || ms === null) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.round(s / 60);
  return m < 120 ? `${m} min` : `${Math.round(m / 60)} h`;
}

/** "in 5 min" / "3 min ago" from now. */
export function relative(v, now = Date.now()) {
  if (!v) return '–';
  const d = (typeof v === 'number' ? v : Date.parse(v)) - now;
  return d >= 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}

export const ORDER_STATUS = { 1: 'pending', 2: 'processing', 3: 'succeeded', 4: 'failed', 5: 'partial' };
export const ORDER_TYPE = { 1: 'open', 2: 'renew', 3: 'release', 5: 'change' };
export const INSTANCE_STATUS = { 1: 'to be created', 2: 'creating', 3: 'running', 6: 'stopped', 10: 'closed', 11: 'released' };
export const isFinalOrder = (status) => status === 3 || status === 4 || status === 5;
