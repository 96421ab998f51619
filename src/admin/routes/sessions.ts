// GET /v1/sessions (sticky sessions) and DELETE /v1/sessions/:user/:id (forced rotation: the next
// connection of that session gets a new upstream). The list is bounded (?limit=, default 1,000): a full table of
// 100,000 sessions was 12 MB serialised on the event loop per dashboard poll; x-total-count counts every match.
import { z } from 'zod';
import { USER_NAME } from '../../config/schema.ts';
import { notFound } from '../errors.ts';
import { zs } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

const session = {
  type: 'object',
  properties: {
    user: { type: 'string' },
    sessionId: { type: 'string' },
    nodeId: { type: 'string' },
    startedAt: { type: 'integer' },
    expiresAt: { type: 'integer' },
  },
};
const DEFAULT_LIMIT = 1000;
const ident = z.string().regex(USER_NAME, 'expected [A-Za-z0-9_.]+').max(128);

export const sessionRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: { user?: string; limit?: number } }>(
    '/sessions',
    {
      schema: {
        operationId: 'listSessions',
        querystring: zs(z.strictObject({ user: ident.optional(), limit: z.coerce.number().int().min(1).max(100_000).optional() })),
        ...doc(
          'sessions',
          "live sticky sessions: ?user= one user's, ?limit= (default 1000, max 100000); x-total-count counts every match",
          {
            200: { type: 'array', items: session },
          },
        ),
      },
    },
    async (req, reply) => {
      const { user, limit = DEFAULT_LIMIT } = req.query;
      const all = deps.sessions.list();
      const matching = user === undefined ? all : all.filter((s) => s.user === user);
      void reply.header('x-total-count', String(matching.length));
      return matching.length > limit ? matching.slice(0, limit) : matching;
    },
  );
  app.delete<{ Params: { user: string; id: string } }>(
    '/sessions/:user/:id',
    {
      schema: {
        operationId: 'rotateSession',
        params: zs(z.strictObject({ user: ident, id: ident })),
        ...doc('sessions', 'end a sticky session now (rotation reason manual)', {
          200: { type: 'object', properties: { user: { type: 'string' }, sessionId: { type: 'string' }, rotated: { type: 'boolean' } } },
        }),
      },
    },
    async (req) => {
      if (!deps.sessions.rotate(req.params.user, req.params.id, 'manual'))
        throw notFound(`session ${req.params.id} of user ${req.params.user}`);
      return { user: req.params.user, sessionId: req.params.id, rotated: true };
    },
  );
};
