// App info, dictionaries and the product catalogue (seed 4.1, 4.2).
import { CODE } from '../../platform/codes.ts';
import { AREAS, citiesOf, PROJECTS, productAreas, type AreaNode, type SimProduct } from './catalog.ts';
import type { In, SimContext } from './context.ts';
import { SimError } from './errors.ts';
import { formatMoney } from './money.ts';
import { isDynamic } from './open.ts';

export function getAppInfo(ctx: SimContext): unknown {
  const m = ctx.state.merchant;
  return {
    appName: m.appName,
    coin: formatMoney(m.coin),
    credit: formatMoney(m.credit),
    useBridge: m.useBridge,
    callbackUrl: m.callbackUrl,
    status: m.status,
  };
}

/** With codes: the subtrees rooted at nodes with those codes, at any depth. */
export function getArea(_ctx: SimContext, params: In<'GetArea'>): unknown {
  if (!params.codes?.length) return AREAS;
  const wanted = new Set(params.codes);
  const out: AreaNode[] = [];
  const walk = (nodes: AreaNode[]) => nodes.forEach((n) => (wanted.has(n.code) ? out.push(n) : walk(n.children ?? [])));
  walk(AREAS);
  return out;
}

export function getCityList(_ctx: SimContext, params: In<'GetCityList'>): unknown {
  const cities = citiesOf(AREAS);
  if (!params.codes?.length) return cities;
  const wanted = new Set(params.codes);
  return cities.filter((c) => wanted.has(c.cityCode) || wanted.has(c.stateCode) || wanted.has(c.countryCode) || wanted.has(c.areaCode));
}

export function getProjectList(_ctx: SimContext, params: In<'GetProjectList'>): unknown {
  if (!params.codes?.length) return PROJECTS;
  return PROJECTS.filter((p) => params.codes?.includes(p.code));
}

export function productRecord(p: SimProduct): Record<string, unknown> {
  const { authorized: _authorized, ...record } = p;
  return structuredClone(record);
}

export function getProductStock(ctx: SimContext, params: In<'GetProductStock'>): unknown {
  return [...ctx.state.products.values()]
    .filter(
      (p) =>
        p.authorized &&
        params.proxyType.includes(p.proxyType) &&
        (!params.productNo || p.productNo === params.productNo) &&
        (!params.countryCode || p.countryCode === params.countryCode) &&
        (!params.cityCode || p.cityCode === params.cityCode) &&
        (!params.supplierCode || p.supplierCode === params.supplierCode) &&
        (params.unit === undefined || p.unit === params.unit) &&
        (params.ispType === undefined || p.ispType === params.ispType) &&
        (params.duration === undefined || p.duration === params.duration),
    )
    .map(productRecord);
}

export function getProductInfo(ctx: SimContext, params: In<'GetProductInfo'>): unknown {
  const p = ctx.state.product(params.productNo);
  if (!p) throw new SimError(CODE.INVALID_PARAMS, `unknown product ${params.productNo}`);
  return productRecord(p);
}

export function productAreaList(ctx: SimContext, params: In<'ProductAreaList'>): unknown {
  const p = ctx.state.product(params.productNo);
  if (!p || !isDynamic(p) || p.proxyType !== params.proxyType)
    throw new SimError(CODE.INVALID_PARAMS, `${params.productNo} is not a dynamic product of type ${params.proxyType}`);
  return productAreas(p.productNo);
}
