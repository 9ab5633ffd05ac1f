// Test support for calls through the typed client (almoner/client).
import assert from 'node:assert/strict';

/** The error a call rejected with, which must be a `type`; fails the test if the call succeeded or failed otherwise. */
export async function rejection<E extends Error>(call: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof type, `expected ${type.name}, got ${String(err)}`);
    return err;
  }
  assert.fail(`expected ${type.name}, but the call succeeded`);
}
