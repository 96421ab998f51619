// A node:test reporter that prints, after everything else, each test that failed: its file, its path of
// suites and names, and the first lines of its error. A CI log is often read from its end (the summary lines),
// and the TAP above it can be thousands of lines long: this puts the name of a failure next to the totals.
// Parents that failed only because a subtest did are left out; a run without failures prints nothing.
const MAX_LINES = 12;

export default async function* failures(source) {
  const failed = [];
  // Files run side by side, so the names of the tests around a failure are kept per file.
  const stacks = new Map();
  for await (const event of source) {
    const stack =
      event.data?.file === undefined ? [] : (stacks.get(event.data.file) ?? stacks.set(event.data.file, []).get(event.data.file));
    if (event.type === 'test:start') {
      stack[event.data.nesting] = event.data.name;
      stack.length = event.data.nesting + 1;
    } else if (event.type === 'test:fail') {
      const error = event.data.details?.error;
      if (error?.failureType === 'subtestsFailed') continue;
      // A bundle's suite named after the file starts in the wrapper file, so its slot here can be empty.
      const path = [...stack.slice(0, event.data.nesting), event.data.name].filter(Boolean).join(' > ');
      const cause = error?.cause ?? error;
      const text = String(cause?.stack ?? cause?.message ?? cause ?? 'no error');
      failed.push({ file: event.data.file ?? '', path, text: text.split('\n').slice(0, MAX_LINES).join('\n') });
    }
  }
  if (failed.length === 0) return;
  yield `\n# ${failed.length} failed:\n`;
  for (const f of failed) {
    const file = f.file.replace(/^.*\/order\/\d+\//, '');
    yield `# FAILED ${file} :: ${f.path}\n${f.text.replace(/^/gm, '#   ')}\n`;
  }
}
