// The zod schemas of the user fields this component owns, shared by the config (`users:` entries,
// `proxy.rules`) and the admin API's user records, so both accept and refuse the same input.
import { z } from 'zod';
import { CidrSet } from '../proxy/cidr.ts';

export { rulesSchema } from '../proxy/destination-rules.ts';

/** `listen`: a dedicated local port for one user (docs/reference.md "Users as data"). */
export const listenSchema = z.strictObject({
  /** 0 = any free port (tests; the port is in the log and in UserPorts.list()). */
  port: z.number().int().min(0).max(65_535),
  /** Clients from these addresses (CIDR or bare addresses) are served as the user without credentials. */
  allowIps: z
    .array(z.string().min(1).max(64).refine(CidrSet.isValid, { message: 'expected an IP address or a CIDR range' }))
    .max(1_000)
    .default([]),
  /** TLS on this port (HTTP or SOCKS5 inside), with the certificate and key of proxy.https; absent = plain. */
  tls: z.boolean().optional(),
});

export type ListenConfig = z.output<typeof listenSchema>;
