// A node:test reporter that writes one line per test file: the time its tests took in seconds and its path,
// slowest first, so the suite's time can be read file by file (`node scripts/run-tests.mjs --durations <out>`).
// A file's time is the sum of its top-level tests' durations (they run one after another inside the file's
// process); the process's own start (tsx, imports) is not in it. Files run in a bundle and Redis-pass files show
// as the suite their wrapper names after them (`test/x.test.ts`, `redis: test/x.test.ts`).
export default async function* fileDurations(source) {
  const byFile = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0 && event.data.file) {
      // scripts/run-tests.mjs links each file it runs alone as <work>/order/NNN/<its path>; a bundle runs each
      // of its files in a top-level suite named after the file.
      const alone = /\/rotor-test-run-[^/]+\/order\/\d+\/(test\/.*\.ts)$/.exec(event.data.file);
      const key = alone ? alone[1] : /\/rotor-test-run-[^/]+\//.test(event.data.file) ? event.data.name : event.data.file;
      const f = byFile.get(key) ?? { ms: 0, failed: 0, tests: 0 };
      f.ms += event.data.details.duration_ms;
      f.tests += 1;
      if (event.type === 'test:fail') f.failed += 1;
      byFile.set(key, f);
    }
  }
  const cwd = process.cwd() + '/';
  const files = [...byFile].map(([file, f]) => ({ name: file.replace(cwd, ''), ...f }));
  files.sort((a, b) => b.ms - a.ms);
  const total = files.reduce((s, f) => s + f.ms, 0);
  for (const f of files) yield `${(f.ms / 1000).toFixed(1).padStart(7)} s  ${f.failed ? `FAIL(${f.failed}) ` : ''}${f.name}\n`;
  yield `${(total / 1000).toFixed(1).padStart(7)} s  sum over ${files.length} files\n`;
}
