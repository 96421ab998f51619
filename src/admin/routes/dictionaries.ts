// GET /v1/areas, /v1/cities, /v1/projects: the platform's dictionaries, served from the catalog's cache.
import { z } from 'zod';
import { areaNode, city, project } from '../../platform/schemas.ts';
import { fromZod } from '../schemas.ts';
import { zs } from '../validation.ts';
import { codesQuery, doc, type RegisterRoutes } from './common.ts';

const querystring = zs(z.strictObject({ codes: codesQuery.optional() }));
type Q = { Querystring: { codes?: string[] } };
const codes = (q: { codes?: string[] }) => (q.codes?.length ? q.codes : undefined);

export const dictionaryRoutes: RegisterRoutes = (app, deps) => {
  app.get<Q>(
    '/areas',
    {
      schema: {
        operationId: 'listAreas',
        querystring,
        ...doc('dictionaries', 'region tree (GetArea, cached)', { 200: fromZod(z.array(areaNode)) }),
      },
    },
    async (req) => deps.catalog.areas(codes(req.query)),
  );
  app.get<Q>(
    '/cities',
    {
      schema: {
        operationId: 'listCities',
        querystring,
        ...doc('dictionaries', 'cities (GetCityList, cached)', { 200: fromZod(z.array(city)) }),
      },
    },
    async (req) => deps.catalog.cities(codes(req.query)),
  );
  app.get<Q>(
    '/projects',
    {
      schema: {
        operationId: 'listProjects',
        querystring,
        ...doc('dictionaries', 'projects (GetProjectList, cached)', { 200: fromZod(z.array(project)) }),
      },
    },
    async (req) => deps.catalog.projects(codes(req.query)),
  );
};
