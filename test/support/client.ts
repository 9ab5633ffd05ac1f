// Test support for calls through the typed client (almoner/client), over a real loopback socket.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { AlmonerClient } from '../../src/client/index.js';

const addresses = new WeakMap<FastifyInstance, Promise<string>>();

/** The app's address on 127.0.0.1, e.g. http://127.0.0.1:41234; it starts listening on first use. */
export function urlOf(app: FastifyInstance): Promise<string> {
  let url = addresses.get(app);
  if (!url) {
    const listening = app.server.listening ? Promise.resolve() : app.listen({ host: '127.0.0.1', port: 0 });
    url = listening.then(() => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    addresses.set(app, url);
  }
  return url;
}

/** The typed client of a charity on the app; `fetch` to watch the answers as they arrive. */
export async function clientFor(app: FastifyInstance, charity: { username: string; password: string }, fetch?: typeof globalThis.fetch): Promise<AlmonerClient> {
  return new AlmonerClient({ baseUrl: await urlOf(app), username: charity.username, password: charity.password, ...(fetch ? { fetch } : {}) });
}

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
