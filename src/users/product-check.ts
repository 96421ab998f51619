// A user's `products` checked against the merchant's catalogue when they come in: POST and PATCH /v1/users, a
// batch's rows (`rotor users import`), the config's users. Before, an unknown productNo was taken and only
// refused when a connection named it (`-product-`, src/proxy/router.ts). A product the platform refuses
// (GetProductInfo answered with a refusal code) is refused here, naming the field (UnknownProductError, 422).
// A catalogue that cannot be read (the platform unreachable, a system error after the retries, or no answer
// within PRODUCT_CHECK_MS) does not hold a reseller's work up: the products are taken as given, with a warning
// line, and are still judged at use. Products the catalogue has answered are cached (accounting/products.ts).
import type { Logger } from '../telemetry/logger.ts';
import { UnknownProductError } from './errors.ts';

/** How long an input waits for the catalogue before its products are taken unchecked. */
export const PRODUCT_CHECK_MS = 5000;

/** What the check asks (src/users/sub-account.ts SubAccounts, on the accounts' product catalogue). */
export interface ProductLookup {
  /** true: the catalogue holds it; false: the platform refused it; undefined: the catalogue could not be read. */
  knowsProduct?(productNo: string): Promise<boolean | undefined>;
}

/**
 * Throws UnknownProductError for the first product of `products` the catalogue does not hold (`field` names
 * the list: `products`, `users.3.products`); logs one warning and passes when the catalogue could not be read.
 */
export async function checkProducts(
  lookup: ProductLookup | undefined,
  products: readonly string[] | null | undefined,
  field: string,
  logger: Logger | undefined,
  user: string,
): Promise<void> {
  const knows = lookup?.knowsProduct?.bind(lookup);
  if (knows === undefined || !products || products.length === 0) return;
  const answers = await Promise.all(products.map((p) => knows(p)));
  const unknown = answers.indexOf(false);
  if (unknown >= 0) throw new UnknownProductError(`${field}.${unknown}`, products[unknown]!);
  const unread = products.filter((_, i) => answers[i] === undefined);
  if (unread.length > 0)
    logger?.warn(
      { user, field, products: unread },
      "products taken without a check: the merchant's catalogue could not be read (an unknown one is still refused when a connection names it)",
    );
}
