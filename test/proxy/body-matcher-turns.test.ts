// The body-pattern thread (src/proxy/request-rules-matcher.ts) serves the customers whose rules wait in turn:
// one customer's many hostile pages (each stopped by the 100 ms deadline) delay another customer's response by
// one deadline, not one per page (review18 #4: first come, first served, 30 hostile pages held another customer's
// match 3.7 s). A real matcher thread, real deadlines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyMatcher } from '../../src/proxy/request-rules-matcher.ts';

const HOSTILE = `(?:${'a'.repeat(400)}){0,127}b`;
const PAGE = Buffer.from('a'.repeat(64 * 1024));

test("30 hostile pages of one customer: another customer's match is answered after about one deadline", async () => {
  const matcher = new BodyMatcher({ deadlineMs: 100 });
  try {
    // The thread up first: its start is not what is measured.
    await new Promise<void>((resolve) => matcher.match(Buffer.from('warm'), ['warm'], [4], () => resolve()));
    const scraper = {};
    const other = {};
    const stopped: Promise<number | undefined>[] = [];
    for (let i = 0; i < 30; i++)
      stopped.push(new Promise((resolve) => matcher.match(PAGE, [HOSTILE], [PAGE.length], (_found, at) => resolve(at), scraper)));
    const started = performance.now();
    const found = await new Promise<number>((resolve) =>
      matcher.match(Buffer.from('please solve the captcha'), ['solve (this|the) captcha'], [8192], (f) => resolve(f), other),
    );
    const waitedMs = performance.now() - started;
    assert.equal(found, 0, "the other customer's pattern matched");
    console.log(`# another customer's match behind 30 hostile pages: ${waitedMs.toFixed(0)} ms`);
    // Its turn comes after the hostile page running now: one deadline and a thread's restart, not 30.
    assert.ok(waitedMs < 1000, `the other customer's match waited ${waitedMs.toFixed(0)} ms`);
    const ats = await Promise.all(stopped);
    assert.ok(
      ats.every((at) => at === 0),
      'every hostile page stopped at its pattern',
    );
  } finally {
    matcher.close();
  }
});
