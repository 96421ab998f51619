// The error catalogue: every error class a component raises carries its own admin status (RotorError's
// httpStatus), and the admin API's answer is read from it. The expected statuses and codes below are the admin
// contract as it stood when the table keyed by codes (src/admin/errors.ts) was removed; they must not move.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AccountingError } from '../../src/accounting/accounting.ts';
import { UnitsError } from '../../src/accounting/units.ts';
import { AccountsError } from '../../src/accounts/errors.ts';
import { AdminConfigError, AdminError, toErrorReply } from '../../src/admin/errors.ts';
import { ConfigError } from '../../src/config/load.ts';
import { RotorError } from '../../src/errors/rotor-error.ts';
import { OrderError } from '../../src/orders/errors.ts';
import { DecryptError, SecretLengthError } from '../../src/platform/envelope.ts';
import {
  ClientConfigError,
  DecryptReplyError,
  EmptyReplyError,
  PlatformError,
  RequestInvalidError,
  ResponseInvalidError,
  TransportError,
  UnknownOperationError,
} from '../../src/platform/errors.ts';
import { PoolEmptyError } from '../../src/pool/types.ts';
import { StoreConflictError, StoreError, StoreInUseError, StoreUnavailableError } from '../../src/store/errors.ts';

interface Case {
  err: RotorError;
  /** The admin API's answer: status and code. */
  status: number;
  code: string;
}

const platformRefusal = new PlatformError({ operation: 'GetOrder', reqId: 'r1', platformCode: 10031, platformMsg: 'order not found' });

const CATALOGUE: Case[] = [
  // admin
  { err: new AdminError(404, 'NOT_FOUND', 'user x not found'), status: 404, code: 'NOT_FOUND' },
  { err: new AdminError(409, 'USER_EXISTS', 'user x exists'), status: 409, code: 'USER_EXISTS' },
  { err: new AdminConfigError('admin.token', 'required'), status: 500, code: 'INTERNAL' },
  // platform
  { err: platformRefusal, status: 502, code: 'PLATFORM_ERROR' },
  {
    err: new TransportError({ operation: 'GetAppInfo', reqId: 'r2', reason: 'refused', detail: 'ECONNREFUSED' }),
    status: 503,
    code: 'PLATFORM_UNREACHABLE',
  },
  { err: new RequestInvalidError('OpenProxy', [{ path: 'params.0.count', message: 'too big' }]), status: 400, code: 'INVALID_INPUT' },
  { err: new UnknownOperationError('Nope'), status: 404, code: 'UNKNOWN_OPERATION' },
  { err: new DecryptReplyError('GetAppInfo', 'r3', 'bad padding'), status: 502, code: 'DECRYPT_REPLY' },
  { err: new EmptyReplyError('GetAppInfo', 'r4'), status: 502, code: 'EMPTY_REPLY' },
  { err: new ResponseInvalidError('GetAppInfo', 'r5', [{ path: 'data.x', message: 'bad' }]), status: 502, code: 'RESPONSE_INVALID' },
  { err: new ClientConfigError('baseUrl', 'not a valid URL'), status: 500, code: 'INTERNAL' },
  { err: new SecretLengthError(3), status: 500, code: 'INTERNAL' },
  { err: new DecryptError('bad padding'), status: 500, code: 'INTERNAL' },
  // orders
  { err: new OrderError('ORDER_INVALID', 'bad'), status: 400, code: 'ORDER_INVALID' },
  { err: new OrderError('PROJECT_REQUIRED', 'bad'), status: 400, code: 'PROJECT_REQUIRED' },
  { err: new OrderError('PRODUCT_UNAUTHORIZED', 'bad'), status: 404, code: 'PRODUCT_UNAUTHORIZED' },
  { err: new OrderError('ORDER_NOT_FOUND', 'bad'), status: 404, code: 'ORDER_NOT_FOUND' },
  { err: new OrderError('INSTANCE_NOT_FOUND', 'bad'), status: 404, code: 'INSTANCE_NOT_FOUND' },
  { err: new OrderError('PRODUCT_NOT_PURCHASABLE', 'bad'), status: 409, code: 'PRODUCT_NOT_PURCHASABLE' },
  { err: new OrderError('SEGMENT_UNAVAILABLE', 'bad'), status: 409, code: 'SEGMENT_UNAVAILABLE' },
  { err: new OrderError('IP_NOT_PURCHASABLE', 'bad'), status: 409, code: 'IP_NOT_PURCHASABLE' },
  { err: new OrderError('MERCHANT_NO_CONFLICT', 'bad'), status: 409, code: 'MERCHANT_NO_CONFLICT' },
  { err: new OrderError('ORDER_OUTCOME_UNKNOWN', 'bad'), status: 503, code: 'ORDER_OUTCOME_UNKNOWN' },
  // accounts
  { err: new AccountsError('INVALID_INPUT', 'ip must be an IP address'), status: 400, code: 'INVALID_INPUT' },
  { err: new AccountsError('NO_PRODUCT', 'none'), status: 404, code: 'NO_PRODUCT' },
  { err: new AccountsError('NOT_SUPPORTED', 'no'), status: 409, code: 'NOT_SUPPORTED' },
  { err: new AccountsError('MAIN_ACCOUNT_NAME_TAKEN', 'taken'), status: 409, code: 'MAIN_ACCOUNT_NAME_TAKEN' },
  { err: new AccountsError('MAIN_ACCOUNT_UNUSABLE', 'disabled'), status: 409, code: 'MAIN_ACCOUNT_UNUSABLE' },
  { err: new AccountsError('EGRESS_UNKNOWN', 'unknown'), status: 503, code: 'EGRESS_UNKNOWN' },
  // accounting
  { err: new AccountingError('UNKNOWN_USER', 'unknown user x'), status: 404, code: 'UNKNOWN_USER' },
  { err: new AccountingError('ACCOUNTING_CLOSED', 'closed'), status: 503, code: 'ACCOUNTING_CLOSED' },
  { err: new UnitsError('LIMIT_INVALID', 'limitBytes', 'must be -1'), status: 400, code: 'LIMIT_INVALID' },
  { err: new UnitsError('AMOUNT_INVALID', 'mb', 'must be finite'), status: 400, code: 'AMOUNT_INVALID' },
  // store
  { err: new StoreConflictError('journal entry M1'), status: 409, code: 'STORE_CONFLICT' },
  { err: new StoreUnavailableError('store closed'), status: 503, code: 'STORE_UNAVAILABLE' },
  { err: new StoreInUseError('store data/rotor.db is in use by another process'), status: 503, code: 'STORE_IN_USE' },
  { err: new StoreError('STORE_UNSUPPORTED', 'redis:// needs openStoreFor'), status: 503, code: 'STORE_UNSUPPORTED' },
  { err: new StoreError('STORE_FAILED', 'script x is not defined'), status: 500, code: 'INTERNAL' },
  // config
  { err: new ConfigError([{ key: 'platform.appKey', problem: 'required' }]), status: 500, code: 'INTERNAL' },
  // pool
  { err: new PoolEmptyError('p1', 'pool closed'), status: 503, code: 'POOL_EMPTY' },
];

describe('error catalogue', () => {
  for (const c of CATALOGUE) {
    test(`${c.err.name} ${c.err.code} → ${c.status} ${c.code}`, () => {
      assert.ok(c.err instanceof RotorError, 'every component error is a RotorError');
      assert.equal(c.err.name, c.err.constructor.name, 'the name is the class');
      // The status is the error's own definition; the admin answer is read from it.
      assert.equal(c.err.httpStatus, c.status);
      const r = toErrorReply(c.err);
      assert.equal(r.status, c.err.httpStatus);
      assert.equal(r.body.error.code, c.code);
      if (c.status === 500) assert.equal(r.body.error.message, 'internal error', 'a 500 says nothing of its insides');
      else assert.ok(r.body.error.message.length > 0);
    });
  }

  test('a platform refusal keeps its platformCode in the answer and the operation in the message', () => {
    const r = toErrorReply(platformRefusal);
    assert.equal(r.body.error.platformCode, 10031);
    assert.equal(r.body.error.message, 'GetOrder: platform refused with 10031: order not found');
  });

  test('an accounts error caused by a platform refusal carries its platformCode', () => {
    const r = toErrorReply(new AccountsError('MAIN_ACCOUNT_UNUSABLE', 'main account disabled', { cause: platformRefusal }));
    assert.equal(r.status, 409);
    assert.equal(r.body.error.platformCode, 10031);
  });

  test('a new RotorError with its own status needs no entry anywhere in the admin module', () => {
    class QuotaError extends RotorError {
      constructor() {
        super('QUOTA_EXCEEDED', 'too many users', { httpStatus: 429 });
      }
    }
    const r = toErrorReply(new QuotaError());
    assert.deepEqual(r, { status: 429, body: { error: { code: 'QUOTA_EXCEEDED', message: 'too many users' } } });
  });

  test('anything that is not a RotorError is a 500 that leaks nothing', () => {
    const r = toErrorReply(Object.assign(new Error('secret=abc'), { code: 'EWHATEVER' }));
    assert.deepEqual(r, { status: 500, body: { error: { code: 'INTERNAL', message: 'internal error' } } });
  });
});
