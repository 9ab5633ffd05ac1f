// Limits on guessing and flooding. Failed authentications are counted per client address and per
// address and username, never per username alone: a guesser elsewhere can never lock the real
// charity out. A failure is counted as it is judged, and one past the limit is answered 429 like
// any guess after it, so guesses in flight together learn nothing past the limit. Creates are
// counted per charity. Counters live in memory (per instance), or under WORKERS in the primary
// process (shared by its workers), or in Redis (shared by every instance); with an in-memory
// fallback should the primary or Redis stop answering.
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { createRequire } from 'node:module';
import type * as Limiters from 'rate-limiter-flexible';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import { discardBody } from './body.js';
import { DEFAULT_CREATES_IN_FLIGHT } from '../config.js';
import { addressKey } from './client-address.js';
import { isMessage, PRIMARY_GRACE_MS, toPrimary } from '../cluster/ipc.js';
import { setDeadline } from '../time.js';

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

/**
 * How long a Redis command may take before the in-memory limiter answers for it: a Redis that has
 * stopped answering costs a request this much, never a hang. ioredis's `commandTimeout`.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 50;

/**
 * The Redis client for shared counters: commands fail at once while disconnected and after
 * `commandTimeoutMs` (REDIS_COMMAND_TIMEOUT_MS by default) while Redis is silent, and the in-memory
 * limiter answers meanwhile; it reconnects by itself. ioredis is loaded only here: it alone adds
 * 0.1 s to start-up.
 */
export async function openRedis(url: string, { commandTimeoutMs = REDIS_COMMAND_TIMEOUT_MS }: { commandTimeoutMs?: number } = {}): Promise<Redis> {
  const { Redis } = await import('ioredis');
  // ioredis's own timeout only ends commands left pending for good: its timer fires when the event
  // loop next runs timers, before it reads what Redis answered meanwhile, so a server busy for
  // longer than commandTimeoutMs (300 guesses parsed at once) took every answer for a timeout, and
  // the in-memory counters, which had counted none of the guesses before, judged 10 more (a review,
  // 2026-11-29). The limiters wait commandTimeoutMs themselves, and read what arrived first (answered).
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: Math.max(1000, 20 * commandTimeoutMs) });
  ANSWER_WITHIN.set(redis, commandTimeoutMs);
  redis.on('error', () => {}); // reconnects by itself; meanwhile the in-memory fallback counts (reportRedis says so)
  return redis;
}

/** Each client openRedis made, and how long its limiters' commands may take (its commandTimeoutMs). */
const ANSWER_WITHIN = new WeakMap<Redis, number>();

/** What the log says of a Redis that does not answer in time, whoever waited for it. */
const SILENT = 'Redis did not answer in time';

/** A Redis command not answered in time: the in-memory counters answer for it. */
class RedisSilent extends Error {}

/**
 * `asked`, or a RedisSilent once `ms` have passed and the event loop has since read whatever had
 * arrived (setDeadline): a moment the server itself was busy is not Redis's silence.
 */
function answered<T>(asked: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setDeadline(() => settled || reject(new RedisSilent(SILENT)), ms);
    const settle = () => {
      settled = true;
      clearTimeout(timer);
    };
    asked.then(
      (value) => (settle(), resolve(value)),
      (err: unknown) => (settle(), reject(err)),
    );
  });
}

/**
 * Says in `log` when the connection to Redis fails (at start or later), once until it is back, and
 * when it is back: meanwhile each instance counts the limits on its own, which without a word a
 * mistyped REDIS_URL would leave so for good. The error's message names the address, never a password.
 */
export function reportRedis(
  redis: Redis,
  log: { warn(fields: object, message: string): void; info(message: string): void },
  { quietMs = REDIS_BACK_AFTER_MS }: { quietMs?: number } = {},
): void {
  let failing = false;
  let lastFailure = 0;
  const failed = (err: Error) => {
    lastFailure = performance.now();
    if (failing) return;
    failing = true;
    // Refused credentials are not silence: said so, the operator looks at REDIS_URL's user and password, not the network.
    const refused = /^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR AUTH\b/.test(err.message);
    // ioredis's own word for its commandTimeout (a Redis silent from the start: the connection's first command) is
    // said as the limiters' is, as the README gives it (a walkthrough found "Command timed out" in the log, 2026-12-02).
    log.warn(
      { err: err.message === 'Command timed out' ? SILENT : err.message },
      refused
        ? "Redis (REDIS_URL) refuses Almoner's credentials (the user and password in REDIS_URL): each instance counts the rate limits on its own until it accepts them"
        : 'Redis (REDIS_URL) is not answering: each instance counts the rate limits on its own until it does',
    );
  };
  const back = () => {
    if (!failing) return;
    failing = false;
    log.info('Redis (REDIS_URL) answers again: the rate limits are shared again');
  };
  redis.on('error', failed);
  redis.on('ready', back); // connected again
  // A connection that stays open while Redis says nothing raises no error: the limiters' commands going
  // unanswered say it, and their answers its return once none has gone unanswered for `quietMs` (a
  // Redis answering about as late as the limiters wait made a warn and an info of nearly every request:
  // a review). Until 2026-11-29 such silence was never logged (a review).
  HEARD.set(redis, { silent: failed, answered: () => failing && performance.now() - lastFailure >= quietMs && back() });
}

/** How long a Redis that fell silent must answer every command before its return is said (reportRedis). */
const REDIS_BACK_AFTER_MS = 30_000;

/** What the limiters tell reportRedis of a client's commands: one not answered in time, and an answer. */
const HEARD = new WeakMap<Redis, { silent(err: Error): void; answered(): void }>();

export interface ThrottleOptions {
  /** Creates per second per charity; 0 turns the limit off. */
  createsPerSecond: number;
  /** Creates one charity may have in flight at once in this process (CreatesInFlight); DEFAULT_CREATES_IN_FLIGHT by default, 0 for no limit. */
  createsInFlight?: number;
  /** Shared counters; without it they are this process's own. */
  redis?: Redis;
  /** Under WORKERS: the counters are kept by the primary process, for every worker (cluster/primary.ts); with Redis, while it does not answer. */
  cluster?: boolean;
  /** Namespaces the Redis keys and channel: REDIS_PREFIX, `almoner` by default (tests use their own). */
  keyPrefix?: string;
  /** With Redis: how often the connection that listens for failures is checked; WATCH_PING_MS by default (tests shorten it). */
  watchPingMs?: number;
}

/** The prefix of the throttle's Redis keys and channel. */
const keyPrefixOf = (opts: ThrottleOptions): string => opts.keyPrefix ?? 'almoner';

/** What the throttle asks of its counters (and, with Redis, of their keys). */
type Counter = Pick<RateLimiterAbstract, 'get' | 'consume' | 'getKey' | 'parseKey'>;

function limiter(opts: ThrottleOptions, name: string, points: number, duration: number): Counter {
  const keyPrefix = `${keyPrefixOf(opts)}:${name}`;
  const memory = new RateLimiterMemory({ keyPrefix, points, duration });
  // This process's own counts: under WORKERS the primary's, for every worker (memory while it does not answer).
  let own: Counter = memory;
  if (opts.cluster) {
    const { RateLimiterCluster }: typeof Limiters = require('rate-limiter-flexible/lib/RateLimiterCluster.js');
    own = withInsurance(new RateLimiterCluster({ keyPrefix, points, duration, timeoutMs: PRIMARY_GRACE_MS }), memory);
  }
  if (!opts.redis) return own;
  const RateLimiterRedis: typeof Limiters.RateLimiterRedis = require('rate-limiter-flexible/lib/RateLimiterRedis.js');
  const redis = new RateLimiterRedis({ storeClient: opts.redis, keyPrefix, points, duration });
  const within = ANSWER_WITHIN.get(opts.redis) ?? REDIS_COMMAND_TIMEOUT_MS;
  const client = opts.redis;
  const heard = <T>(asked: Promise<T>): Promise<T> =>
    answered(asked, within).then(
      (value) => (HEARD.get(client)?.answered(), value),
      (err: unknown) => {
        if (err instanceof RateLimiterRes) HEARD.get(client)?.answered(); // an answer: over the limit
        else if (err instanceof RedisSilent) HEARD.get(client)?.silent(err);
        throw err;
      },
    );
  // A command that fails (Redis not connected) or is not answered in time is answered by this process's
  // own counts: a late answer still counts in Redis, so a guess is counted twice, never in neither. Under
  // WORKERS those are the primary's, so the workers count together as without Redis (until 2026-11-29
  // each worker's memory: with Redis down, WORKERS=2 let twice the limits through; a review).
  const shared: Counter = {
    get: (key) => heard(redis.get(key)),
    consume: (key) => heard(redis.consume(key)),
    getKey: (key) => redis.getKey(key),
    parseKey: (key) => redis.parseKey(key),
  };
  return withInsurance(shared, own);
}

/**
 * Under WORKERS: the primary's counters, and this worker's own while the primary does not answer
 * within PRIMARY_GRACE_MS (a disk stall holds it up on SQLite, where it commits every create), as
 * Redis has its in-memory insurance. Without it the limiter's timeout was a 500 to every create
 * and to every authentication from an address with a failure.
 */
function withInsurance(shared: Counter, own: Counter): Counter {
  const ownIfUnanswered = <T>(err: unknown, ask: () => Promise<T>): Promise<T> => {
    if (err instanceof RateLimiterRes) throw err; // an answer: over the limit
    return ask();
  };
  return {
    get: (key) => shared.get(key).catch((err: unknown) => ownIfUnanswered(err, () => own.get(key))),
    consume: (key) => shared.consume(key).catch((err: unknown) => ownIfUnanswered(err, () => own.consume(key))),
    getKey: (key) => shared.getKey(key),
    parseKey: (key) => shared.parseKey(key),
  };
}

/**
 * Seconds until the limiter lets `key` through again, rounded up to a whole second, and never more
 * than its window: the limiters count on Date.now(), so a wall clock stepped back an hour made a
 * create's Retry-After 3601 s where the block lasted a second (a review).
 */
function secondsLeft(res: RateLimiterRes, windowSeconds: number): number {
  return Math.min(windowSeconds, Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
}

/** Addresses whose failures this process remembers itself (see mayBlock); past this many, every address is checked. */
const MAX_REMEMBERED_FAILURES = 100_000;

export class Throttle {
  private readonly byAddress: Counter;
  private readonly byAddressAndUsername: Counter;
  private readonly creates: Counter | undefined;
  /** Each charity's creates in flight in this process, or undefined with no limit. */
  readonly inFlight: CreatesInFlight | undefined;
  /** The shared counters, if other processes count failures too. */
  private readonly redis: Redis | undefined;
  /** With Redis: where each instance announces its failures. */
  private readonly failureChannel: string | undefined;
  /** With Redis: whether this process hears of every instance's failures; until then every address is checked. */
  private readonly watch: ReturnType<typeof watchFailures> | undefined;
  /** Under WORKERS: every failure is announced to the other workers, so each knows every address with one. */
  private readonly cluster: boolean;
  /** Each address with a failure counted here, and when its window ends at the latest (Date.now()'s clock, as the limiters'). */
  private readonly failedUntil = new Map<string, number>();

  constructor(opts: ThrottleOptions) {
    const { perAddress, perAddressAndUsername, windowSeconds } = AUTH_FAILURES;
    this.byAddress = limiter(opts, 'auth-ip', perAddress, windowSeconds);
    this.byAddressAndUsername = limiter(opts, 'auth-ip-user', perAddressAndUsername, windowSeconds);
    this.creates = opts.createsPerSecond > 0 ? limiter(opts, 'create', opts.createsPerSecond, 1) : undefined;
    const inFlight = opts.createsInFlight ?? DEFAULT_CREATES_IN_FLIGHT;
    this.inFlight = inFlight > 0 ? new CreatesInFlight(inFlight) : undefined;
    this.redis = opts.redis;
    // With Redis too: while it does not answer, the workers count on the primary, and each must know every address with a failure.
    this.cluster = opts.cluster === true;
    if (this.cluster) process.on('message', (m: unknown) => isMessage(m, 'almoner:auth-failure') && this.failed(m.address, m.until));
    if (opts.redis) {
      this.failureChannel = `${keyPrefixOf(opts)}:auth-failures`;
      const counted = [
        { limiter: this.byAddress, addressOf: (key: string) => key },
        { limiter: this.byAddressAndUsername, addressOf: addressOfPair },
      ];
      this.watch = watchFailures(opts.redis, counted, this.failureChannel, (address) => this.failed(address), opts.watchPingMs);
    }
  }

  /** Closes what the throttle itself opened (with Redis, its listening connection); the Redis client given is the caller's to close. */
  close(): void {
    this.watch?.stop();
  }

  /**
   * Notes a failure from this address, here or on another instance: it may be blocked until `until`.
   * Kept in the order their windows end (an address noted again moves to the end), so those whose
   * window has ended are dropped from the front, and the map holds only addresses that may be blocked.
   */
  private failed(address: string, until = windowEnd()): void {
    this.failedUntil.delete(address);
    this.failedUntil.set(address, until);
    this.forgetEnded();
  }

  private forgetEnded(): void {
    const now = Date.now();
    for (const [address, until] of this.failedUntil) {
      if (until > now) break;
      this.failedUntil.delete(address);
    }
  }

  /**
   * Whether authenticationBlocked could say anything but 0 for this address. Without Redis this
   * process keeps every count, so an address with no failure in the window cannot be blocked, and
   * the counters need not be read: most requests are spared two limiter reads and a hash. Under
   * WORKERS each worker hears of every other's failures as they happen (the primary passes them
   * on), long before an address can have failed the ten times that block it; and every failure is
   * counted by the primary itself, so a guess judged by any worker is answered as its count says.
   * With Redis the same holds across instances: each announces its failures on a Redis channel
   * that every other one listens to (and reads the counters Redis holds whenever it starts
   * listening); while it is not listening, every address is checked.
   */
  mayBlock(address: string): boolean {
    address = addressKey(address); // an IPv6 client by its /64
    if (this.watch && !this.watch.listening()) return true;
    if (this.failedUntil.size >= MAX_REMEMBERED_FAILURES) {
      this.forgetEnded();
      if (this.failedUntil.size >= MAX_REMEMBERED_FAILURES) return true;
    }
    const until = this.failedUntil.get(address);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.failedUntil.delete(address);
    return false;
  }

  /**
   * Seconds to wait if this address (or this address against this username) has failed too often,
   * else 0; counts nothing. With Redis the counters are always read: another instance's failure may
   * not have been heard yet, and this is only asked of a request being judged (not of one whose
   * remembered credential mayBlock let through).
   */
  async authenticationBlocked(address: string, username: string): Promise<number> {
    address = addressKey(address); // an IPv6 client by its /64
    if (!this.redis && !this.mayBlock(address)) return 0;
    const [ip, pair] = await Promise.all([this.byAddress.get(address), this.byAddressAndUsername.get(pairKey(address, username))]);
    const blocked = [
      ip && ip.consumedPoints >= AUTH_FAILURES.perAddress ? ip : null,
      pair && pair.consumedPoints >= AUTH_FAILURES.perAddressAndUsername ? pair : null,
    ].filter((r): r is RateLimiterRes => r !== null);
    return blocked.length ? Math.max(...blocked.map((res) => secondsLeft(res, AUTH_FAILURES.windowSeconds))) : 0;
  }

  /**
   * Counts a failed authentication against this address, and this address with this username; the
   * seconds to wait if that passed either limit (the failure is then answered 429, not 401), else
   * 0. Call it in the same turn as the verdict: the in-memory counters then change in the order
   * verdicts are reached, so guesses in flight together (in parallel, or pipelined on one
   * connection) are answered 401 no more often than the limit allows. Through Redis each count is
   * one atomic increment, so the same holds across instances.
   */
  async authenticationFailed(address: string, username: string): Promise<number> {
    address = addressKey(address); // an IPv6 client by its /64
    const until = windowEnd();
    this.failed(address, until);
    if (this.cluster) toPrimary({ type: 'almoner:auth-failure', address, until });
    // Announced at once, so the others hear as soon as they can; and again once counted, so that an
    // instance that began listening in between (and so missed the first, and read Redis before the
    // count) hears it all the same.
    this.announce(address);
    const { windowSeconds } = AUTH_FAILURES;
    const refused = await Promise.all([take(this.byAddress, address, windowSeconds), take(this.byAddressAndUsername, pairKey(address, username), windowSeconds)]);
    this.announce(address);
    return Math.max(0, ...refused);
  }

  private announce(address: string): void {
    if (this.failureChannel) this.redis?.publish(this.failureChannel, address).catch(() => {});
  }

  /** Seconds to wait if the charity is over its create rate, else 0 (and the create is counted). */
  async createBlocked(charityId: number): Promise<number> {
    return this.creates ? take(this.creates, String(charityId), 1) : 0;
  }
}

/** When the failure window of a failure now ends (Date.now()'s clock, as the limiters'). */
const windowEnd = (): number => Date.now() + AUTH_FAILURES.windowSeconds * 1000;

/** Takes a point: 0 when it was there, else the seconds until one is (consume() rejects past the limit). */
async function take(limiter: Counter, key: string, windowSeconds: number): Promise<number> {
  try {
    await limiter.consume(key);
    return 0;
  } catch (res) {
    if (res instanceof RateLimiterRes) return secondsLeft(res, windowSeconds);
    throw res;
  }
}

/** How long to wait before trying again to read the failures Redis holds, after a try that failed. */
const WATCH_RETRY_MS = 1000;
/**
 * How often the listening connection is asked for a PING, and how long each may take to be
 * answered: a connection that goes quiet (half-open, after a failover or a NAT's idle timeout)
 * would otherwise never be noticed, as nothing is sent on it, and failures announced meanwhile
 * would go unheard. So one is noticed within two of these.
 */
export const WATCH_PING_MS = 1000;

/**
 * Listens, on a connection of its own, for the failures every instance announces on `channel`, and
 * tells `heard` of each one's address; whenever it (re)starts listening, it first reads the
 * addresses with a failure Redis still counts, from the keys of the `counted` limiters (after subscribing, so no failure falls between the
 * two: each is announced only once counted). Returns whether it is listening with that reading done.
 * The connection ends when `redis` does.
 */
function watchFailures(
  redis: Redis,
  counted: readonly { limiter: Counter; addressOf: (key: string) => string }[],
  channel: string,
  heard: (address: string) => void,
  pingEveryMs = WATCH_PING_MS,
): { listening: () => boolean; stop: () => void } {
  // A PING may wait behind a burst of announcements: it is given until the next one to be answered.
  const listener = redis.duplicate({ autoResubscribe: false, enableOfflineQueue: true, commandTimeout: pingEveryMs });
  listener.on('error', () => {}); // reconnects by itself; meanwhile every address is checked
  let listening = false;
  let stopped = false;
  let attempt = 0;
  listener.on('message', (from: string, address: string) => from === channel && heard(address));
  const start = async (): Promise<void> => {
    if (stopped) return;
    const mine = ++attempt;
    try {
      await listener.subscribe(channel);
      for (const { limiter, addressOf } of counted) {
        for await (const keys of redis.scanStream({ match: limiter.getKey('*'), count: 1000 }) as AsyncIterable<string[]>) {
          for (const key of keys) heard(addressOf(limiter.parseKey(key)));
        }
      }
      if (mine === attempt && listener.status === 'ready') listening = true;
    } catch {
      if (mine === attempt && listener.status === 'ready' && !stopped) setTimeout(() => void start(), WATCH_RETRY_MS).unref();
    }
  };
  listener.on('ready', () => void start());
  listener.on('close', () => {
    listening = false;
    attempt++; // a reading under way when the connection went is not trusted
  });
  // No answer to a PING within the command timeout: not listening, and a new connection.
  const heartbeat = setInterval(() => {
    if (listener.status !== 'ready') return;
    listener.ping().catch(() => {
      if (stopped) return;
      listening = false;
      attempt++;
      listener.disconnect(true);
    });
  }, pingEveryMs).unref();
  const stop = () => {
    stopped = true;
    clearInterval(heartbeat);
    listening = false;
    listener.disconnect();
  };
  redis.once('end', stop);
  return { listening: () => listening, stop };
}

function pairKey(address: string, username: string): string {
  // A guessed username may be anything, of any length: a hash bounds and neutralises it.
  return `${address}|${createHash('sha256').update(username).digest('base64url').slice(0, 22)}`;
}

/** The address of a pairKey (`address|hash`). */
const addressOfPair = (key: string): string => key.slice(0, key.lastIndexOf('|'));

/** Answers 429 with Retry-After (after reading the body, so the answer reaches a client still sending). */
export async function tooManyRequests(request: FastifyRequest, reply: FastifyReply, seconds: number, message: string) {
  await discardBody(request.raw, reply.raw);
  return reply.code(429).header('Retry-After', String(seconds)).send({ message: `${message} Try again in ${seconds} second${seconds === 1 ? '' : 's'}.` });
}

/**
 * Each charity's creates in flight in this process: from the moment one passes the create rate
 * until its answer has gone out, or its client has gone. A create's body is held in memory while it
 * arrives, up to BODY_LIMIT, for up to the request timeout (30 s); the rate alone bounded those
 * held by one charity's credentials only by rate × timeout, and 3,500 bodies sent slowly at 100 a
 * second took a server to 313 MB of RSS (151 MB with this limit) (until 2026-12-01; a review ran a 256 MB heap out of it).
 * Counted per process: memory is the process's own (under WORKERS, each worker counts its own).
 */
export class CreatesInFlight {
  private readonly counts = new Map<number, number>();
  /** Per connection, the places its creates hold: given back as it closes, one listener for all of them. */
  private readonly onConnection = new WeakMap<Socket, Set<() => void>>();

  constructor(readonly max: number) {}

  /**
   * Takes a place for this charity's create, given back when `res` closes (answered, or its client
   * gone) or its connection does; false when all are taken. A response pipelined behind one that
   * closed the connection (a body that is not JSON, too large) never closes: its place was held
   * until the server restarted (a review, 2026-12-02).
   */
  take(charityId: number, res: ServerResponse): boolean {
    const count = this.counts.get(charityId) ?? 0;
    if (count >= this.max) return false;
    this.counts.set(charityId, count + 1);
    const socket = (res.req as typeof res.req | undefined)?.socket; // none for a request made in-process (Fastify's inject)
    const held = socket ? this.heldOn(socket) : new Set<() => void>();
    const giveBack = () => {
      if (!held.delete(giveBack)) return; // given back already
      res.removeListener('close', giveBack);
      const left = this.counts.get(charityId)! - 1;
      if (left === 0) this.counts.delete(charityId);
      else this.counts.set(charityId, left);
    };
    held.add(giveBack);
    res.once('close', giveBack);
    if (socket?.closed) giveBack(); // its client gone already, before its create got this far
    return true;
  }

  private heldOn(socket: Socket): Set<() => void> {
    let held = this.onConnection.get(socket);
    if (!held) {
      const made = (held = new Set());
      this.onConnection.set(socket, made);
      socket.once('close', () => {
        for (const giveBack of [...made]) giveBack();
      });
    }
    return held;
  }

  /** How many creates this charity has in flight here. */
  of(charityId: number): number {
    return this.counts.get(charityId) ?? 0;
  }
}

/** An onRequest hook, after authentication: the charity's create rate, then its creates in flight. */
export function createRateLimit(throttle: Throttle) {
  const { inFlight } = throttle;
  const tooMany = `Too many donations are being sent at once: at most ${inFlight?.max} at a time.`;
  return async function limitCreates(request: FastifyRequest, reply: FastifyReply) {
    const wait = await throttle.createBlocked(request.charity.id);
    if (wait) return tooManyRequests(request, reply, wait, 'Too many donations sent too quickly.');
    if (inFlight && !inFlight.take(request.charity.id, reply.raw)) return tooManyRequests(request, reply, 1, tooMany);
  };
}
