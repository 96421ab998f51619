// `npm start` (rotor start, embedded sandbox, SQLite store): a static instance bought through POST
// /v1/orders/open serves `-instance-<no>` before a graceful restart and after it: the sandbox opens the
// instance's upstream on the port it had (src/sim/platform/persist.ts), so Rotor's stored address still holds.
// When that port was taken meanwhile, the sandbox moves the instance and sends an instance callback, and Rotor
// (which re-reads an instance on its callback) routes to the new address.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import {
  adminGet,
  adminSend,
  cleanup,
  curl,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  waitFor,
  writeConfigFile,
  type BytesTarget,
} from './limits-harness.ts';

let target: BytesTarget;
before(async () => {
  target = await startTarget();
});
after(async () => {
  await target?.close();
  cleanup();
});

interface Inst {
  instanceNo: string;
  status: number | null;
  ip?: string;
  port?: number | null;
}

async function restartCase(t: { diagnostic(m: string): void }, takePort: boolean): Promise<void> {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(file, rawConfig(dir, [{ name: 'ivy', password: 'ivy-pw', mainAccount: 'shop1' }]));
  let d = await spawnDaemon(file, join(dir, 'rotor.log'));
  let instanceNo = '';
  let before: unknown;
  try {
    const opened = await adminSend<{ appOrderNo: string }>(d.ports.admin, 'POST', '/v1/orders/open', {
      productNo: 'STC-101-USA-SOCKS',
      count: 1,
      cycleTimes: 1,
    });
    assert.equal(opened.status, 202, JSON.stringify(opened.body));
    const order = await waitFor(
      'order final with its instance',
      async () => {
        const o = await adminGet<{ status: number; instances?: Inst[] }>(d.ports.admin, `/v1/orders/${opened.body.appOrderNo}`);
        return o.status === 3 && o.instances?.[0]?.status === 3 ? o : undefined;
      },
      30_000,
    );
    instanceNo = order.instances![0]!.instanceNo;
    before = await adminGet(d.ports.admin, `/v1/instances/${instanceNo}`);
    // the instance directory reads the store every 2 s
    const r = await waitFor(
      '-instance- served before the restart',
      async () => {
        const c = await curl(['-x', `http://ivy-instance-${instanceNo}:ivy-pw@127.0.0.1:${d.ports.http}`, target.url(10_000)]);
        return c.code === 0 && c.size === 10_000 ? c : undefined;
      },
      15_000,
    );
    assert.equal(r.size, 10_000);
  } finally {
    await d.stop();
  }
  const oldPort = (before as Inst).port!;
  let squatter: Server | undefined;
  if (takePort) {
    squatter = createServer((c) => c.destroy());
    await new Promise<void>((resolve, reject) => {
      squatter!.once('error', reject);
      squatter!.listen(oldPort, '127.0.0.1', () => resolve());
    });
  }
  d = await spawnDaemon(file, join(dir, 'rotor2.log'));
  try {
    // 15 s for the directory (2 s), the tracker's sweep and anything else to catch up
    let r = await curl(['-x', `http://ivy-instance-${instanceNo}:ivy-pw@127.0.0.1:${d.ports.http}`, target.url(10_000)]);
    const deadline = Date.now() + 15_000;
    while ((r.code !== 0 || r.size !== 10_000) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 500));
      r = await curl(['-x', `http://ivy-instance-${instanceNo}:ivy-pw@127.0.0.1:${d.ports.http}`, target.url(10_000)]);
    }
    const afterRec = await adminGet(d.ports.admin, `/v1/instances/${instanceNo}`);
    const platform = await adminGet<Inst>(d.ports.admin, `/v1/instances/${instanceNo}?refresh=true`).catch((e: Error) => e.message);
    const story = `after the restart: curl exit ${r.code}, HTTP ${r.http}, ${r.size} B; Rotor's instance record before ${JSON.stringify(before)}, after ${JSON.stringify(afterRec)}; the platform's now (refresh=true) ${JSON.stringify(platform)}`;
    t.diagnostic(story);
    assert.equal(r.code, 0, story);
    assert.equal(r.size, 10_000, story);
    const port = (afterRec as Inst).port;
    if (takePort) assert.notEqual(port, oldPort, `moved, and Rotor was told: ${story}`);
    else assert.equal(port, oldPort, `the same address: ${story}`);
    assert.equal((platform as Inst).port, port, story);
  } finally {
    await d.stop();
    if (squatter) await new Promise<void>((r) => squatter!.close(() => r()));
  }
}

test('a static instance bought on the embedded sandbox still serves -instance- after a graceful restart, on the same port', async (t) => {
  await restartCase(t, false);
});

test('its port taken while the daemon was down: the sandbox moves it, tells Rotor by an instance callback, -instance- serves', async (t) => {
  await restartCase(t, true);
});
