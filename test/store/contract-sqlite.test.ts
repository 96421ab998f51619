// The shared Store contract against the SQLite driver (one file per data set in a temp dir).
import { after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStore } from '../../src/store/index.ts';
import { storeContract } from './contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-contract-'));
after(() => rmSync(dir, { recursive: true, force: true }));

storeContract('sqlite', {
  open: async (space, options) => new SqliteStore(join(dir, `${space}.db`), options),
});
