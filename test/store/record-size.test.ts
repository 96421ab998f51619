// recordSize() counts a record's text fields by name (no keyed loop), so its list must stay the one SQL and Lua
// count by (RECORD_TEXT_FIELDS: SqliteConnectionLog's SIZE_SQL, the Redis log's script): each field adds its
// UTF-8 bytes, every other field adds nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RECORD_FIXED_BYTES, RECORD_TEXT_FIELDS, recordSize, type ConnectionRecord } from '../../src/store/connection-log-types.ts';

const bare: ConnectionRecord = {
  id: '',
  user: null,
  session: null,
  listener: '',
  node: null,
  bytesUp: 123456,
  bytesDown: 654321,
  startedAt: 1_700_000_000_000,
  durationMs: 42,
  result: 'ok',
  reason: null,
  retries: 3,
  hedges: 2,
  count: 7,
};

test('recordSize counts exactly the fields of RECORD_TEXT_FIELDS, in UTF-8 bytes', () => {
  const base = recordSize(bare);
  assert.equal(base, RECORD_FIXED_BYTES + Buffer.byteLength('ok'));
  for (const field of RECORD_TEXT_FIELDS) {
    // A non-ASCII value: its UTF-8 bytes (7) are not its length (4).
    const value = field === 'result' ? 'ok' : 'ü€ab';
    const r = { ...bare, [field]: value } as ConnectionRecord;
    const added = field === 'result' ? 0 : Buffer.byteLength(value);
    assert.equal(recordSize(r), base + added, field);
  }
  const full = Object.fromEntries(RECORD_TEXT_FIELDS.map((f) => [f, `${f}-é`])) as unknown as ConnectionRecord;
  const expected = RECORD_FIXED_BYTES + RECORD_TEXT_FIELDS.reduce((n, f) => n + Buffer.byteLength(`${f}-é`), 0);
  assert.equal(recordSize({ ...bare, ...full }), expected);
});
