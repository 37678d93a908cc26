import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createKeyChecker } from './auth.js';

const KEYS = ['first-key-0001', 'second-key-0002', 'third-key-0003'];

describe('createKeyChecker', () => {
  it('lets every call through when no keys are configured', () => {
    const check = createKeyChecker([]);
    for (const header of [undefined, '', 'Bearer anything', 'Basic dXNlcjpwYXNz']) assert.doesNotThrow(() => check(header));
  });

  it('rejects a call without an Authorization header with missing_api_key', () => {
    const check = createKeyChecker(KEYS);
    assert.throws(() => check(undefined), { code: 'missing_api_key', kind: 'unauthenticated' });
    assert.throws(() => check(''), { code: 'missing_api_key' });
  });

  it('rejects another scheme, or Bearer without a key, with missing_api_key', () => {
    const check = createKeyChecker(KEYS);
    for (const header of [
      'Basic Zmlyc3Qta2V5LTAwMDE=',
      'first-key-0001',
      'Token first-key-0001',
      'Bearer',
      'Bearer ',
      'Bearer   ',
      'Bearerfirst-key-0001',
    ]) {
      assert.throws(() => check(header), { code: 'missing_api_key' }, header);
    }
  });

  it('rejects a key that is not configured with invalid_api_key', () => {
    const check = createKeyChecker(KEYS);
    for (const header of [
      'Bearer wrong-key-0000',
      'Bearer first-key-000',
      'Bearer first-key-00011',
      'Bearer FIRST-KEY-0001',
      'Bearer first-key-0001 second-key-0002',
    ]) {
      assert.throws(() => check(header), { code: 'invalid_api_key', kind: 'unauthenticated' }, header);
    }
  });

  it('accepts each configured key, with any case of the scheme and surrounding spaces', () => {
    const check = createKeyChecker(KEYS);
    for (const key of KEYS) {
      assert.doesNotThrow(() => check(`Bearer ${key}`), key);
      assert.doesNotThrow(() => check(`bearer  ${key} `), key);
      assert.doesNotThrow(() => check(`BEARER ${key}`), key);
    }
  });
});
