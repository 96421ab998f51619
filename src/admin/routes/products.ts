// GET /v1/products, /v1/products/:productNo, /v1/products/:productNo/areas: the catalog.
import { z } from 'zod';
import { product, productArea } from '../../platform/schemas.ts';
import { AdminError, notFound } from '../errors.ts';
import { fromZod } from '../schemas.ts';
import { zs } from '../validation.ts';
import { boolQuery, doc, dynamicTypeQuery, intListQuery, name, type RegisterRoutes } from './common.ts';

const productParams = zs(z.strictObject({ productNo: name }));
const productJson = fromZod(product);

export const productRoutes: RegisterRoutes = (app, deps) => {
  app.get<{ Querystring: { proxyType?: number[] } }>(
    '/products',
    {
      schema: {
        operationId: 'listProducts',
        querystring: zs(z.strictObject({ proxyType: intListQuery.optional() })),
        ...doc('products', 'authorized products (GetProductStock, cached); proxyType=104,105 filters', {
          200: { type: 'array', items: productJson },
        }),
      },
    },
    async (req) => deps.catalog.products(req.query.proxyType?.length ? { proxyType: req.query.proxyType } : {}),
  );

  app.get<{ Params: { productNo: string }; Querystring: { fresh?: boolean } }>(
    '/products/:productNo',
    {
      schema: {
        operationId: 'getProduct',
        params: productParams,
        querystring: zs(z.strictObject({ fresh: boolQuery.optional() })),
        ...doc('products', 'one product (GetProductInfo); fresh=true skips the cache', { 200: productJson }),
      },
    },
    async (req) => {
      const p = await deps.catalog.product(req.params.productNo, { fresh: req.query.fresh === true });
      if (!p) throw notFound(`product ${req.params.productNo}`);
      return p;
    },
  );

  app.get<{ Params: { productNo: string }; Querystring: { proxyType?: 104 | 105 } }>(
    '/products/:productNo/areas',
    {
      schema: {
        operationId: 'listProductAreas',
        params: productParams,
        querystring: zs(z.strictObject({ proxyType: dynamicTypeQuery.optional() })),
        ...doc('products', 'regions a dynamic product draws from (ProductAreaList)', {
          200: { type: 'array', items: fromZod(productArea) },
        }),
      },
    },
    async (req) => {
      let type = req.query.proxyType;
      if (type === undefined) {
        const p = await deps.catalog.product(req.params.productNo);
        if (!p) throw notFound(`product ${req.params.productNo}`);
        if (p.proxyType !== 104 && p.proxyType !== 105)
          throw new AdminError(409, 'PRODUCT_NOT_DYNAMIC', `product ${req.params.productNo} is static: it has no draw regions`);
        type = p.proxyType;
      }
      return deps.catalog.productAreas(req.params.productNo, type);
    },
  );
};
