// The platform's order statuses (seed part 3), the one definition every component reads: the order surface
// follows an order until its status is final, and both store drivers index open orders by the same rule.
// Constants only, so the store (which sits below the platform client) may import it too.

export const ORDER_STATUS = { pending: 1, processing: 2, succeeded: 3, failed: 4, partial: 5 } as const;

/** Statuses after which an order never changes again: succeeded, failed, partially succeeded. */
export const FINAL_ORDER_STATUS: ReadonlySet<number> = new Set([ORDER_STATUS.succeeded, ORDER_STATUS.failed, ORDER_STATUS.partial]);
