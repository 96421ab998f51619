// The path of a connection runs down, not back up (docs/architecture.md "As it runs"): the modules below a
// listener answer it with return values, they do not call it back. The SOCKS5 handshake returns at the login
// and is resumed with the decision (no login callback); the plain-HTTP lane hands the next request back (no
// start callback); the tunnel pipeline returns the dialed upstream or the failure, and the listener answers
// its client itself (no established/refuse adapter). Read from the sources with TypeScript's parser.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';
import { atOrBelow } from './declared-order.ts';

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
}

/** Every node of a file, depth first. */
function nodes(source: ts.SourceFile): ts.Node[] {
  const out: ts.Node[] = [];
  const walk = (n: ts.Node): void => {
    out.push(n);
    n.forEachChild(walk);
  };
  walk(source);
  return out;
}

/** Parameters and properties whose declared type is a function type: what a module would call back. */
function functionTyped(file: string): string[] {
  const source = parse(file);
  return nodes(source)
    .filter(
      (n): n is ts.ParameterDeclaration | ts.PropertyDeclaration | ts.PropertySignature =>
        (ts.isParameter(n) || ts.isPropertyDeclaration(n) || ts.isPropertySignature(n)) &&
        n.type !== undefined &&
        ts.isFunctionTypeNode(n.type),
    )
    .map((n) => `${file}:${source.getLineAndCharacterOfPosition(n.getStart()).line + 1} ${n.name.getText(source)}`);
}

test("the SOCKS5 listener decides the login between the handshake's steps, with no callback into itself", () => {
  const source = parse('src/proxy/socks5.ts');
  const called = nodes(source)
    .filter(ts.isCallExpression)
    .map((c) => c.expression.getText(source));
  // The listener feeds the handshake's steps (data in, progress out: wire/socks5.ts Socks5ServerSteps) from its own
  // listeners and decides the login between them.
  const made = nodes(source)
    .filter(ts.isNewExpression)
    .map((n) => n.expression.getText(source));
  assert.ok(made.includes('Socks5ServerSteps'), 'the listener runs the handshake in steps');
  assert.ok(called.includes('steps.decide'), 'the listener decides the login itself');
  assert.ok(!called.some((c) => c.startsWith('acceptSocks5')), 'acceptSocks5 decides through a callback');
  const handed = nodes(source)
    .filter(ts.isPropertyAssignment)
    .map((p) => p.name.getText(source))
    .filter((name) => name === 'authenticate' || name === 'noAuth');
  assert.deepEqual(handed, [], 'no login callback handed to the handshake');
});

test('the plain-HTTP lane calls nobody back: it keeps the order and hands the next request back', () => {
  assert.deepEqual(functionTyped('src/proxy/http-lane.ts'), []);
});

test('the tunnel pipeline returns outcomes: no adapter it calls back for the answer', () => {
  const source = parse('src/proxy/tunnel.ts');
  const answers = nodes(source)
    .filter(ts.isMethodSignature)
    .filter((m) => ['established', 'refuse'].includes(m.name.getText(source)))
    .map((m) => `${(m.parent as ts.InterfaceDeclaration).name.text}.${m.name.getText(source)}`);
  assert.deepEqual(answers, [], 'an interface of answers the pipeline would call');
  const pipeline = nodes(source).find((n): n is ts.ClassDeclaration => ts.isClassDeclaration(n) && n.name?.text === 'TunnelPipeline');
  assert.ok(pipeline);
  const calledBack = nodes(source)
    .filter(
      (n): n is ts.MethodDeclaration =>
        ts.isMethodDeclaration(n) && n.parent === pipeline && ['connect', 'carry'].includes(n.name.getText(source)),
    )
    .flatMap((m) => m.parameters.filter((p) => p.type !== undefined && ts.isFunctionTypeNode(p.type)).map((p) => p.name.getText(source)));
  assert.deepEqual(calledBack, []);
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

test("a connection's login, admission and rate run below the gateway: no class above proxy/ implements their seams", () => {
  // The seams the gateway calls on every connection (src/proxy/types.ts). An implementation in a folder above
  // proxy/ is a climb by control on every connection (docs/architecture.md "As it runs"). The fleet's shared
  // sticky sessions are the one allowed, and counted there: a fleet's climb, not a single daemon's.
  const perConnection = new Set(['UserDirectory', 'MeterProvider', 'RelayLimiter', 'SessionStore', 'PoolProvider']);
  const allowed = new Set(['src/fleet/gateway.ts FleetSessions implements SessionStore']);
  const below = atOrBelow('proxy');
  const above: string[] = [];
  for (const file of sourceFiles('src')) {
    if (below.has(file.split(sep)[1]!)) continue;
    const source = parse(file);
    for (const c of nodes(source).filter(ts.isClassDeclaration))
      for (const clause of c.heritageClauses ?? [])
        for (const t of clause.types) {
          const name = t.expression.getText(source);
          if (clause.token === ts.SyntaxKind.ImplementsKeyword && perConnection.has(name))
            above.push(`${file.split(sep).join('/')} ${c.name?.text ?? '(anonymous)'} implements ${name}`);
        }
  }
  assert.deepEqual(
    above.filter((a) => !allowed.has(a)),
    [],
  );
});

test('the daemon hands the router the users table and the gate of src/admission, not the users directory', () => {
  const file = 'src/daemon/gateway.ts';
  const source = parse(file);
  const props = new Map(
    nodes(source)
      .filter(ts.isPropertyAssignment)
      .filter((p) => ['users', 'meters'].includes(p.name.getText(source)))
      .map((p) => [p.name.getText(source), p.initializer] as const),
  );
  const users = props.get('users');
  const meters = props.get('meters');
  assert.ok(users && ts.isPropertyAccessExpression(users) && users.name.text === 'table', `users: ${users?.getText(source)}`);
  assert.ok(meters && ts.isNewExpression(meters) && meters.expression.getText(source) === 'UserGate', `meters: ${meters?.getText(source)}`);
  assert.ok(meters.arguments?.[0] && ts.isPropertyAccessExpression(meters.arguments[0]) && meters.arguments[0].name.text === 'table');
  const imports = nodes(source)
    .filter(ts.isImportDeclaration)
    .filter((i) => i.importClause?.getText(source).includes('UserGate'))
    .map((i) => (i.moduleSpecifier as ts.StringLiteral).text);
  assert.deepEqual(imports, ['../admission/users.ts']);
  // The table the directory writes is admission's.
  assert.match(readFileSync('src/users/directory.ts', 'utf8'), /readonly table = new UserTable</);
});

test("the listeners hand the pipeline's registry no close callback: their own 'close' listener runs after it", () => {
  for (const file of ['src/proxy/socks5.ts', 'src/proxy/http.ts']) {
    const source = parse(file);
    const accepts = nodes(source)
      .filter(ts.isCallExpression)
      .filter((c) => c.expression.getText(source) === 'this.pipeline.accept');
    assert.ok(accepts.length > 0, `${file} registers its sockets`);
    assert.deepEqual(
      accepts.filter((c) => c.arguments.length !== 1).map((c) => c.getText(source)),
      [],
      `${file}: a function handed to the registry is called back from below`,
    );
  }
});

test("a relay's end, a forwarded request's count and failure, a record's listener: objects and data handed down, no callback up", () => {
  // The relay reports its end to tunnel-record.ts's TunnelEnd (relay.ts imports neither tunnel.ts nor tunnel-record.ts).
  assert.deepEqual(functionTyped('src/proxy/relay.ts'), [], 'a function option the relay would call back');
  // The forwarder counts through the listener's ResultCounter and records a failure through its FailureRecorder,
  // then answers it itself; it has no function-typed members.
  assert.deepEqual(
    functionTyped('src/proxy/http-forward.ts').map((f) => f.replace(/:\d+ /, ' ')),
    [],
  );
  // tunnel-record.ts takes no function: the admin's closers (DELETE /v1/connections/:id) are objects, a relay's
  // handle or, before the relay, the client socket (Closer).
  assert.deepEqual(
    functionTyped('src/proxy/tunnel-record.ts').map((f) => f.replace(/:\d+ /, ' ')),
    [],
  );
  // Which sockets came through a user's own port is read from users/ports.ts's table, not asked of it.
  const record = parse('src/proxy/tunnel-record.ts');
  const alias = nodes(record).find((n): n is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(n) && n.name.text === 'FromUserPort');
  assert.ok(alias && !ts.isFunctionTypeNode(alias.type), 'FromUserPort is a function the record would call up into users/');
  // The relays and the record's end get no closure from the pipeline.
  const tunnel = parse('src/proxy/tunnel.ts');
  const handed = nodes(tunnel)
    .filter(ts.isPropertyAssignment)
    .filter((p) => ['onEnd', 'onForwarded', 'refuse'].includes(p.name.getText(tunnel)))
    .map((p) => p.name.getText(tunnel));
  assert.deepEqual(handed, []);
});

test("the user-name parse reads the users' table, it does not call its caller back", () => {
  assert.deepEqual(functionTyped('src/proxy/username.ts'), []);
});

test("the dial race's job runs code that imports neither the race nor the router: the race calls down, not back up", () => {
  // dial-race.ts calls its spec's dial() and its node reports for every attempt: the spec is dial-job.ts's
  // DialJob, holding the dialers and settings as data. Were it the router's again, each dial would climb.
  const importsOf = (file: string): string[] =>
    nodes(parse(file))
      .filter(ts.isImportDeclaration)
      .map((i) => (i.moduleSpecifier as ts.StringLiteral).text);
  const seen = new Set<string>();
  const reach = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of importsOf(file)) if (spec.startsWith('.')) reach(join(file, '..', spec));
  };
  reach('src/proxy/dial-job.ts');
  assert.deepEqual(
    [...seen].filter((f) => /proxy[/\\](dial-race|router)\.ts$/.test(f)),
    [],
    'dial-job.ts reaches the race or the router',
  );
  const router = parse('src/proxy/router.ts');
  const classes = nodes(router)
    .filter(ts.isClassDeclaration)
    .map((c) => c.name?.text);
  assert.ok(!classes.includes('DialJob'), 'the race spec is back in router.ts');
  const made = nodes(router)
    .filter(ts.isNewExpression)
    .map((n) => n.expression.getText(router));
  assert.ok(made.includes('DialJob'), "the router's dial makes a DialJob for the race");
});

test("the upstream dial's handshake is data: the SOCKS5 client and the CONNECT answer are fed bytes and return, calling nobody back", () => {
  // The dial (upstream-dial.ts, warm.ts) owns the socket and feeds the reader; were the reader handed a callback
  // (or the dial a handshake function of its importer's), each dial would climb back into its dialer.
  for (const file of ['src/wire/socks5-client.ts', 'src/proxy/dial-http.ts', 'src/proxy/dial-socks5.ts', 'src/proxy/cancel.ts'])
    assert.deepEqual(functionTyped(file), [], file);
  // upstream-dial.ts holds only its promise's own settle functions (node's, bound by its executor).
  const held = functionTyped('src/proxy/upstream-dial.ts').map((f) => f.split(' ')[1]);
  assert.deepEqual([...new Set(held)].sort(), ['reject', 'resolve']);
});
