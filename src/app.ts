// buildApp assembles the HTTP service from its parts: the hooks every request meets, in the order it
// meets them, then the body's parsers and the routes, which bring their own hooks (authentication,
// the create limit) that run first, as the request arrives.
// No I/O happens here: the store arrives open, and listening is the caller's business.
import Fastify, { LogController, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Store } from './store/store.js';
import { DATABASE_BUDGET_MS, DatabaseBudget } from './store/budget.js';
import { authenticatedStill, basicAuth, type FailureDelay } from './http/auth.js';
import { cachedCredentials, CREDENTIAL_TTL_MS } from './http/credential-cache.js';
import { boundBody, DRAIN_LIMIT, holdContinue, registerBodyParsing } from './http/body.js';
import { answerConnect, answerExpectation, answerFrameworkError, answerPlainHttp, answerUnparsableRequest, checkHeaders, registerErrorHandling, setAnswerHeaders } from './http/errors.js';
import { createRateLimit, Throttle } from './http/throttle.js';
import type { Metrics } from './http/metrics.js';
import type { Clock } from './time.js';
import type { DonationRecord } from './donations/donation.js';
import { donationRoutes } from './http/routes/donations.js';
import { CONNECTION_LIMITS, limitConnectionsPerAddress, trackConnections, type ConnectionLimits } from './http/connections.js';
import { docsRoutes } from './http/routes/docs.js';
import { healthRoutes } from './http/routes/health.js';
import { meRoutes } from './http/routes/me.js';
import { lazyRequestLogger } from './http/request-log.js';
import { requestIdOf } from './http/request-id.js';
import { accessLog, clientShown } from './http/access-log.js';
import { eachTurn } from './turn.js';

export interface AppOptions {
  store: Store;
  /** Authentication and create limits; by default per process, 100 creates per second per charity. */
  throttle?: Throttle;
  /** Fastify/pino logger options; false (the default) for none. */
  logger?: boolean | { level: string; redact?: { paths: string[]; censor: string }; stream?: { write(line: string): void } };
  /** Whom to believe about the client's address: see Config.trustProxy. */
  trustProxy?: boolean | string;
  /** HTTPS: PEM certificate and key. */
  https?: { cert: Buffer; key: Buffer };
  /** Prometheus metrics; `serveMetrics` adds GET /metrics to this app (else serve them elsewhere). */
  metrics?: Metrics;
  serveMetrics?: boolean;
  /** GET /docs (Swagger UI) and GET /api/v1/openapi.json, on by default; the document's contact e-mail, if any. */
  docs?: boolean | { contactEmail?: string | undefined };
  /** Request and keep-alive timeouts and open connections per client address; CONNECTION_LIMITS by default. */
  connections?: Partial<ConnectionLimits>;
  /** How long one request may wait for the database in all; DATABASE_BUDGET_MS by default. */
  databaseBudgetMs?: number;
  /** How long a failed authentication is held back; FAILURE_DELAY by default. */
  failureDelay?: FailureDelay;
  /** The clock remembered credentials expire on (CREDENTIAL_TTL_MS); the real one by default. */
  clock?: Clock;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** This request's time for the database, shared by every query it makes. */
    database: DatabaseBudget;
  }
}

const BUDGET = Symbol('database budget');
/** A request already logged and counted, as one whose client had gone (onSend below). */
const TALLIED = Symbol('tallied');
/** The status a request whose client left before its answer is logged and counted with, as nginx does. */
const CLIENT_CLOSED_REQUEST = 499;

export async function buildApp({
  store,
  throttle = new Throttle({ createsPerSecond: 100 }),
  logger = false,
  trustProxy = false,
  https,
  metrics,
  serveMetrics = true,
  docs = true,
  connections,
  databaseBudgetMs = DATABASE_BUDGET_MS,
  failureDelay,
  clock,
}: AppOptions): Promise<FastifyInstance> {
  const limits = { ...CONNECTION_LIMITS, ...connections };
  // Node's own deadlines for a request to arrive, checked every checkEveryMs (its default, 30 s, would let a stalled request linger).
  const serverTimeouts = { headersTimeout: limits.headersMs, requestTimeout: limits.requestMs, connectionsCheckingInterval: limits.checkEveryMs };
  // A missing Host is answered by checkHeaders below, in the app's shape, rather than by Node's bare 400.
  const serverOptions = { ...serverTimeouts, requireHostHeader: false };
  const options = {
    http: serverOptions,
    requestTimeout: limits.requestMs,
    keepAliveTimeout: limits.keepAliveMs,
    logger,
    trustProxy,
    logController: new LogController({ disableRequestLogging: true }), // one line per request, written below without personal data
    childLoggerFactory: lazyRequestLogger, // request.log made only when a request writes through it
    bodyLimit: DRAIN_LIMIT, // the real limit (BODY_LIMIT) is enforced while reading: see http/body.ts
    requestIdHeader: false as const, // Fastify would take any X-Request-Id as it is; genReqId checks it
    genReqId: requestIdOf,
    routerOptions: { ignoreTrailingSlash: true },
    clientErrorHandler: answerUnparsableRequest,
    frameworkErrors: answerFrameworkError,
    return503OnClosing: false, // see preClose below
  };
  // Fastify types an HTTPS instance apart; the routes and hooks here are the same for both.
  // A TLS handshake has the headers' deadline too (Node's own is 120 s).
  const app = (https ? Fastify({ ...options, https: { ...serverOptions, handshakeTimeout: limits.headersMs, ...https } }) : Fastify(options)) as unknown as FastifyInstance;
  limitConnectionsPerAddress(app.server, limits.perAddress, trustProxy, https !== undefined);
  app.server.on('connect', answerConnect);
  app.server.on('checkExpectation', answerExpectation);
  app.server.on('checkContinue', holdContinue(app.server)); // the 100 once the request may send its body (http/body.ts)
  // A client that half-closes its connection once its request is sent (shutdown(SHUT_WR), `nc -N`, some
  // proxies) still reads the answer: a half-close ends no request, nor says the client has stopped
  // listening (RFC 9112, 9.6). By default Node ends the connection at once, unanswered, and a create
  // already under way was stored all the same (a review: 50 of 50), which a client without a key sends
  // again. Answered now, each request already read, and then the connection ends. (Node's own setting,
  // read by its HTTP server since long before Node 20; @types/node does not declare it.)
  (app.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
  // Over TLS the connection is the TLS socket, which Node makes ending its own side at the client's
  // close_notify and FIN (a review found HTTPS clients still dropped, their creates stored): it too
  // stays open for the answers.
  if (https) app.server.on('secureConnection', (socket: { allowHalfOpen: boolean }) => (socket.allowHalfOpen = true));
  if (https) app.server.on('tlsClientError', answerPlainHttp); // plain HTTP to the HTTPS port: a plain 400 saying so

  // Shutting down: every answer from now on closes its connection, so keep-alive clients let go and
  // close() does not wait for them. A request already on an open connection is served, not refused;
  // each connection is closed as soon as it has none in flight.
  const connectionsOpen = trackConnections(app.server, https !== undefined, { stalledMs: limits.stalledMs });
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    const reaper = setInterval(() => {
      app.server.closeIdleConnections();
      connectionsOpen.closeUnanswered();
    }, 50).unref();
    app.server.once('close', () => clearInterval(reaper)); // once every connection has ended
  });
  // Declared, so every request has the same shape in V8's eyes whether or not it authenticated.
  app.decorateRequest('charity', null as unknown as FastifyRequest['charity']);
  app.decorateRequest('authenticatedAt', 0);
  app.decorateRequest('charityTried', null); // a 401's (auth.ts): set on so few requests, it would otherwise give them a shape of their own
  // Made when a request first asks the database for something: no hook on every request for it.
  app.decorateRequest('database', {
    getter(this: FastifyRequest & { [BUDGET]?: DatabaseBudget }) {
      return (this[BUDGET] ??= new DatabaseBudget(databaseBudgetMs));
    },
  });
  const noRoute = registerErrorHandling(app, { ...(clock && { clock }), ...(metrics && { onOutcomeUnknown: () => metrics.outcomeUnknown.inc() }) });

  // The hooks every request meets, in order. Callbacks, not async functions: a promise per hook per
  // request is a cost every request pays. (Before them, as the request arrives, its route's own
  // onRequest hooks: authentication, and on a create the create limit, which awaits the throttle as
  // it may ask Redis; with no route, the not-found handler's hook answers 404 or 405 before the body is read.)
  app.addHook('onRequest', checkHeaders); // before the route's own: no more header lines than Node keeps, a Host for HTTP/1.1
  app.addHook('preParsing', boundBody); // the body's limit (BODY_LIMIT)
  // Below info (or with no logger), nothing is built for a line never written.
  const access = accessLog(app.log);
  const answered = metrics?.requestAnswered;
  const tally = (request: FastifyRequest, status: number, ms: number) => {
    // The route's pattern, never the raw URL: a path or query string can carry anything. The charity
    // by its id (an authenticated request's), so abuse can be traced to an integration; a refused
    // one's by its address (clientShown).
    const route = request.routeOptions.url ?? '(no route)';
    access?.({ reqId: request.id, method: request.method, route, status, ms, charity: request.charity?.id, charityTried: request.charityTried ?? undefined, client: clientShown(status) ? request.ip : undefined });
    answered?.(route, request.method, status, ms / 1000);
  };
  // The answers of one event-loop turn go out together at its end, one after another: a client on
  // this machine (nginx, a load generator) is then woken once for them all rather than once an
  // answer, which on a VM's vCPUs cost more than the answer itself (docs/performance.md). An
  // answer waits at most for the rest of its turn.
  const sendAtTurnEnd = eachTurn<() => void>((sends) => {
    for (const send of sends) send();
  });
  // Every answer's headers (setAnswerHeaders: names in lower case, which saved 2.9% of a /me with its
  // handler not async, docs/performance.md).
  app.addHook('onSend', (request, reply, payload, done) => {
    // Node reads no further after a request asking to Upgrade (none is offered) in what arrived with it, so a
    // request pipelined behind it was never answered: closed after this answer, the client sends it again.
    if (closing || request.raw.headers.upgrade !== undefined) reply.header('connection', 'close');
    setAnswerHeaders(reply, request.id);
    sendAtTurnEnd.add(() => {
      // Its client has gone (a timeout, a reset): the answer is never sent, so onResponse never comes, though
      // a create may be stored. Logged and counted here, as 499 (nginx's "client closed request"): until
      // 2026-11-29 such a request left no line and no count (a review).
      if (request.raw.socket?.destroyed) {
        (request as { [TALLIED]?: true })[TALLIED] = true;
        tally(request, CLIENT_CLOSED_REQUEST, reply.elapsedTime);
      }
      done(null, payload);
    });
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (!(request as { [TALLIED]?: true })[TALLIED]) tally(request, reply.statusCode, reply.elapsedTime);
    done();
  });

  if (metrics) {
    store.observeBatches(metrics.observeBatch);
    if (serveMetrics) await app.register((instance) => metrics.route(instance));
  }

  registerBodyParsing(app);
  await app.register(noRoute); // after the hooks above, so its answers meet them too

  await app.register(healthRoutes, { store, ...(clock && { clock }) });
  if (docs) await app.register(docsRoutes, docs === true ? {} : docs);
  await app.register(
    async (api) => {
      // Per route, not per prefix, so an unknown path under /api/v1 is a plain 404 without credentials.
      const onFailure = metrics ? () => metrics.authenticationFailures.inc() : undefined;
      const credentials = cachedCredentials((username, budget) => store.findCredential(username, budget), { clock });
      // An idle server too lets go of a header (a password) at most half a second past its time.
      const forgetting = setInterval(() => credentials.forget(), CREDENTIAL_TTL_MS / 4).unref();
      api.addHook('onClose', (_instance, done) => {
        clearInterval(forgetting);
        done();
      });
      const authenticate = basicAuth(credentials, throttle, { onFailure, failureDelay, clock });
      await api.register(meRoutes, { authenticate });
      const recorded = metrics && ((r: DonationRecord) => metrics.donationRecorded(r.gift_aid, r.donation_type));
      const stillAuthenticated = authenticatedStill(credentials, { maxAgeMs: CREDENTIAL_TTL_MS, clock, onFailure });
      await api.register(donationRoutes, { authenticate, limitCreates: createRateLimit(throttle), stillAuthenticated, store, recorded });
    },
    { prefix: '/api/v1' },
  );

  return app;
}
