// Limits on connections, so that slow or idle clients cannot exhaust the server: how long a request
// may take to arrive, how long an idle connection is kept, and how many connections one client
// address may hold open at once.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';
import { DEFAULT_CONNECTIONS_PER_ADDRESS } from '../config.js';
import { addressKey } from './client-address.js';
import { rawAnswer } from './errors.js';

export interface ConnectionLimits {
  /** All of a request's headers must arrive within this (Node's headersTimeout). */
  headersMs: number;
  /** The whole request, body included, must arrive within this; then 408 and the connection is closed (requestTimeout). */
  requestMs: number;
  /** An idle keep-alive connection is closed after this (keepAliveTimeout). */
  keepAliveMs: number;
  /**
   * A connection whose answers waiting to go out have not moved for this long is closed: a client
   * that stops reading them (pipelined requests for /docs' script, never read) held its connection
   * until the server stopped (a review, 2026-11-30); the deadlines above cover a request arriving,
   * and keep-alive only an answer that has gone out (trackConnections looks, every quarter of it).
   */
  stalledMs: number;
  /** How often Node looks for requests past those deadlines (connectionsCheckingInterval). */
  checkEveryMs: number;
  /** Open connections one client address may hold; 0 for no limit. Connections from trusted proxies are not counted. */
  perAddress: number;
}

export const CONNECTION_LIMITS: ConnectionLimits = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 72_000,
  stalledMs: 80_000,
  checkEveryMs: 1000,
  perAddress: DEFAULT_CONNECTIONS_PER_ADDRESS,
};

/**
 * Fastify's options for a server of Almoner's other than the API's (METRICS_PORT's, in one process or
 * under WORKERS' primary): the API's deadlines, so a client that never sends its request or stops
 * reading does not hold a connection for good (it had none of them until 2026-11-30: a review).
 */
export function deadlinesOf(limits: ConnectionLimits = CONNECTION_LIMITS) {
  return {
    connectionTimeout: limits.stalledMs, // no request path to keep fast here: the socket's own idle timeout does
    keepAliveTimeout: limits.keepAliveMs,
    requestTimeout: limits.requestMs,
    http: { headersTimeout: limits.headersMs, requestTimeout: limits.requestMs, connectionsCheckingInterval: limits.checkEveryMs },
  };
}

/**
 * Refuses a connection from an address that already holds `max` open ones: an HTTP client gets a
 * 429 with a JSON message before the connection is closed; over TLS it is closed at once (no
 * handshake is spent on it). Addresses `trustProxy` trusts are never counted: a proxy's connections
 * carry many clients, and the proxy's own limits apply to them.
 */
export function limitConnectionsPerAddress(server: Server, max: number, trustProxy: boolean | string, tls: boolean): void {
  if (max <= 0 || trustProxy === true) return;
  const trusted = trustProxy === false ? () => false : proxyAddr.compile(trustProxy.split(',').map((s) => s.trim()));
  const open = new Map<string, number>();
  server.prependListener('connection', (socket: Socket) => {
    const remote = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (trusted(remote, 0)) return;
    const address = addressKey(remote); // an IPv6 client by its /64
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.on('error', () => {});
      if (tls) return void socket.destroy();
      return void socket.end(TOO_MANY_CONNECTIONS, () => socket.destroy());
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/** The latest request and response on a connection (responses go out in order: when it is finished, all are). */
const LATEST = Symbol('latest');
/** The requests on a connection not yet answered (see MAX_WAITING_PER_CONNECTION). */
const IN_FLIGHT = Symbol('in flight');
/** Whether trackConnections stopped reading the connection (MAX_WAITING_PER_CONNECTION), not Node. */
const HELD = Symbol('held');
type Connection = Socket & {
  [LATEST]?: { req: Pipelined; res: ServerResponse };
  [IN_FLIGHT]?: number;
  [HELD]?: boolean;
  _parent?: Socket;
  /** Node's own: set while the HTTP server keeps the connection paused for answers not yet sent. */
  _paused?: boolean;
};

/**
 * Reads the connection no further until letGo. A pause() alone is undone by Node at once: it
 * resumes the connection as a request's body is read, and as a queued answer is written (its
 * "drain" of the answers not yet sent), so while these are held it resumes nothing.
 */
function hold(socket: Connection): void {
  socket[HELD] = true;
  if (!Object.hasOwn(socket, 'resume')) {
    const resume = socket.resume;
    socket.resume = function (this: Connection) {
      return this[HELD] ? this : resume.call(this);
    };
  }
  socket.pause();
}

/** Reads the connection again, unless Node itself holds it for answers not yet sent (it resumes it once they drain). */
function letGo(socket: Connection): void {
  socket[HELD] = false;
  if (!socket._paused && !socket.destroyed) socket.resume();
}

/** A pipelined request's predecessor on its connection, not yet answered when it arrived. */
const BEFORE = Symbol('before');
type Pipelined = IncomingMessage & { [BEFORE]?: ServerResponse };

/** The creates waiting their turn on a connection (inTurn), each woken when it closes. */
const WAITING = Symbol('waiting');
type Waiting = Socket & { [WAITING]?: Set<() => void> };

/**
 * Requests that may be in flight (unanswered) on one connection before it is read no further.
 * Waiting, they write nothing, so Node's own backpressure (on answers not yet sent) never stopped
 * the reading: a client with the create limit off held 20,000 creates on one connection, 119 MB of
 * heap (a review, 2026-11-28); bounded then for creates alone, and 118,000 GET /health/ready
 * pipelined to a PostgreSQL server still held 1.1 GB, queued ahead of every other request's
 * database work, as did GET /metrics under WORKERS in the primary (a review, 2026-11-29).
 */
export const MAX_WAITING_PER_CONNECTION = 64;

/**
 * Waits until the requests before this one on its connection (pipelined) are answered, and says
 * whether this one's answer can still be sent. Node hands a client's pipelined requests to their
 * handlers at once, but sends their answers in order: when one answer closes the connection (a 400
 * for a bad body, any answer during a shutdown), those after it are never sent, and a create among
 * them was stored all the same, which a client without a key sends again. A create does its work
 * only in its turn, and none when its answer could not go out (trackConnections keeps the order).
 */
export function inTurn(req: IncomingMessage): boolean | Promise<boolean> {
  const before = (req as Pipelined)[BEFORE];
  const socket = req.socket as Waiting;
  // Node ends the socket as the answer before that closes it finishes (destroySoon), or it is gone, or
  // a write failed (the client reset it): Node says so to the answer before, then destroys the socket.
  const open = () => !socket.destroyed && !socket.writableEnded && !socket.errored;
  // Synchronous when nothing is before it, as for every request but a pipelined one: no promise on the hot path.
  if (!before || before.writableFinished || before.destroyed || !open()) return open();
  // Until the answer before it is sent, or it or the connection is gone (an answer that never gets the
  // connection, behind one that closed it, is never finished: a wait on it alone never ended).
  return new Promise<boolean>((resolve) => {
    const waiting = waitersOf(socket);
    const done = () => {
      before.off('finish', done);
      before.off('close', done);
      waiting.delete(done);
      resolve(open());
    };
    before.once('finish', done);
    before.once('close', done);
    waiting.add(done);
    // How many may wait on a connection is trackConnections' bound on the requests in flight there.
  });
}

/** The creates waiting on `socket`: one listener wakes them all when it closes (one each piled up, a warning past ten). */
function waitersOf(socket: Waiting): Set<() => void> {
  let waiting = socket[WAITING];
  if (!waiting) {
    const all = (waiting = socket[WAITING] = new Set());
    socket.once('close', () => {
      for (const wake of [...all]) wake();
    });
  }
  return waiting;
}

/** How long a connection with no request in flight may go without sending a byte while the server shuts down. */
export const QUIET_BEFORE_CLOSE_MS = 1000;
/** How long after a shutdown begins a request may still be arriving (a byte now and then held it up for the shutdown's whole 10 s). */
export const ARRIVAL_BEFORE_CLOSE_MS = 2000;
/** How long after a shutdown begins answers may still be going out to a client that reads them, so that it ends within its 10 s, exit 0. */
export const SENDING_BEFORE_CLOSE_MS = 8000;

/**
 * The bytes of its answers a connection's kernel has taken so far. socket.bytesWritten counts an
 * answer whole as soon as it is handed to the socket: the 1.7 MB of /docs/swagger-ui-bundle.js
 * at once, though the kernel takes a few hundred kB of it at a time, as the client reads. What it
 * has not taken yet is libuv's write queue (over TLS, that of the TCP connection under it), as
 * Node's own socket timeout reckons (net.js, _onTimeout).
 */
function taken(socket: Connection): number {
  const handle = (socket._parent ?? socket) as Socket & { _handle?: { writeQueueSize?: number } | null };
  return socket.bytesWritten - (handle._handle?.writeQueueSize ?? 0);
}

/**
 * The server's open connections, so that a shutdown can close those with no request in flight
 * once they have sent nothing for QUIET_BEFORE_CLOSE_MS: Node's closeIdleConnections leaves open
 * one that has sent nothing, or part of a request's headers, or over TLS not finished its
 * handshake, and close() stops the deadline checks that would end it; the shutdown's own 10 s then
 * ran out first, and it exited 1. A request whose headers are still arriving is given that second
 * (each byte starts it again), so it is served, not cut off. So is one whose body is still arriving:
 * one whose body stopped short held the shutdown up the same way (until 2026-11-28). But none is
 * given more than ARRIVAL_BEFORE_CLOSE_MS from the shutdown's start: a byte every half second held
 * it for its whole 10 s. A request whose body is all in (its handler at work) is never closed here,
 * unless its client has stopped reading its answers for a second, past ARRIVAL_BEFORE_CLOSE_MS.
 */
export function trackConnections(server: Server, tls: boolean, { stalledMs = CONNECTION_LIMITS.stalledMs }: { stalledMs?: number } = {}): { closeUnanswered(now?: number): void } {
  const open = new Set<Connection>();
  /** Over TLS: the TCP connections under them, some still in their handshake. */
  const underlying = new Set<Socket>();
  const track = (set: Set<Socket>) => (socket: Socket) => {
    set.add(socket);
    socket.once('close', () => set.delete(socket));
  };
  server.on(tls ? 'secureConnection' : 'connection', track(open));
  if (tls) server.on('connection', track(underlying));
  // Every request on a connection, the ones Node hands to an Expect's listener too (errors.ts answers those): each is before the next.
  const note = (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as Connection;
    // A pipelined request's predecessor, if not answered yet: it is in flight, whatever comes after it
    // (responses finish in order, so the one before is enough).
    const previous = socket[LATEST]?.res;
    if (previous !== undefined && !previous.writableFinished) (req as Pipelined)[BEFORE] = previous;
    socket[LATEST] = { req, res };
    // Pipelined requests are read, and handed to their handlers, as fast as they arrive: past
    // MAX_WAITING_PER_CONNECTION unanswered, the connection is read no further until half are
    // answered. The requests before this one arrived whole, so none of them waits for bytes this
    // stops; this one's body, if still to come, follows once they are answered.
    const inFlight = (socket[IN_FLIGHT] ?? 0) + 1;
    socket[IN_FLIGHT] = inFlight;
    if (inFlight >= MAX_WAITING_PER_CONNECTION && !socket[HELD]) hold(socket);
    res.once('close', () => {
      const left = (socket[IN_FLIGHT] = socket[IN_FLIGHT]! - 1);
      if (left <= MAX_WAITING_PER_CONNECTION / 2 && socket[HELD]) letGo(socket);
    });
  };
  // Before Fastify's own listener: a request's predecessor is known before its handler starts.
  server.prependListener('request', note);
  server.on('checkExpectation', note);
  /** Each connection's bytes read when last looked at, and since when it has read no more. */
  const progress = new WeakMap<Socket, { bytesRead: number; since: number }>();
  const quiet = (socket: Socket, now: number): boolean => {
    const seen = progress.get(socket);
    if (seen === undefined || seen.bytesRead !== socket.bytesRead) {
      progress.set(socket, { bytesRead: socket.bytesRead, since: now });
      return false;
    }
    return now - seen.since >= QUIET_BEFORE_CLOSE_MS;
  };
  /** Each connection's bytes taken by the kernel when last looked at, and since when its answers have not moved. */
  const sending = new WeakMap<Socket, { taken: number; since: number }>();
  /** Answers waiting to go out that the client has not taken for QUIET_BEFORE_CLOSE_MS: it does not read. */
  const unread = (socket: Connection, now: number): boolean => {
    if (socket.writableLength === 0) return false;
    const seen = sending.get(socket);
    const sent = taken(socket);
    if (seen === undefined || seen.taken !== sent) {
      sending.set(socket, { taken: sent, since: now });
      return false;
    }
    return now - seen.since >= QUIET_BEFORE_CLOSE_MS;
  };
  // A client that stops reading its answers: once nothing of them has gone out for stalledMs, its connection is closed. Looked
  // at a few times a stalledMs by one timer over the open connections, so a request pays nothing for it (the socket's own idle
  // timeout, tried first, is re-armed at every request: /me 8 to 17% slower in a review's A/B).
  const stalls = new WeakMap<Socket, { taken: number; since: number }>();
  const sweep = setInterval(() => {
    const now = performance.now();
    for (const socket of open) {
      if (socket.writableLength === 0) continue;
      const seen = stalls.get(socket);
      const sent = taken(socket);
      if (seen === undefined || seen.taken !== sent) stalls.set(socket, { taken: sent, since: now });
      else if (now - seen.since >= stalledMs) socket.destroy();
    }
  }, Math.max(10, Math.min(stalledMs / 4, 5000)));
  sweep.unref();
  server.once('close', () => clearInterval(sweep));
  /** Whether a connection's answers are not all out yet (one still being made, or sent: answers finish in order, so the latest is enough). */
  const answering = (socket: Connection): boolean => socket.writableLength > 0 || (socket[LATEST] !== undefined && !socket[LATEST].res.writableFinished);
  // Node's closeIdleConnections (server.close() calls it, and the shutdown's reaper) closes each
  // connection between requests whose answer has been ended, sent or not (its `finished`): a client
  // reading /docs/swagger-ui-bundle.js got 135 kB of its 1.7 MB at a SIGTERM, then the end of the
  // connection, and pipelined answers were cut off the same way (a review, 2026-11-29). The same,
  // but a connection whose answers are still going out is left to closeUnanswered.
  server.closeIdleConnections = function closeIdleConnections(this: Server) {
    // Node's list of connections (made as the server starts listening), and those between requests.
    const key = Object.getOwnPropertySymbols(this).find((s) => s.description === 'http.server.connections');
    const list = key && (this as unknown as Record<symbol, { idle?(): { socket: Connection }[] } | undefined>)[key];
    // Another Node's, not known: none is closed here, and closeUnanswered closes them a second later.
    if (typeof list?.idle !== 'function') return;
    // Node's own test (the answer being written not yet ended) is within answering: every request is noted as the latest.
    for (const { socket } of list.idle()) if (!answering(socket)) socket.destroy();
  };
  let since: number | undefined; // the first look: the shutdown's start
  return {
    closeUnanswered(now = performance.now()) {
      since ??= now;
      const late = now - since >= ARRIVAL_BEFORE_CLOSE_MS;
      const last = now - since >= SENDING_BEFORE_CLOSE_MS;
      if (tls) {
        // A TLS connection's TCP connection is its _parent (Node's own name): without it, nothing is known to be idle there.
        const handshaken = new Set([...open].map((s) => s._parent));
        if (!handshaken.has(undefined)) for (const socket of underlying) if (!handshaken.has(socket) && (quiet(socket, now) || late)) socket.destroy();
      }
      for (const socket of open) {
        const latest = socket[LATEST];
        // Answered yet, or its body still to come? And no pipelined request before it still at work.
        const before = latest?.req[BEFORE];
        const inFlight = latest !== undefined && ((before !== undefined && !before.writableFinished) || (!latest.res.writableFinished && latest.req.complete));
        if (!inFlight && (quiet(socket, now) || late)) socket.destroy();
        // A client that does not read its answers holds the ones behind them in flight for ever: after
        // ARRIVAL_BEFORE_CLOSE_MS it is let go (the creates still waiting their turn are then not stored).
        // One that reads them is let go at SENDING_BEFORE_CLOSE_MS, so the shutdown still ends within its 10 s.
        else if (late && (unread(socket, now) || (last && socket.writableLength > 0))) socket.destroy();
      }
    },
  };
}

const TOO_MANY_CONNECTIONS = rawAnswer(429, 'Too many open connections from this address. Close some, or try again shortly.', 'Retry-After: 1\r\n');
