// One error shape for every failure: a JSON object with a `message`, 4xx messages passed through,
// a database outage a 503 to retry, any other fault a plain 500 (logged with the request, never shown).
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { loggable } from '../loggable.js';
import { isDatabaseUnavailable } from '../store/unavailable.js';
import { discardBody, TOO_LARGE_MESSAGE } from './body.js';
import { monotonicClock, type Clock } from '../time.js';
import { groupThousands } from '../numbers.js';

/** An error whose message is meant for the client. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

export const UNSUPPORTED_MEDIA_TYPE = 'Unsupported media type: send the body as application/json or application/x-www-form-urlencoded.';

/** A route that reads no body (/me) refuses only a Content-Type that is no media type: it said to send JSON or a form, which it ignores (an integrator's review). */
export const NOT_A_MEDIA_TYPE = 'Unsupported media type: the Content-Type header is not a media type (type/subtype, such as application/json); this request reads no body, so send any valid one, or none.';

// Fastify's own client errors, reworded to say what to do about them.
const FASTIFY_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: UNSUPPORTED_MEDIA_TYPE,
  // Read when asked: body.ts, which defines it, imports this module, and may not have run yet when this one does.
  get FST_ERR_CTP_BODY_TOO_LARGE() {
    return TOO_LARGE_MESSAGE;
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'The request body does not match its Content-Length header.',
};

/**
 * How often a 503's "database unavailable" is logged in full, its error and stack, for each kind of
 * error (its code): the others of that kind in between are counted, and a line says how many
 * (`alike_since`) once the interval is over. Each 503 is still in its access line. A create of
 * unknown outcome (ALMONER_COMMIT_UNKNOWN) is logged every time, with its request's id: the line an
 * operator needs to settle whether it was stored. Logged every time, an outage's 503s (9,272 in
 * 10 s) wrote 1.3 MB of the log a second, 4.6 GB an hour, on the disk a full log would stop (a faults review).
 */
export const UNAVAILABLE_LOGGED_EVERY_MS = 1000;

/** A 503's messages: nothing stored, or a create that may have been (its commit sent and never answered), with a key or without. */
export const UNAVAILABLE_MESSAGES = {
  unavailable: 'The database is unavailable. Please try again shortly.',
  outcomeUnknownKeyed:
    'The database did not confirm whether this donation was stored. Send it again with the same Idempotency-Key shortly: if it was stored, the answer is that donation; if not, it is stored then.',
  outcomeUnknown:
    'The database did not confirm whether this donation was stored, and it may have been: sent again, it may be recorded twice. Check whether it was recorded before sending it again; a create sent with an Idempotency-Key can be sent again safely.',
} as const;

type Warns = { warn(fields: object, message: string): void };

/**
 * Each kind of 503 (its error's code, or for an error without one, its message) logged on its
 * request's log once every `everyMs` at most; the rest counted, and said on `summary` (the app's
 * log) when the interval ends, before the next interval's first line, or at close().
 */
export function unavailableLog(summary: Warns, everyMs: number, clock: Clock = monotonicClock) {
  const kinds = new Map<string, { until: number; alike: number; timer?: NodeJS.Timeout }>();
  const say = (kind: string) => {
    const interval = kinds.get(kind);
    if (interval === undefined) return;
    kinds.delete(kind);
    clearTimeout(interval.timer);
    if (interval.alike > 0) summary.warn({ kind, alike_since: interval.alike }, 'database unavailable: more of the same since the last line');
  };
  const log = (err: unknown, requestLog: Warns): void => {
    const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
    const kind = typeof code === 'string' ? code : String(message).slice(0, 100);
    const now = clock();
    const interval = kinds.get(kind);
    if (kind !== 'ALMONER_COMMIT_UNKNOWN' && interval !== undefined && now < interval.until) {
      // The first skipped: the count is said when the interval ends, whether or not another comes.
      if (interval.alike++ === 0) interval.timer = setTimeout(() => say(kind), Math.max(0, interval.until - now)).unref();
      return;
    }
    say(kind); // the interval before, over
    requestLog.warn({ err: loggable(err) }, 'database unavailable');
    if (kind === 'ALMONER_COMMIT_UNKNOWN') return;
    // Kinds whose interval ended with nothing to say are dropped once there are many (messages vary more than codes).
    if (kinds.size >= 64) for (const [k, i] of kinds) if (i.alike === 0 && now >= i.until) kinds.delete(k);
    kinds.set(kind, { until: now + everyMs, alike: 0 });
  };
  /** Says every count still to say: before the server stops. */
  const close = () => {
    for (const kind of [...kinds.keys()]) say(kind);
  };
  return Object.assign(log, { close });
}

/**
 * The error handler; returns the plugin that answers a request with no route (404, 405), to be
 * registered after the hooks every answer meets, which it then meets too.
 */
export function registerErrorHandling(
  app: FastifyInstance,
  { clock = monotonicClock, onOutcomeUnknown = () => {} }: { clock?: Clock; onOutcomeUnknown?: () => void } = {},
) {
  const unavailable = unavailableLog(app.log, UNAVAILABLE_LOGGED_EVERY_MS, clock);
  app.addHook('onClose', (_instance, done) => {
    unavailable.close();
    done();
  });
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // Node's error for a request whose client went before its body was all in: ECONNRESET, as a
    // database's lost connection is, but nobody to answer and nothing wrong here. It was logged as
    // "database unavailable" (until 2026-11-28), a false alarm for whoever alerts on that line.
    if (err.code === 'ECONNRESET' && err.message === 'aborted' && request.raw.readableAborted) {
      request.log.info('the client closed the connection before its request body was all sent');
      return reply.code(400).send({ message: 'The connection was closed before the request body was all sent.' });
    }
    if (isDatabaseUnavailable(err)) {
      unavailable(err, request.log);
      // A create whose commit was sent and never answered may be stored: said so, not "try again", which
      // an integration without a key did, storing it twice (a faults review: with PostgreSQL stalled
      // 6 s under load, 10 of 16 and then 16 of 16 such 503s had been stored).
      const outcomeUnknown = err.code === 'ALMONER_COMMIT_UNKNOWN';
      if (outcomeUnknown) onOutcomeUnknown();
      const keyed = request.headers['idempotency-key'] !== undefined;
      return reply
        .code(503)
        .header('Retry-After', '1')
        .send({ message: outcomeUnknown ? (keyed ? UNAVAILABLE_MESSAGES.outcomeUnknownKeyed : UNAVAILABLE_MESSAGES.outcomeUnknown) : UNAVAILABLE_MESSAGES.unavailable });
    }
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500) {
      request.log.error({ err: loggable(err) }, 'request failed');
      return reply.code(500).send({ message: 'Internal Server Error' });
    }
    const readsNoBody = err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' && request.routeOptions.config.readsNoBody === true;
    const message = readsNoBody ? NOT_A_MEDIA_TYPE : (err.code && FASTIFY_MESSAGES[err.code]) || err.message || 'Bad Request';
    return reply.code(status).send({ message });
  });

  // Known paths answer a wrong method with 405 and the methods they do take.
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const methods = methodsByPath.get(route.url) ?? new Set<string>();
    for (const m of [route.method].flat()) methods.add(m);
    methodsByPath.set(route.url, methods);
  });

  const answerNoRoute = (request: FastifyRequest, reply: FastifyReply) => {
    // One trailing slash is the route itself (ignoreTrailingSlash); `/me//` is no route at all.
    const path = (request.url.split('?')[0] ?? '/').replace(/(.)\/$/, '$1');
    const allowed = methodsByPath.get(path);
    if (allowed && !allowed.has(request.method)) {
      return reply
        .code(405)
        .header('Allow', [...allowed].sort().join(', '))
        .send({ message: `The ${request.method} method is not supported for this route. Supported methods: ${[...allowed].sort().join(', ')}.` });
    }
    const meant = meantPath(path);
    return reply.code(404).send({ message: meant ? `Not Found. Did you mean ${meant}? Paths are written exactly so: in lower case, with one / between their parts.` : 'Not Found' });
  };
  /**
   * The route a mistyped path surely meant: one with a doubled slash (a base URL ending in / joined to
   * a path beginning with one, as Zapier's and Make's users join them), in capitals, or without the
   * base's /api/v1. "Not Found" alone left such a user nothing to go on (a review, 2026-11-30).
   */
  const meantPath = (path: string): string | undefined => {
    const tidied = path.replace(/\/{2,}/g, '/').toLowerCase().replace(/(.)\/$/, '$1');
    for (const candidate of [tidied, `/api/v1${tidied}`]) if (candidate !== path && methodsByPath.has(candidate)) return candidate;
    return undefined;
  };
  // No route: 404 or 405 before the body is read, so a body's faults (400, 413, 415) never come first.
  // The hook is the not-found handler's own (hooks added in a plugin belong to the handler set there),
  // so a request that has a route does not meet it.
  return async function noRoute(instance: FastifyInstance): Promise<void> {
    instance.addHook('onRequest', (request, reply, done) => {
      void discardBody(request.raw, reply.raw).then(() => answerNoRoute(request, reply)); // answered here: done() is not called
    });
    instance.setNotFoundHandler(answerNoRoute);
  };
}

/**
 * The headers every answer carries (app.ts's onSend sets them), names in lower case as Fastify keeps
 * them: a name with capitals is a new string on every call. The docs page's assets set their own
 * Cache-Control. Answers written straight to a socket carry the same (rawAnswer).
 */
export function setAnswerHeaders(reply: FastifyReply, requestId: string): void {
  reply.header('x-request-id', requestId);
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  reply.header('x-content-type-options', 'nosniff');
}

/**
 * What Fastify refuses before routing (a path whose percent-escapes do not decode, `/me%zz`): the
 * same JSON shape and headers as every other answer, where Fastify's own has its code and no headers.
 */
export function answerFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  setAnswerHeaders(reply, request.id); // such an answer meets none of the app's hooks (the access line is not written)
  if (err.code === 'FST_ERR_BAD_URL') {
    void reply.code(400).send({ message: 'The request path is not valid: each % in it must begin a percent-escape of UTF-8 (send % as %25).' });
    return;
  }
  const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
  void reply.code(status).send({ message: STATUS_CODES[status] ?? 'Error' });
}

/**
 * Requests Node's HTTP parser rejects before Fastify sees them (bad bytes in a header, a header
 * block over 16 KiB, a request that took too long) get the same JSON shape and headers as the rest.
 * A TLS connection whose handshake failed or timed out is closed at once: an answer in plain HTTP
 * could never be sent on it, and the connection would stay open for good, waiting to send it.
 */
export function answerUnparsableRequest(err: Error & { code?: string; library?: string }, socket: Socket): void {
  const tlsFailed = err.code?.startsWith('ERR_TLS_') || err.code?.startsWith('ERR_SSL_') || err.library !== undefined;
  if (err.code === 'ECONNRESET' || !socket.writable || tlsFailed) {
    socket.destroy();
    return;
  }
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'The request headers are too large.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'The request took too long to arrive.']
        : [400, 'The request is not valid HTTP.'];
  if (AFTER_ANSWERS.has(socket)) return; // Node reports each further chunk again: answered once, after the answers
  AFTER_ANSWERS.add(socket);
  afterAnswers(socket as Answering, () => answerRaw(socket, status, message));
}

type Answering = Socket & { _httpMessage?: ServerResponse | null };

/** Sockets whose error answer waits for the answers of the requests before it. */
const AFTER_ANSWERS = new WeakSet<Socket>();

/**
 * Bytes after requests still being answered (a body longer than its Content-Length, then junk):
 * those requests' answers go first, one after another as Node hands the socket to each (pipelined,
 * the next is the socket's once the one before has finished). Written at once, the 400 took their
 * place, and a create that was stored was told 400, which a client without a key sends again. Only
 * a request that arrived whole is waited for: one whose body stalled (a 408) is never answered.
 */
function afterAnswers(socket: Answering, then: () => void): void {
  const answering = socket._httpMessage;
  if (!answering || answering.writableFinished || !answering.req?.complete) return then();
  answering.once('finish', () => setImmediate(() => afterAnswers(socket, then)));
  answering.once('close', () => answering.writableFinished || socket.destroy());
}

/**
 * CONNECT, a proxy's method, which Node hands to no route (the connection was closed unanswered):
 * answered after the requests before it on the connection, as bytes that are not HTTP are (written
 * at once, it took the place of a create's answer, and the create was stored unanswered).
 */
export function answerConnect(_request: unknown, socket: Socket): void {
  socket.on('error', () => {});
  afterAnswers(socket as Answering, () => answerRaw(socket, 400, 'The CONNECT method is not supported: this server is not a proxy.'));
}

/**
 * The request's header lines, before anything else about it is looked at: more than Node keeps is a
 * 431; an HTTP/1.1 request without a Host header, which HTTP/1.1 requires (RFC 9112, 3.2), or with
 * two of a header it may have only one of, a 400, in the app's shape (Node's own Host check,
 * switched off in app.ts, answered a bare 400 with no body and none of the app's headers).
 */
export function checkHeaders(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const raw = request.raw;
  // Node keeps the first MAX_HEADER_LINES lines in `headers` and drops the rest unsaid: an
  // Idempotency-Key past them read as none, and a retry stored the donation twice (a faults review),
  // as an Authorization or a Content-Type past them would be misread. No client sends that many.
  if (raw.rawHeaders.length > 2 * MAX_HEADER_LINES) {
    void reply.code(431).header('connection', 'close').send({ message: TOO_MANY_HEADER_LINES });
    return;
  }
  if (raw.headers.host === undefined && raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1) {
    void reply.code(400).send({ message: 'The request has no Host header, which HTTP/1.1 requires.' });
    return;
  }
  // Node keeps the first of each and drops the rest, where a proxy in front may read another (RFC 9112,
  // 3.2: more than one Host is a 400). Until 2026-11-29 the first was taken (a review).
  for (const [name, lowerCase] of ONE_ONLY) {
    if (headerCount(raw.rawHeaders, lowerCase) > 1) {
      void reply.code(400).send({ message: `The request has more than one ${name} header: send one.` });
      return;
    }
  }
  done();
}

/** The header lines Node keeps in a request's `headers` (its maxHeadersCount of 2,000 fields, halved: a line is a name and a value). */
export const MAX_HEADER_LINES = 1000;
/** "1,000", without toLocaleString: see numbers.ts. */
export const MAX_HEADER_LINES_TEXT = groupThousands(String(MAX_HEADER_LINES));
export const TOO_MANY_HEADER_LINES = `The request has more than ${MAX_HEADER_LINES_TEXT} header lines.`;

/**
 * Headers a request may have only one of (Idempotency-Key too: idempotencyKeyOf). Content-Type: Node
 * keeps the first, a proxy may read the last, and the body would be read as one type and checked
 * as another (taken, the first winning, until 2026-11-30; a security review).
 */
const ONE_ONLY = [
  ['Host', 'host'],
  ['Authorization', 'authorization'],
  ['Content-Type', 'content-type'],
] as const;

/**
 * How many headers named `name` (in lower case) the request has, in any case. From the raw
 * headers, not Node's headersDistinct, which makes an array of every header's values when first
 * read (1.2 µs of a keyed create, and garbage to collect).
 */
export function headerCount(rawHeaders: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = rawHeaders[i]!;
    if (header.length === name.length && header.toLowerCase() === name) n++;
  }
  return n;
}

/**
 * An `Expect` other than `100-continue`, which Node answers before any route with a bare 417 and
 * no body: answered in the app's JSON shape instead, and the connection closed, as the request's
 * body (if any) is not read.
 */
export function answerExpectation(_request: IncomingMessage, response: ServerResponse): void {
  const body = JSON.stringify({ message: 'Only "Expect: 100-continue" is supported: send the request without this Expect header.' });
  response.writeHead(417, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    connection: 'close',
  });
  response.end(body);
}

/**
 * Plain HTTP sent to the HTTPS port (a URL typed with http://): answered in plain HTTP, saying so,
 * on the TCP connection under the TLS socket (its `_parent`, Node's own name, as in connections.ts).
 * Any other failed handshake is closed at once, as Node does. Until 2026-11-29 plain HTTP got no
 * answer at all, an "empty reply" with nothing to say why (a review).
 */
export function answerPlainHttp(err: Error & { code?: string }, tlsSocket: Socket): void {
  const tcp = (tlsSocket as Socket & { _parent?: Socket })._parent;
  if (err.code !== 'ERR_SSL_HTTP_REQUEST' || !tcp?.writable) return void tlsSocket.destroy();
  tcp.on('error', () => {});
  answerRaw(tcp, 400, 'This server takes HTTPS only: send the request to https:// rather than http://.');
}

/**
 * An answer written straight to the socket, in the app's JSON shape and headers, and the connection
 * closed once it is sent: ended only, a CONNECT's socket (which Node no longer watches) stayed
 * half-open for as long as the client kept its side, holding one of its address's slots.
 */
function answerRaw(socket: Socket, status: number, message: string): void {
  socket.end(rawAnswer(status, message), () => socket.destroy());
}

/** An answer as it goes on the wire, for a socket no request is read from: the app's JSON shape and headers (but a request id), and `extraHeaders` (`Name: value\r\n` each). */
export function rawAnswer(status: number, message: string, extraHeaders = ''): string {
  const body = JSON.stringify({ message });
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}` +
    'Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n' +
    body
  );
}
