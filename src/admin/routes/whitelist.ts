// IP whitelist of a main account for a product: GET /v1/whitelist?account=&productNo=, POST and DELETE
// /v1/whitelist with {account, productNo, ip, proxyType?}. Every answer is the list as it now stands.
import { isIP } from 'node:net';
import { z } from 'zod';
import type { WhitelistInput } from '../deps.ts';
import { zs } from '../validation.ts';
import { doc, dynamicType, name, type RegisterRoutes } from './common.ts';

const listAnswer = {
  type: 'object',
  properties: { account: { type: 'string' }, productNo: { type: 'string' }, ipWhiteList: { type: 'array', items: { type: 'string' } } },
};
const entry = zs(
  z.strictObject({
    account: name,
    productNo: name,
    ip: z.string().refine((s) => isIP(s) !== 0, 'expected an IPv4 or IPv6 address'),
    proxyType: dynamicType.optional(),
  }),
);

export const whitelistRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: { account: string; productNo: string } }>(
    '/whitelist',
    { schema: { querystring: zs(z.strictObject({ account: name, productNo: name })), ...doc('whitelist', 'whitelisted IPs of a main account for a product', { 200: listAnswer }) } },
    async (req) => ({ ...req.query, ipWhiteList: await deps.accounts.listWhitelist(req.query.account, req.query.productNo) }),
  );
  app.post<{ Body: WhitelistInput }>('/whitelist', { schema: { body: entry, ...doc('whitelist', 'add an IP (AddIpWhiteList)', { 200: listAnswer }) } }, async (req) => ({
    account: req.body.account,
    productNo: req.body.productNo,
    ipWhiteList: await deps.accounts.addWhitelist(req.body),
  }));
  app.delete<{ Body: WhitelistInput }>('/whitelist', { schema: { body: entry, ...doc('whitelist', 'remove an IP (DelIpWhiteList)', { 200: listAnswer }) } }, async (req) => ({
    account: req.body.account,
    productNo: req.body.productNo,
    ipWhiteList: await deps.accounts.removeWhitelist(req.body),
  }));
};
