// Seed 2.6: a product's `protocol` "1=socks5, 2=http, 3=https; default socks5"; a drawn `host:port:user:pass` carries
// no scheme. Scheme-less lines of an HTTP-only product were dialed as SOCKS5 (every node failed, CONNECT 502). The
// sandbox's upstream ports answer both protocols, so here each gateway port sits behind an HTTP-only front (a
// SOCKS5 greeting is closed) and the product says "2".
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { nodeConnectGet } from './harness.ts';
import { poolError, startVariantRig, VARIANT_MAIN, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTrafficCn;

async function httpOnlyFront(port: number): Promise<Server> {
  const server = createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', (first: Buffer) => {
      if (first[0] === 0x05) return void s.destroy();
      const up = connect(port, '127.0.0.1', () => {
        up.write(first);
        s.pipe(up).pipe(s);
      });
      up.on('error', () => s.destroy());
      s.on('close', () => up.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

describe('an HTTP-only dynamic product (protocol "2") drawn as host:port:user:pass', () => {
  let rig: VariantRig;
  const fronts = new Map<number, Server>();
  before(async () => {
    const frontOf = (port: number): number => (fronts.get(port)!.address() as AddressInfo).port;
    rig = await startVariantRig({
      product: PRODUCT,
      users: [
        {
          name: VARIANT_USER,
          password: VARIANT_PASS,
          mainAccount: VARIANT_MAIN,
          product: PRODUCT,
          draw: 'pwd',
          sessTime: 5,
          limitBytes: -1,
        },
      ],
      hooks: {
        data: (op, data) => {
          if (op === 'GetProductInfo') return { ...(data as object), protocol: '2' };
          if (op === 'GetProductStock')
            return (data as Array<Record<string, unknown>>).map((p) => (p.productNo === PRODUCT ? { ...p, protocol: '2' } : p));
          if (op !== 'DrawByPwd') return data;
          const line = (l: string): string => {
            const [host, port, user, pass] = l.split(':') as [string, string, string, string];
            return `${host}:${frontOf(Number(port))}:${user}:${pass}`;
          };
          const d = data as { list: Array<{ proxyUrl?: string; list?: string[] }> };
          return { list: d.list.map((i) => ({ proxyUrl: i.proxyUrl ? line(i.proxyUrl) : i.proxyUrl, list: (i.list ?? []).map(line) })) };
        },
      },
    });
    for (const p of rig.platform.sim.upstreams!.gatewayPorts) fronts.set(p, await httpOnlyFront(p));
  });
  after(async () => {
    await rig?.close();
    for (const s of fronts.values()) await new Promise((r) => s.close(r));
  });

  test("a customer's CONNECT is served through the product's HTTP nodes", async () => {
    const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/hello', 20_000);
    assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig)}`);
  });
});
