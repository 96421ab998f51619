// POST /v1/platform/:operation: any operation of the table by its interface name, params as the body,
// the decrypted answer back as the platform sent it. One documented route per operation (its request
// schema from the table); any other name is 404. Order-placing operations sent this way bypass Rotor's
// journal: the caller supplies (and keeps) the merchant number.
import { z } from 'zod';
import { OPERATION_NAMES, operations } from '../../platform/operations.ts';
import { AdminError } from '../errors.ts';
import { fromZod } from '../schemas.ts';
import { zsWith } from '../validation.ts';
import { doc, type RegisterRoutes } from './common.ts';

export const platformRoutes: RegisterRoutes = (app, deps) => {
  for (const op of OPERATION_NAMES) {
    const spec = operations[op];
    // `data` is the platform's own answer, unchecked: it is documented, not enforced.
    const answer = {
      type: 'object',
      properties: {
        operation: { type: 'string' },
        data: { description: spec.response ? 'the decrypted answer as the platform sent it' : 'null: this operation answers without data' },
      },
    };
    app.post(
      `/platform/${op}`,
      {
        schema: {
          operationId: `platform${op}`,
          body: zsWith(
            fromZod(spec.request),
            z.preprocess((v) => v ?? {}, spec.request),
          ),
          ...doc('platform', `${op}: ${spec.summary} (${spec.path})`, { 200: answer }),
        },
      },
      // The parsed body is sent; the client validates it again (the table's transforms are idempotent).
      async (req) => ({ operation: op, data: await deps.platform.callRaw(op, req.body ?? {}) }),
    );
  }
  app.post<{ Params: { operation: string } }>('/platform/:operation', { schema: { hide: true } }, async (req) => {
    throw new AdminError(404, 'UNKNOWN_OPERATION', `no platform operation named ${JSON.stringify(req.params.operation)}`);
  });
};
