// The tunnel pipeline's shape (docs/architecture.md "The path of a connection"): the listeners are protocol
// adapters that hand every client to src/proxy/tunnel.ts, never to the router's dial, the dialers or the relay
// themselves; a connection's record is written in one module, src/proxy/tunnel-record.ts; and every relay counts
// its bytes through one metered stream, src/proxy/tunnel-stream.ts. Read from the
// sources with TypeScript's parser, so a listener that starts dialing or relaying on its own fails here.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

const PROXY = 'src/proxy';
/** The protocol adapters: every way a client comes in. */
const LISTENERS = ['http.ts', 'socks5.ts', 'https-listener.ts'];
/** Stages the pipeline runs; a listener importing one of them (other than for its types) runs it itself. */
const STAGES = /^\.\/(router|relay|dial-[a-z0-9-]+|upstream-dial|warm|cancel|errors|http-forward)\.ts$/;

/** The modules a file imports for values (type-only imports are left out: a type is no call). */
function valueImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const node of source.statements) {
    if (!ts.isImportDeclaration(node) && !ts.isExportDeclaration(node)) continue;
    const spec = node.moduleSpecifier;
    if (!spec || !ts.isStringLiteral(spec)) continue;
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      if (clause?.isTypeOnly) continue;
      const named = clause?.namedBindings;
      const onlyTypes =
        clause !== undefined &&
        clause.name === undefined &&
        named !== undefined &&
        ts.isNamedImports(named) &&
        named.elements.length > 0 &&
        named.elements.every((e) => e.isTypeOnly);
      if (onlyTypes) continue;
    } else if (node.isTypeOnly) continue;
    out.push(spec.text);
  }
  return out;
}

describe('the tunnel pipeline', () => {
  test('every listener hands its clients to tunnel.ts and runs no stage of it itself', () => {
    const wrong: string[] = [];
    let usesPipeline = 0;
    for (const name of LISTENERS) {
      const imports = valueImports(join(PROXY, name));
      if (imports.includes('./tunnel.ts')) usesPipeline++;
      for (const i of imports) if (STAGES.test(i)) wrong.push(`${name} → ${i}`);
    }
    assert.deepEqual(wrong, [], 'a listener imports a stage of the pipeline instead of tunnel.ts');
    // https-listener.ts hands its sockets to http.ts: the two protocol listeners run the pipeline.
    assert.equal(usesPipeline, 2, 'http.ts and socks5.ts each run tunnel.ts');
  });

  test("a connection's record is written only in tunnel-record.ts", () => {
    const writes: string[] = [];
    const field = /\b(conn|ctx|context|trace)\.(user|session|target|node|exit|bytes|closer)\s*=(?!=)/;
    for (const name of readdirSync(PROXY)) {
      if (!name.endsWith('.ts') || name === 'tunnel-record.ts') continue;
      readFileSync(join(PROXY, name), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (field.test(line)) writes.push(`${name}:${i + 1}: ${line.trim()}`);
        });
    }
    assert.deepEqual(writes, []);
    // The check can fail: the pattern finds an assignment of the kind it forbids.
    assert.ok(field.test('conn.node = dialed.node.id;'));
  });

  test('bytes are counted into the meter and rotor_proxy_bytes_total only by the metered stream (tunnel-stream.ts)', () => {
    const counting: string[] = [];
    const pattern = /\bmeter\.add\(|\.bytesTotal\b/;
    for (const name of readdirSync(PROXY)) {
      if (!name.endsWith('.ts') || name === 'tunnel-stream.ts') continue;
      readFileSync(join(PROXY, name), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (pattern.test(line)) counting.push(`${name}:${i + 1}: ${line.trim()}`);
        });
    }
    assert.deepEqual(counting, []);
    assert.ok(pattern.test('meter.add(n, 0);') && pattern.test('metrics.bytesTotal.labels({})'));
    // Every relay counts through it: the tunnel relay, plain-HTTP forwarding and the UDP relay.
    for (const name of ['relay.ts', 'http-forward.ts', 'udp-associate.ts'])
      assert.ok(valueImports(join(PROXY, name)).includes('./tunnel-stream.ts'), `${name} counts through tunnel-stream.ts`);
  });

  test("byte streams are throttled only by the metered stream's valve (tunnel-stream.ts)", () => {
    // A stream's source is paused for the user's rate in one place: the tunnel relay and plain-HTTP bodies go
    // through Valve. The UDP relay queues datagrams (nothing to pause) and takes from the bucket itself.
    const throttling: string[] = [];
    const pattern = /\b(limiter|\.limiter\??)\.(take|wait)\(|\blimiter\?*\.(take|wait)\(/;
    for (const name of readdirSync(PROXY)) {
      if (!name.endsWith('.ts') || name === 'tunnel-stream.ts' || name === 'udp-associate.ts') continue;
      readFileSync(join(PROXY, name), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (pattern.test(line)) throttling.push(`${name}:${i + 1}: ${line.trim()}`);
        });
    }
    assert.deepEqual(throttling, []);
    assert.ok(pattern.test('if (limiter.take(n)) return;') && pattern.test('this.limiter?.wait(wake);'));
    for (const name of ['relay.ts', 'http-forward.ts']) {
      const text = readFileSync(join(PROXY, name), 'utf8');
      assert.ok(/\.passed\(/.test(text), `${name} throttles through a Valve`);
    }
  });
});
