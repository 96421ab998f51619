// The local checks of seed 4.3 an order request passes before anything is journaled or sent: the operation's
// schema (the part 8 limits), then what the catalogue knows of the product. Each failure is an OrderError that
// names the offending field; the placer (src/orders/placer.ts) runs them and then places the order.
import { fieldIssues } from '../platform/errors.ts';
import { operations, type OperationName, type OpRequest } from '../platform/operations.ts';
import type { Product } from '../platform/schemas.ts';
import { isDynamic, isPurchasable, type Catalog } from './catalog.ts';
import { OrderError } from './errors.ts';

type OpenItem = OpRequest<'InstanceOpen'>['params'][number];

/** The request against the operation's schema and part 8 limits; ORDER_INVALID naming every field. */
export function validateRequest(op: OperationName, request: Record<string, unknown>): void {
  const checked = operations[op].request.safeParse(request);
  if (!checked.success) {
    const issues = fieldIssues(checked.error);
    throw new OrderError('ORDER_INVALID', `${op}: ${issues.map((i) => `${i.path || '(request)'}: ${i.message}`).join('; ')}`, { issues });
  }
}

/** An open item with one period when neither `cycleTimes` nor `duration` is given. */
export function withOpenDefaults(item: OpenItem): OpenItem {
  const out = { ...item };
  if (out.cycleTimes === undefined && out.duration === undefined) out.cycleTimes = 1;
  return out;
}

/** The checks that read the catalogue (a product is always read fresh: stock and state change). */
export class OrderChecks {
  constructor(private readonly catalog: Pick<Catalog, 'product' | 'availableSegments'>) {}

  async requireProduct(productNo: string, field: string): Promise<Product> {
    const product = await this.catalog.product(productNo, { fresh: true });
    if (!product) throw new OrderError('PRODUCT_UNAUTHORIZED', `product ${productNo} is not authorized for this merchant`, { field });
    return product;
  }

  /** A specified IP is bought from a static product that sells specified IPs. */
  async assignIpProduct(productNo: string): Promise<Product> {
    const product = await this.requireProduct(productNo, 'productNo');
    if (isDynamic(product))
      throw new OrderError('ORDER_INVALID', 'a specified IP can be bought for static products only', { field: 'productNo' });
    if (product.assignIp !== 1)
      throw new OrderError('ORDER_INVALID', `product ${productNo} does not support buying a specified IP`, { field: 'productNo' });
    return product;
  }

  /** One item of an open order: product authorized and purchasable, stock, project, flow, segments. */
  async openItem(item: OpenItem, i: number): Promise<void> {
    const at = (f: string) => `params.${i}.${f}`;
    const count = item.count ?? 1;
    if (!item.productNo) {
      if (item.cidrBlocks?.length)
        throw new OrderError('ORDER_INVALID', 'segments can be chosen only with a productNo', { field: at('cidrBlocks') });
      if (item.productType === 2 && !item.projectId)
        throw new OrderError('PROJECT_REQUIRED', 'shared products need a projectId (a project code)', { field: at('projectId') });
      return;
    }
    const product = await this.requireProduct(item.productNo, at('productNo'));
    if (!isPurchasable(product)) {
      throw new OrderError(
        'PRODUCT_NOT_PURCHASABLE',
        `product ${item.productNo} is not purchasable (enable ${product.enable ?? 'unset'}, inventory ${product.inventory ?? 0})`,
        { field: at('productNo') },
      );
    }
    if (product.productType === 2) {
      if (!item.projectId)
        throw new OrderError('PROJECT_REQUIRED', `product ${item.productNo} is shared: projectId (a project code) is required`, {
          field: at('projectId'),
        });
      const project = product.projectList?.find((p) => p.code === item.projectId);
      if (product.projectList && !project)
        throw new OrderError('ORDER_INVALID', `project ${item.projectId} is not offered with product ${item.productNo}`, {
          field: at('projectId'),
        });
      if (project && project.inventory !== undefined && project.inventory !== null && project.inventory < count) {
        throw new OrderError(
          'PRODUCT_NOT_PURCHASABLE',
          `project ${item.projectId} of product ${item.productNo} has no stock for ${count}`,
          { field: at('projectId') },
        );
      }
    }
    if (isDynamic(product)) {
      if (!item.appUsername)
        throw new OrderError('ORDER_INVALID', 'dynamic products need appUsername (the main account)', { field: at('appUsername') });
      const byIpCount = (product.ipCount ?? 0) > 0;
      if (!byIpCount && (product.flow ?? 0) > 0) {
        if (!item.flow)
          throw new OrderError('ORDER_INVALID', `product ${item.productNo} is sold by traffic: flow (MB) is required`, {
            field: at('flow'),
          });
        if (item.flow < (product.flow ?? 0))
          throw new OrderError('ORDER_INVALID', `flow must be at least ${product.flow} MB for product ${item.productNo}`, {
            field: at('flow'),
          });
      }
      return;
    }
    if (item.flow !== undefined) throw new OrderError('ORDER_INVALID', 'flow applies to dynamic products only', { field: at('flow') });
    if ((product.inventory ?? 0) < count) {
      throw new OrderError('PRODUCT_NOT_PURCHASABLE', `product ${item.productNo} has ${product.inventory ?? 0} in stock, ${count} asked`, {
        field: at('count'),
      });
    }
    const maxBw = product.maxBandWidth ?? 0;
    if (item.extBandWidth && maxBw > 0 && item.extBandWidth > maxBw) {
      throw new OrderError('ORDER_INVALID', `extBandWidth must be at most ${maxBw} Mbps for product ${item.productNo}`, {
        field: at('extBandWidth'),
      });
    }
    if (item.cidrBlocks?.length) {
      if (product.cidrStatus !== 1)
        throw new OrderError('ORDER_INVALID', `product ${item.productNo} does not sell IP segments`, { field: at('cidrBlocks') });
      const sum = item.cidrBlocks.reduce((s, b) => s + b.count, 0);
      if (sum !== count)
        throw new OrderError('ORDER_INVALID', `segment counts add up to ${sum}, but count is ${count}`, { field: at('cidrBlocks') });
      const available = new Set(this.catalog.availableSegments(product));
      const missing = item.cidrBlocks.find((b) => !available.has(b.cidr));
      if (missing)
        throw new OrderError(
          'SEGMENT_UNAVAILABLE',
          `segment ${missing.cidr} is not offered (offline or unknown) for product ${item.productNo}`,
          { field: at('cidrBlocks') },
        );
    }
  }
}
