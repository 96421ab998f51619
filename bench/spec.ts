// What bench/run.ts and bench/gateway.ts agree on: the gateway's local users and how it is told its upstreams.
export const BENCH_PASSWORD = 'bench-pass';
/** Local user whose connections leave through the SOCKS5 upstream. */
export const SOCKS_USER = 'bs';
/** Local user whose connections leave through the HTTP upstream. */
export const HTTP_USER = 'bh';

export interface UpstreamSpec {
  port: number;
  username: string;
  password: string;
}

export interface GatewaySpec {
  socks5: UpstreamSpec;
  http: UpstreamSpec;
  meters?: 'unlimited' | 'accounting';
  /** Connection records (issue 16): 'store' writes them to a SQLite store in batches; default 'off'. */
  records?: 'off' | 'store';
}
