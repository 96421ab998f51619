// GET /v1/bans (exits banned for a user by a request rule, soonest to end first; ?user= narrows) and
// DELETE /v1/bans/:id (lift one now: the exit may carry that user's connections again at once).
import { z } from 'zod';
import type { Ban } from '../../proxy/request-bans.ts';
import { notFound } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

const ban = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    user: { type: 'string' },
    node: { type: 'string', description: "the upstream node's id (protocol://user@host:port, never its password)" },
    exit: { type: 'string', description: "the node's address" },
    host: { type: ['string', 'null'], description: 'the target host the ban is limited to; null = every host' },
    rule: { type: 'string', description: 'the request rule that banned it' },
    createdAt: { type: 'string', description: 'RFC 3339' },
    until: { type: 'string', description: 'RFC 3339: when the ban ends' },
  },
};

const listQuery = z.strictObject({
  user: z
    .string()
    .regex(/^[A-Za-z0-9_.]+$/)
    .max(64)
    .optional(),
});
// Any id that names no ban in force is a 404, as README says (ids are `b<n>`, but a script holding an id from
// before a restart, or a mistyped one, asks the same question: is there such a ban?).
const idParams = z.strictObject({ id: z.string().min(1).max(64) });

const view = (b: Ban) => ({ ...b, createdAt: new Date(b.createdAt).toISOString(), until: new Date(b.until).toISOString() });

export const banRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: z.output<typeof listQuery> }>(
    '/bans',
    {
      schema: {
        operationId: 'listBans',
        querystring: zs(listQuery),
        ...doc('bans', 'exits banned by request rules, soonest to end first', { 200: { type: 'array', items: ban } }),
      },
    },
    async (req) => {
      const all = deps.bans?.list() ?? [];
      return (req.query.user === undefined ? all : all.filter((b) => b.user === req.query.user)).map(view);
    },
  );
  app.delete<{ Params: z.output<typeof idParams> }>(
    '/bans/:id',
    { schema: { operationId: 'liftBan', params: zs(idParams), ...doc('bans', 'lift a ban now', { 204: { type: 'null' } }) } },
    async (req, reply) => {
      if (!deps.bans?.lift(req.params.id)) throw notFound(`ban ${req.params.id}`);
      return reply.code(204).send();
    },
  );
};
