// Child of ports-gc.test.ts (test/support/scavenge-kept.ts): clients connect to a long-lived user port, each
// connection (handed to the listeners, here a stand-in that holds about 4 KB on it) kept open 50 at a time,
// then closed. A connection closed before a young-generation collection should cost it nothing.
import { connect, type Socket } from 'node:net';
import { pathToFileURL } from 'node:url';
import { keptPerOperation } from '../support/scavenge-kept.ts';

const { UserPorts } = (await import(pathToFileURL(process.argv[2]!).href)) as typeof import('../../src/users/ports.ts');

const open: Socket[] = [];
let taken: (() => void) | undefined;
let i = 0;
const take = {
  handleSocket(socket: Socket): void {
    Object.assign(socket, { held: new Array<number>(500).fill(i) });
    open.push(socket);
    if (open.length > 50) open.shift()!.destroy();
    taken?.();
  },
};
const ports = new UserPorts({ host: '127.0.0.1', listeners: { http: take, socks5: take }, authorizeUser: () => ({}) as never });
await ports.sync([{ name: 'alice', listen: { port: 0, allowIps: ['127.0.0.1'] } }]);
const port = ports.portOf('alice')!;

const run = async (n: number): Promise<void> => {
  for (let k = 0; k < n; k++, i++) {
    const handed = new Promise<void>((resolve) => (taken = resolve));
    const client = connect(port, '127.0.0.1', () => client.write('G'));
    client.on('error', () => {});
    client.on('close', () => client.destroy());
    await handed;
    client.destroy();
  }
};
const OPS = Number(process.argv[3] ?? 3000);
await keptPerOperation(
  () => run(500),
  OPS,
  () => run(OPS),
);
for (const s of open) s.destroy();
await ports.close();
