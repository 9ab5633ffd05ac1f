// Limits on guessing and flooding. Failed authentications are counted per client address and
// per address and username, never per username alone: a guesser elsewhere can never lock the real
// charity out. Creates are counted per charity. Counters live in memory (per instance), or in
// Redis (shared by every instance) with an in-memory fallback should Redis stop answering.
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { createRequire } from 'node:module';
import type * as Limiters from 'rate-limiter-flexible';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import { discardBody } from './body.js';

// The package's index loads every backend it supports (MongoDB, MySQL, DynamoDB...) at start-up;
// only these are needed, and Redis's only with REDIS_URL.
const require = createRequire(import.meta.url);
const RateLimiterMemory: typeof Limiters.RateLimiterMemory = require('rate-limiter-flexible/lib/RateLimiterMemory.js');
const RateLimiterRes: typeof Limiters.RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes.js');
type RateLimiterRes = Limiters.RateLimiterRes;

export const AUTH_FAILURES = {
  /** Failed authentications one client address may make per window. */
  perAddress: 30,
  /** Failed authentications one client address may make against one username per window. */
  perAddressAndUsername: 10,
  windowSeconds: 60,
};

export interface ThrottleOptions {
  /** Creates per second per charity; 0 turns the limit off. */
  createsPerSecond: number;
  /** Shared counters; without it they are this process's own. */
  redis?: Redis;
  /** Namespaces the Redis keys (tests use their own). */
  keyPrefix?: string;
}

function limiter(opts: ThrottleOptions, name: string, points: number, duration: number): RateLimiterAbstract {
  const keyPrefix = `${opts.keyPrefix ?? 'almoner'}:${name}`;
  const memory = new RateLimiterMemory({ keyPrefix, points, duration });
  if (!opts.redis) return memory;
  const RateLimiterRedis: typeof Limiters.RateLimiterRedis = require('rate-limiter-flexible/lib/RateLimiterRedis.js');
  return new RateLimiterRedis({ storeClient: opts.redis, keyPrefix, points, duration, insuranceLimiter: memory });
}

/** Seconds until the limiter lets `key` through again, rounded up to a whole second. */
function secondsLeft(res: RateLimiterRes): number {
  return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
}

export class Throttle {
  private readonly byAddress: RateLimiterAbstract;
  private readonly byAddressAndUsername: RateLimiterAbstract;
  private readonly creates: RateLimiterAbstract | undefined;

  constructor(opts: ThrottleOptions) {
    const { perAddress, perAddressAndUsername, windowSeconds } = AUTH_FAILURES;
    this.byAddress = limiter(opts, 'auth-ip', perAddress, windowSeconds);
    this.byAddressAndUsername = limiter(opts, 'auth-ip-user', perAddressAndUsername, windowSeconds);
    this.creates = opts.createsPerSecond > 0 ? limiter(opts, 'create', opts.createsPerSecond, 1) : undefined;
  }

  /** Seconds to wait if this address (or this address against this username) has failed too often, else 0. */
  async authenticationBlocked(address: string, username: string): Promise<number> {
    const [ip, pair] = await Promise.all([this.byAddress.get(address), this.byAddressAndUsername.get(pairKey(address, username))]);
    const blocked = [
      ip && ip.consumedPoints >= AUTH_FAILURES.perAddress ? ip : null,
      pair && pair.consumedPoints >= AUTH_FAILURES.perAddressAndUsername ? pair : null,
    ].filter((r): r is RateLimiterRes => r !== null);
    return blocked.length ? Math.max(...blocked.map(secondsLeft)) : 0;
  }

  async authenticationFailed(address: string, username: string): Promise<void> {
    // consume() rejects once the limit is passed; that is the point, not an error.
    await Promise.all([
      this.byAddress.consume(address).catch(() => {}),
      this.byAddressAndUsername.consume(pairKey(address, username)).catch(() => {}),
    ]);
  }

  /** Seconds to wait if the charity is over its create rate, else 0 (and the create is counted). */
  async createBlocked(charityId: number): Promise<number> {
    if (!this.creates) return 0;
    try {
      await this.creates.consume(String(charityId));
      return 0;
    } catch (res) {
      if (res instanceof RateLimiterRes) return secondsLeft(res);
      throw res;
    }
  }
}

function pairKey(address: string, username: string): string {
  // A guessed username may be anything, of any length: a hash bounds and neutralises it.
  return `${address}|${createHash('sha256').update(username).digest('base64url').slice(0, 22)}`;
}

/** Answers 429 with Retry-After (after reading the body, so the answer reaches a client still sending). */
export async function tooManyRequests(request: FastifyRequest, reply: FastifyReply, seconds: number, message: string) {
  await discardBody(request.raw);
  return reply.code(429).header('Retry-After', String(seconds)).send({ message: `${message} Try again in ${seconds} seconds.` });
}

/** An onRequest hook, after authentication: the charity's create rate. */
export function createRateLimit(throttle: Throttle) {
  return async function limitCreates(request: FastifyRequest, reply: FastifyReply) {
    const wait = await throttle.createBlocked(request.charity.id);
    if (wait) return tooManyRequests(request, reply, wait, 'Too many donations recorded too quickly.');
  };
}
