// IP whitelist of a main account for a product: GET /v1/whitelist?account=&productNo=, POST and DELETE
// /v1/whitelist with {account, productNo, ip, proxyType?} (the type is taken from the product). Every
// answer is the list as it now stands.
import { isIP } from 'node:net';
import { z } from 'zod';
import { zs } from '../validation.ts';
import { doc, dynamicType, name, type RegisterRoutes } from './common.ts';

const listAnswer = {
  type: 'object',
  properties: { account: { type: 'string' }, productNo: { type: 'string' }, ipWhiteList: { type: 'array', items: { type: 'string' } } },
};
type Entry = { account: string; productNo: string; ip: string; proxyType?: number };
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
    {
      schema: {
        operationId: 'listWhitelist',
        querystring: zs(z.strictObject({ account: name, productNo: name })),
        ...doc('whitelist', 'whitelisted IPs of a main account for a product', { 200: listAnswer }),
      },
    },
    async (req) => ({ ...req.query, ipWhiteList: await deps.whitelist.list(req.query.account, req.query.productNo) }),
  );
  app.post<{ Body: Entry }>(
    '/whitelist',
    { schema: { operationId: 'addWhitelistIp', body: entry, ...doc('whitelist', 'add an IP (AddIpWhiteList)', { 200: listAnswer }) } },
    async (req) => ({
      account: req.body.account,
      productNo: req.body.productNo,
      ipWhiteList: await deps.whitelist.add(req.body.account, req.body.productNo, req.body.ip),
    }),
  );
  app.delete<{ Body: Entry }>(
    '/whitelist',
    {
      schema: { operationId: 'removeWhitelistIp', body: entry, ...doc('whitelist', 'remove an IP (DelIpWhiteList)', { 200: listAnswer }) },
    },
    async (req) => ({
      account: req.body.account,
      productNo: req.body.productNo,
      ipWhiteList: await deps.whitelist.remove(req.body.account, req.body.productNo, req.body.ip),
    }),
  );
};
