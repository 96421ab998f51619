// Who adopts the platform's higher usage figure (billing.adoptPlatformUsage): a lone daemon always; in a
// fleet only the daemon holding the `usage-adoption` lease, so the same gap is not added once per daemon.

/** The fleet's leases as this needs them (implemented by src/fleet/lease.ts LeaseKeeper). */
export interface AdoptionClaims {
  acquire(name: string): Promise<boolean>;
  isHeld(name: string): boolean;
}

export const ADOPTION_LEASE = 'usage-adoption';

export function usageAdoption(claims: AdoptionClaims | undefined): () => Promise<boolean> {
  if (!claims) return async () => true;
  return async () => claims.isHeld(ADOPTION_LEASE) || (await claims.acquire(ADOPTION_LEASE).catch(() => false));
}
