// Child of connections-gc.test.ts (test/support/scavenge-kept.ts): client sockets accepted into a long-lived
// ListenerConnections, 50 open at a time, each holding about 4 KB, then closed (destroy: node's own 'close').
// A connection closed before a young-generation collection should cost it nothing.
import { Socket } from 'node:net';
import { pathToFileURL } from 'node:url';
import { keptPerOperation } from '../support/scavenge-kept.ts';

const { ListenerConnections } = (await import(pathToFileURL(process.argv[2]!).href)) as typeof import('../../src/proxy/connections.ts');

const conns = new ListenerConnections();
const open: Socket[] = [];
const run = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) {
    const socket = Object.assign(new Socket(), { held: new Array<number>(500).fill(i) });
    conns.accept(socket, 'http', undefined);
    open.push(socket);
    if (open.length > 50) open.shift()!.destroy();
    // Let node emit the 'close' of the sockets destroyed so far.
    if (i % 50 === 0) await new Promise(setImmediate);
  }
};
const OPS = 20_000;
await keptPerOperation(
  () => run(2000),
  OPS,
  () => run(OPS),
);
