// Reading one product. Seed 4.2 names GetProductInfo ("real-time single product") but shows neither its request
// nor its answer; the product query (GetProductStock) is specified, and "when `productNo` is given, only that
// product is returned" as an array of product records. So one product is read:
//   1. by GetProductInfo {productNo} — one record (the provider SDK's reading), or an array holding it (the
//      product query's reading);
//   2. when that operation is refused (a code other than a system error), unknown to the platform (HTTP 404,
//      405, 501) or answered with something that is not a product, by the product query {proxyType: every
//      type, productNo}, which every platform written from the seed answers.
// A platform whose GetProductInfo path is unknown (404/405/501) is remembered, so later reads go straight to the
// product query (one call, not two).
import { CODE } from './codes.ts';
import { DecryptReplyError, EmptyReplyError, PlatformClientError, PlatformError, ResponseInvalidError, TransportError } from './errors.ts';
import type { OpRequest, OpResponse, OperationName } from './operations.ts';
import type { Product } from './schemas.ts';

/** Every proxy type of seed 2.1: the product query asked for one named product, whatever its type. */
export const EVERY_PROXY_TYPE = [101, 102, 103, 201, 104, 105];

export interface ProductCaller {
  call<N extends OperationName>(name: N, params: OpRequest<N>): Promise<OpResponse<N>>;
}

/** Neither GetProductInfo nor the product query knows the product (GetProductInfo itself unknown to the platform). */
export class ProductNotListedError extends PlatformClientError {
  readonly productNo: string;
  constructor(productNo: string, cause: unknown) {
    super({
      code: 'PRODUCT_NOT_LISTED',
      httpStatus: 404,
      message: `product ${productNo} is not in the merchant's catalogue (the product query does not list it)`,
      operation: 'GetProductStock',
      reqId: undefined,
      cause,
    });
    this.productNo = productNo;
  }
}

/** HTTP statuses that say the path or method is unknown to the platform (nothing about the product). */
const ABSENT_STATUSES = new Set([404, 405, 501]);

function pathUnknown(err: unknown): boolean {
  return err instanceof TransportError && err.reason === 'http_status' && ABSENT_STATUSES.has(err.responseStatus ?? 0);
}

/** GetProductInfo's failure is worth asking the product query: refused, unknown, or not a product record. */
function askTheQuery(err: unknown): boolean {
  if (err instanceof PlatformError) return err.platformCode !== CODE.SYSTEM && err.platformCode !== CODE.DECRYPT;
  return pathUnknown(err) || err instanceof ResponseInvalidError || err instanceof EmptyReplyError || err instanceof DecryptReplyError;
}

export class ProductReader {
  /** Set once GetProductInfo's path proved unknown to this platform. */
  private infoAbsent = false;

  constructor(private readonly client: ProductCaller) {}

  /**
   * The product record. Throws GetProductInfo's refusal (a PlatformError) when the product query does not list it
   * either, ProductNotListedError when GetProductInfo is unknown to the platform and the query does not list it,
   * and any transport failure or system error as it came.
   */
  async read(productNo: string): Promise<Product> {
    let infoError: unknown;
    if (!this.infoAbsent) {
      try {
        const answer = await this.client.call('GetProductInfo', { productNo });
        const record = Array.isArray(answer) ? answer.find((p) => p.productNo === productNo) : answer;
        if (record) return record;
        infoError = new ProductNotListedError(productNo, undefined);
      } catch (err) {
        if (!askTheQuery(err)) throw err;
        if (pathUnknown(err)) this.infoAbsent = true;
        infoError = err;
      }
    }
    const list = await this.client.call('GetProductStock', { proxyType: EVERY_PROXY_TYPE, productNo });
    const listed = list.find((p) => p.productNo === productNo);
    if (listed) return listed;
    if (infoError instanceof PlatformError || infoError instanceof ProductNotListedError) throw infoError;
    throw new ProductNotListedError(productNo, infoError);
  }
}
