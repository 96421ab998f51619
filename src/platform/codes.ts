// Every result code of seed part 7 with the seed's meaning; one table, used by the client's typed errors,
// the simulator and the CLI.
export const PLATFORM_CODES = {
  200: 'success',
  500: 'system error',
  10001: 'decryption failed (check the secret)',
  10002: 'create failed, insufficient balance (nothing was created)',
  10003: 'create failed, insufficient stock (nothing was created)',
  10004: 'create failed, invalid parameters',
  10011: 'renew failed, instance does not exist',
  10012: 'renew failed, insufficient balance',
  10013: 'renew failed, the same merchant order cannot be renewed twice',
  10021: 'release failed, instance does not exist',
  10022: 'release failed, instance is beyond the release period',
  10031: 'get order failed, order does not exist',
  10041: 'get instance failed, instance does not exist',
  10051: 'create user failed, user name already exists',
  10052: 'get user failed, user does not exist',
  10061: 'create sub account failed: user name exists, or main account missing or disabled',
  10062: 'get sub account failed, user does not exist',
  10071: 'allocate traffic failed, main account missing or disabled',
  10072: 'allocate traffic failed, insufficient balance',
  10081: 'return traffic failed, insufficient balance',
  10091: 'invalid parameter, region does not exist',
  10092: 'invalid parameter, sub account username does not exist',
  10093: 'invalid parameter, sessTime must be in 1-120 minutes',
} as const;

export type PlatformCode = keyof typeof PLATFORM_CODES;

export const CODE = {
  OK: 200,
  SYSTEM: 500,
  DECRYPT: 10001,
  CREATE_BALANCE: 10002,
  CREATE_STOCK: 10003,
  INVALID_PARAMS: 10004,
  RENEW_NO_INSTANCE: 10011,
  RENEW_BALANCE: 10012,
  RENEW_TWICE: 10013,
  RELEASE_NO_INSTANCE: 10021,
  RELEASE_PERIOD: 10022,
  ORDER_NOT_FOUND: 10031,
  INSTANCE_NOT_FOUND: 10041,
  USER_EXISTS: 10051,
  USER_NOT_FOUND: 10052,
  SUB_CREATE_FAILED: 10061,
  SUB_NOT_FOUND: 10062,
  ALLOCATE_NO_MAIN: 10071,
  ALLOCATE_BALANCE: 10072,
  RETURN_BALANCE: 10081,
  REGION_NOT_FOUND: 10091,
  SUB_USERNAME_NOT_FOUND: 10092,
  SESS_TIME_RANGE: 10093,
} as const satisfies Record<string, PlatformCode>;

export function codeMeaning(code: number): string {
  return (PLATFORM_CODES as Record<number, string>)[code] ?? 'unknown code';
}
