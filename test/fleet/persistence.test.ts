// The start-up check of the fleet's Redis persistence, against real redis-servers: one keeping nothing on
// disk (a warning), one with the append-only file (no line), one that refuses CONFIG (handled: an info line).
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { checkPersistence } from '../../src/fleet/persistence.ts';
import { RedisFleetState } from '../../src/store/redis-fleet.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { connection, redisMissing, RedisServer } from './redis-server.ts';

function memoryLogger() {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  return { logger: createLogger({ level: 'info', destination: sink }), lines };
}

describe('Redis persistence check at start', { skip: redisMissing }, () => {
  const servers: RedisServer[] = [];
  after(() => Promise.all(servers.map((s) => s.stop())));

  const check = async (args: string[]) => {
    const server = new RedisServer(args);
    servers.push(server);
    await server.start();
    const conn = await connection(server.url);
    const { logger, lines } = memoryLogger();
    try {
      return { result: await checkPersistence(new RedisFleetState(conn), logger), lines };
    } finally {
      await conn.close();
    }
  };

  test('no RDB snapshots and no AOF: one warning', async () => {
    const { result, lines } = await check([]);
    assert.deepEqual(result, { snapshots: false, appendOnly: false });
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.level, 40);
    assert.match(lines[0]!.msg, /persistence off/);
  });

  test('append-only file on: nothing to say', async () => {
    const { result, lines } = await check(['--appendonly', 'yes']);
    assert.deepEqual(result, { snapshots: false, appendOnly: true });
    assert.deepEqual(lines, []);
  });

  test('snapshots on: nothing to say', async () => {
    const { result, lines } = await check(['--save', '3600 1']);
    assert.deepEqual(result, { snapshots: true, appendOnly: false });
    assert.deepEqual(lines, []);
  });

  test('CONFIG refused (renamed away): no error, an info line that the check was not made', async () => {
    const { result, lines } = await check(['--rename-command', 'CONFIG', '']);
    assert.equal(result, undefined);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.level, 30);
    assert.match(lines[0]!.msg, /could not read the redis persistence settings/);
  });
});
