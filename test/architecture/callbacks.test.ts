// The path of a connection runs down, not back up (docs/architecture.md "As it runs"): the modules below a
// listener answer it with return values, they do not call it back. The SOCKS5 handshake returns at the login
// and is resumed with the decision (no login callback); the plain-HTTP lane hands the next request back (no
// start callback); the tunnel pipeline returns the dialed upstream or the failure, and the listener answers
// its client itself (no established/refuse adapter). Read from the sources with TypeScript's parser.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import ts from 'typescript';

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
  assert.ok(called.includes('startSocks5<Admission>') || called.includes('startSocks5'), 'the listener runs the handshake in steps');
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
  // Left: a plain-HTTP request that fails before its response head is answered through ForwardSettings.refuse
  // (a failure path only; docs/architecture.md counts it).
  const answers = nodes(source)
    .filter(ts.isMethodSignature)
    .filter((m) => ['established', 'refuse'].includes(m.name.getText(source)))
    .map((m) => `${(m.parent as ts.InterfaceDeclaration).name.text}.${m.name.getText(source)}`);
  assert.deepEqual(answers, ['ForwardSettings.refuse'], 'an interface of answers the pipeline would call');
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
