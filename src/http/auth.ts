// HTTP Basic authentication, run before the body is read: a bad credential is a 401
// whatever else is wrong with the request.
import { randomInt } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CharityCredential } from '../charities/charity.js';
import type { DatabaseBudget } from '../store/budget.js';
import { authenticatedCharity, whichPassword } from '../charities/credentials.js';
import { discardBody } from './body.js';
import { monotonicClock, type Clock } from '../time.js';
import { tooManyRequests, type Throttle } from './throttle.js';

declare module 'fastify' {
  interface FastifyRequest {
    charity: CharityCredential;
    /** When the credential was judged, on the app's clock. */
    authenticatedAt: number;
    /** A 401's: the id of the charity whose username was given, when one has it; else null. */
    charityTried: number | null;
  }
}

export const WWW_AUTHENTICATE = 'Basic realm="Almoner", charset="UTF-8"';
/**
 * The challenge for a page's script: a 401 must carry one (RFC 9110), but with a Basic one the
 * browser covers the page with its own login dialog instead of letting the page show the 401.
 * Browsers do not know this scheme, so they leave the answer to the page.
 */
export const SCRIPT_WWW_AUTHENTICATE = 'XBasic realm="Almoner"';

/** Splits an `Authorization` header into Basic credentials; the scheme name is case-insensitive (RFC 7617). */
function parseBasicAuthorization(header: string | undefined): { username: string; password: string } | null {
  if (!header) return null;
  const m = /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  // No generated credential holds a NUL, and PostgreSQL's text type could not even look one up.
  if (colon < 0 || decoded.includes('\u0000')) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** An Authorization header as RFC 7617 writes it: the one form of these credentials the cache remembers. */
function plainAuthorization(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

/** Whether a page's script sent the request and handles a 401 itself (X-Requested-With: XMLHttpRequest). */
function fromScript(request: FastifyRequest): boolean {
  return request.headers['x-requested-with']?.toString().toLowerCase() === 'xmlhttprequest';
}

/** How long a failed authentication is held back: see FAILURE_DELAY. */
export interface FailureDelay {
  floorMs: number;
  jitterMs: number;
}

/**
 * A failed authentication is answered `floorMs` after it began, plus a random moment of up to
 * `jitterMs`. The work behind a wrong password and an unknown username differs by
 * microseconds (a row found or not, a cache entry kept or dropped), which 10,000 timed pairs can
 * tell apart, and a bare floor does not hide it (timers fire on the event loop's clock, which the
 * work itself moves); milliseconds of noise on top do. It costs only a guesser's time.
 */
export const FAILURE_DELAY: FailureDelay = { floorMs: 20, jitterMs: 5 };

/**
 * Resolves once `performance.now()` has reached `deadline`. A timer is armed against the event
 * loop's cached clock, which can lag the real one by the turn's work, so it may fire a little
 * early: it is armed again for what is left.
 */
async function sleepUntil(deadline: number): Promise<void> {
  for (let left = deadline - performance.now(); left > 0; left = deadline - performance.now()) {
    await new Promise((resolve) => setTimeout(resolve, Math.ceil(left)));
  }
}

export type CredentialLookup = (username: string, budget?: DatabaseBudget) => Promise<CharityCredential | undefined>;

/** Where credentials come from: recently seen ones (in memory, or nothing), and the database itself. */
export interface Credentials {
  recent(username: string): CharityCredential | undefined;
  fresh: CredentialLookup;
  /** The credential an Authorization header matched, while recent() still gives that very credential; else undefined. */
  matchedBy(authorization: string): CharityCredential | undefined;
  /** Notes that `authorization` matched `found`, the credential recent(username) gave. */
  matched(authorization: string, username: string, found: CharityCredential): void;
}

/** Waits for an answer to be sent; true, for "the hook has answered". */
const answered = async (sending: Promise<unknown>): Promise<true> => (await sending, true);

/**
 * An onRequest hook that sets `request.charity`, or answers 401; or 429 for a client address that
 * has failed too often (an unknown username and a wrong password count, and look, the same). A
 * callback hook, not an async one: the common case (a remembered credential from an address the
 * throttle cannot block) is answered in the same call, with no promise per request.
 */
export function basicAuth(
  credentials: Credentials,
  throttle: Throttle,
  { onFailure = () => {}, failureDelay = FAILURE_DELAY, clock = monotonicClock }: { onFailure?: () => void; failureDelay?: FailureDelay; clock?: Clock } = {},
) {
  const { floorMs, jitterMs } = failureDelay;
  /** Lets the request go on as `charity`'s, from now (authenticatedStill reads when). */
  const admit = (request: FastifyRequest, charity: CharityCredential): void => {
    request.charity = charity;
    request.authenticatedAt = clock();
  };

  /** The rest of the hook: true when it has answered (401, 429), false when the request may proceed. */
  async function judge(request: FastifyRequest, reply: FastifyReply, given: ReturnType<typeof parseBasicAuthorization>, began: number): Promise<boolean> {
    const unasked = request.headers.authorization === undefined;
    const username = given?.username ?? '';
    // An address that has failed too often is refused unjudged, and costs no database look-up.
    const blocked = await throttle.authenticationBlocked(request.ip, username);
    if (blocked) return answered(tooManyRequests(request, reply, blocked, 'Too many failed authentication attempts.'));
    // A recently seen credential given right answers at once: it is no guess, and the check above was this turn's.
    const remembered = given && authenticatedCharity(credentials.recent(given.username), given.password);
    if (remembered) {
      admit(request, remembered);
      return false;
    }
    // Anything else is checked afresh. The verdict and its count in the same turn (nothing awaited in
    // between): a guess judged after the limit was reached is refused even when it is right, so
    // guesses sent together are answered 401 no more often than the limit, and learn nothing past it.
    const found = given ? await credentials.fresh(given.username, request.database) : undefined;
    const charity = given && authenticatedCharity(found, given.password);
    // A request with no Authorization header guesses nothing, and is not counted: clients that send the
    // credentials only once challenged (Python's urllib, PowerShell's -Credential, .NET's) send one before
    // every call, and were throttled after 10 calls a minute, right credentials and all (a review, 2026-11-30).
    const wait = charity || unasked ? await throttle.authenticationBlocked(request.ip, username) : await throttle.authenticationFailed(request.ip, username);
    if (wait) return answered(tooManyRequests(request, reply, wait, 'Too many failed authentication attempts.'));
    if (!charity) {
      // The charity whose username was given (its password wrong or out of date, or the charity disabled): by its id,
      // never the username as sent, which may be a password typed in the wrong box. So the operator can tell a
      // charity its integration still sends a rotated password; until 2026-11-30 only its address said so.
      if (found) request.charityTried = found.id;
      onFailure();
      await discardBody(request.raw, reply.raw);
      const answerAt = began + floorMs + (jitterMs > 0 ? randomInt(jitterMs * 1000) / 1000 : 0);
      await sleepUntil(answerAt);
      unauthorized(request, reply);
      return true;
    }
    admit(request, charity);
    return false;
  }

  return function authenticate(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    if (fromAnotherSite(request)) return refuseAnotherSite(request, reply); // before anything else: no challenge, nothing judged or counted; done() is not called
    const began = performance.now();
    const header = request.headers.authorization;
    // The throttle could only say 0 here, so a remembered credential given right is answered now:
    // by the header itself if it matched before, else by checking the password it holds.
    const unblockable = header !== undefined && !throttle.mayBlock(request.ip);
    const matched = unblockable && credentials.matchedBy(header);
    if (matched) {
      admit(request, matched);
      return done();
    }
    const given = parseBasicAuthorization(header);
    const remembered = unblockable && given ? credentials.recent(given.username) : undefined;
    const which = given && remembered?.active ? whichPassword(remembered, given.password) : undefined;
    if (given && remembered && which) {
      // Only the header in its plain form: base64 decodes whatever follows its padding to nothing, and
      // the scheme's name may be in any case, so a client could make any number of headers that match,
      // 16 KB each, and every one was remembered (a review, 2026-11-29). And only the charity's own
      // password: an old one (rotate --grace) is checked each time, so it stops at its grace's end.
      if (which === 'current' && header === plainAuthorization(given.username, given.password)) credentials.matched(header, given.username, remembered);
      admit(request, remembered);
      return done();
    }
    // A hook that has answered (401, 429) must not go on: done() only when the request may proceed.
    // (reply.sent would not do: the answer is still in the onSend hooks when send() returns.)
    judge(request, reply, given, began).then(
      (hasAnswered) => (hasAnswered ? undefined : done()),
      (err: Error) => done(err),
    );
  };
}

/**
 * Whether a browser sent this request for a page of another site (its own `Sec-Fetch-Site`, which
 * no page can set: `cross-site`, or `same-site` for another host of the same domain). No such page
 * can call this API as it should, with the credentials in its script: the API answers no CORS
 * preflight. What one can do is post a form here: a browser then adds the Basic credentials it
 * holds for this server, asking for them with its own login dialog on the 401's challenge, and
 * sends them again, unasked, with every later form from any site. In headless Chromium a form on
 * another site's page recorded a donation (Gift Aid and all) as the charity, the second time
 * without a 401 (a security review, 2026-11-30). Clients that are not browsers send no
 * Sec-Fetch-Site; the /docs page's requests are `same-origin`, and a URL typed in is `none`.
 *
 * A browser sends Sec-Fetch-Site only to a potentially trustworthy origin: to http://almoner.lan:3000
 * (HOST=0.0.0.0, no TLS in front) Chromium sends none, and a form from another site recorded a
 * donation again (a review, 2026-11-30); Safari before 16.4 and Firefox before 90 send none at all.
 * A browser's POST names its page's origin in `Origin` whatever the scheme, so without Sec-Fetch-Site
 * an Origin whose host is not the one the request was sent to (`request.host`: the Host header, or a
 * trusted proxy's X-Forwarded-Host) is another site's page too, as is an opaque one (`null`: a
 * sandboxed frame, a data: URL), as is an Origin of another port where Host names one (a page
 * of another service on the same host: accepted until 2026-12-01). Where Host names no port (a proxy
 * may leave it out), any port is taken for this server's.
 */
export function fromAnotherSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined) return site === 'cross-site' || site === 'same-site';
  const origin = request.headers.origin;
  return origin !== undefined && !sameHostName(origin, request.host);
}

/** Whether an Origin header names the host `host` (a Host header's value), and its port where `host` names one (its scheme's own where the Origin names none). */
function sameHostName(origin: string, host: string | undefined): boolean {
  try {
    const page = new URL(origin);
    if (host === undefined || host === '' || page.hostname === '' || page.hostname !== new URL(`${page.protocol}//${host}`).hostname) return false;
    const port = /:(\d+)$/.exec(host)?.[1]; // `[::1]` names none; `[::1]:3000` names 3000
    return port === undefined || Number(port) === Number(page.port || (page.protocol === 'https:' ? 443 : 80));
  } catch {
    return false; // `null`, or no URL at all
  }
}

export const ANOTHER_SITE_MESSAGE =
  "A browser sent this request for another site's page (its Sec-Fetch-Site or Origin), which may not use this API: a charity's credentials belong on its own server, which calls the API itself.";

/** A 403 for a request fromAnotherSite, its body read and thrown away first so the answer arrives (as the 404's). */
function refuseAnotherSite(request: FastifyRequest, reply: FastifyReply): void {
  void discardBody(request.raw, reply.raw).then(() => reply.code(403).send({ message: ANOTHER_SITE_MESSAGE }));
}

/** A 401: a page's script that says so (as the /docs page does) gets a challenge no browser acts on. */
function unauthorized(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('WWW-Authenticate', fromScript(request) ? SCRIPT_WWW_AUTHENTICATE : WWW_AUTHENTICATE);
  return reply.code(401).send({ message: 'Unauthorized' });
}

/**
 * A preHandler hook for a route that stores: a request authenticated more than `maxAgeMs` before its
 * body had arrived (sent slowly, up to the 30 s a request may take) has its credential judged again,
 * as a new request's would be, and is answered 401 if a disable or a rotate has stopped it since.
 * Until 2026-11-29 a create begun before `charity disable` was stored 21 s after it (a review). Not
 * counted against the client by the throttle: the credential was right when given (the metric of failed authentications counts it). A request judged within
 * `maxAgeMs` goes on at once (the remembered credential is that old at most in any case).
 */
export function authenticatedStill(
  credentials: Credentials,
  { maxAgeMs, clock = monotonicClock, onFailure = () => {} }: { maxAgeMs: number; clock?: Clock; onFailure?: () => void },
) {
  async function judgeAgain(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const given = parseBasicAuthorization(request.headers.authorization);
    if (given) {
      const found = credentials.recent(given.username) ?? (await credentials.fresh(given.username, request.database));
      if (authenticatedCharity(found, given.password)?.id === request.charity.id) return false;
    }
    onFailure(); // a 401 for credentials that no longer work, as the metric counts every such 401
    unauthorized(request, reply);
    return true;
  }
  return function recheck(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    if (clock() - request.authenticatedAt <= maxAgeMs) return done();
    judgeAgain(request, reply).then(
      (hasAnswered) => (hasAnswered ? undefined : done()),
      (err: Error) => done(err),
    );
  };
}
