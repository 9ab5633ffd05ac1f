// Prometheus metrics. Labels never carry personal data or a charity's identity: routes are
// patterns, and donations are counted by their kind only.
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsSnapshot } from '../cluster/metrics.js';
import { loggable } from '../loggable.js';

export class Metrics {
  readonly registry = new Registry();

  /** Answered requests by route and method: plain numbers on the request path, read when scraped. */
  private readonly answered = new Map<string, Map<string, RequestTally>>();

  readonly requests = new Counter({
    name: 'almoner_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
    collect: () => {
      this.requests.reset();
      for (const t of tallies(this.answered)) {
        for (const [status, n] of t.statuses) this.requests.inc({ route: t.route, method: t.method, status: String(status) }, n);
      }
    },
  });

  /** Donations recorded, by Gift Aid and then type: plain numbers on the request path, read when scraped. */
  private readonly recorded = new Map<string, Map<string, number>>();

  readonly donations = new Counter({
    name: 'almoner_donations_recorded_total',
    help: 'Donations recorded (replays of an idempotent request not counted), by Gift Aid and type.',
    labelNames: ['gift_aid', 'donation_type'] as const,
    registers: [this.registry],
    collect: () => {
      this.donations.reset();
      for (const [giftAid, byType] of this.recorded) {
        for (const [donationType, n] of byType) this.donations.inc({ gift_aid: giftAid, donation_type: donationType }, n);
      }
    },
  });

  readonly authenticationFailures = new Counter({
    name: 'almoner_authentication_failures_total',
    help: 'Requests refused for missing, wrong or disabled credentials (401).',
    registers: [this.registry],
  });

  /**
   * Creates answered 503 whose commit was sent and never confirmed (ALMONER_COMMIT_UNKNOWN): each may
   * be stored, and is for the operator to settle from its log line. Among the 503s of
   * almoner_http_requests_total they looked like any other (a review, 2026-11-30).
   */
  readonly outcomeUnknown = new Counter({
    name: 'almoner_creates_outcome_unknown_total',
    help: 'Creates answered 503 whose commit may have been stored (its outcome unknown: ALMONER_COMMIT_UNKNOWN in the log).',
    registers: [this.registry],
  });

  readonly commitSeconds = new Histogram({
    name: 'almoner_db_commit_seconds',
    help: 'Time to run and commit one group-commit batch.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly batchSize = new Histogram({
    name: 'almoner_db_batch_size',
    help: 'Writes committed together in one group-commit batch.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });

  /** Made when a certificate is first served (TLS_CERT_FILE): a series of 0 would say one had expired. */
  private certificateExpiry: Gauge | undefined;

  /** When the TLS certificate now served stops being valid: at start, and at each SIGHUP that reloads it. */
  readonly tlsCertificateExpires = (at: Date): void => {
    this.certificateExpiry ??= new Gauge({
      name: 'almoner_tls_certificate_expiry_timestamp_seconds',
      help: 'When the TLS certificate served (TLS_CERT_FILE) stops being valid, in seconds since the epoch (the soonest of the workers\'). Alert when it is under 14 days away.',
      aggregator: 'min',
      registers: [this.registry],
    });
    this.certificateExpiry.set(at.getTime() / 1000);
  };

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.registry.registerMetric(latencyHistogram(this.answered) as unknown as Counter);
  }

  /** For the store's group commit. */
  readonly observeBatch = (size: number, seconds: number): void => {
    this.batchSize.observe(size);
    this.commitSeconds.observe(seconds);
  };

  /**
   * Counts a donation recorded (not a replay), as requestAnswered counts a request: prom-client's
   * labelled inc() hashes its labels every time, about 0.5 µs of a create's CPU here.
   */
  readonly donationRecorded = (giftAid: string, donationType: string): void => {
    let byType = this.recorded.get(giftAid);
    if (!byType) this.recorded.set(giftAid, (byType = new Map()));
    byType.set(donationType, (byType.get(donationType) ?? 0) + 1);
  };

  /**
   * Counts an answered request; the route is its pattern ("(no route)" for 404s), never the URL.
   * Plain arithmetic, once per request: prom-client's labelled observe() hashes its labels every
   * time, which cost /me about a fifth of its throughput here. Looked up by the route and method
   * strings themselves (V8 keeps a string's hash), not by a key joined from them per request.
   */
  readonly requestAnswered = (route: string, method: string, status: number, seconds: number): void => {
    let byMethod = this.answered.get(route);
    if (!byMethod) this.answered.set(route, (byMethod = new Map()));
    let t = byMethod.get(method);
    if (!t) byMethod.set(method, (t = { route, method, statuses: new Map(), buckets: LATENCY_BUCKETS.map(() => 0), count: 0, sum: 0 }));
    t.statuses.set(status, (t.statuses.get(status) ?? 0) + 1);
    let i = 0;
    while (i < LATENCY_BUCKETS.length && !(seconds <= LATENCY_BUCKETS[i]!)) i++;
    if (i < LATENCY_BUCKETS.length) t.buckets[i]!++;
    t.count++;
    t.sum += seconds;
  };

  /** The metrics in Prometheus's text format: this process's, or under WORKERS every worker's (joinCluster). */
  private scrape: () => Promise<string> = () => this.registry.metrics();

  /**
   * Under WORKERS: this worker answers the primary's requests for its own metrics, and its GET
   * /metrics answers with every worker's, summed as one server's, which `gather` asks the primary for
   * (cluster/metrics.ts).
   */
  joinCluster(gather: () => Promise<string>, answer: (own: () => Promise<MetricsSnapshot>) => void): void {
    answer(() => this.registry.getMetricsAsJSON() as Promise<MetricsSnapshot>);
    this.scrape = gather;
  }

  /** GET /metrics in Prometheus's text format. */
  async route(app: FastifyInstance): Promise<void> {
    await metricsRoute(() => this.scrape())(app);
  }
}

/** The GET /metrics route, answered by `scrape`; a 503 if the metrics cannot be gathered (a worker not answering). */
export function metricsRoute(scrape: () => Promise<string>) {
  // Scrapes that arrive while one is being gathered share it: the route needs no credentials, and
  // under WORKERS each gathering is a round of messages through the primary and work in every worker,
  // so GET /metrics pipelined on one connection (or sent on many at once) queued thousands of them,
  // and the server answered nobody else for seconds (a review, 2026-11-29).
  let gathering: Promise<string> | undefined;
  const shared = (): Promise<string> =>
    (gathering ??= scrape().finally(() => {
      gathering = undefined;
    }));
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/metrics', async (request, reply) => {
      let text: string;
      try {
        text = await shared();
      } catch (err) {
        request.log.warn({ err: loggable(err) }, 'metrics not gathered');
        return reply.code(503).header('Retry-After', '1').send({ message: 'The metrics could not be gathered from every worker. Try again.' });
      }
      reply.header('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE);
      return text;
    });
  };
}

/** Upper bounds of the request-duration histogram's buckets, in seconds. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

interface RequestTally {
  route: string;
  method: string;
  statuses: Map<number, number>;
  /** Requests per bucket (not cumulative); those over the last bound are only in count. */
  buckets: number[];
  count: number;
  sum: number;
}

function tallies(answered: Map<string, Map<string, RequestTally>>): RequestTally[] {
  return [...answered.values()].flatMap((byMethod) => [...byMethod.values()]);
}

/**
 * almoner_http_request_duration_seconds, made from the tallies when scraped: a collector in the
 * shape prom-client's registry reads from its own histograms (get() -> name, type and values).
 */
function latencyHistogram(answered: Map<string, Map<string, RequestTally>>) {
  const name = 'almoner_http_request_duration_seconds';
  const help = 'Time from the request to the answer, by route pattern and method.';
  return {
    name,
    help,
    type: 'histogram' as const,
    aggregator: 'sum' as const,
    reset(): void {
      answered.clear();
    },
    async get() {
      const values = tallies(answered).flatMap((t) => {
        const labels = { route: t.route, method: t.method };
        let cumulative = 0;
        return [
          ...LATENCY_BUCKETS.map((le, i) => ({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: (cumulative += t.buckets[i]!) })),
          { metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: t.count },
          { metricName: `${name}_sum`, labels, value: t.sum },
          { metricName: `${name}_count`, labels, value: t.count },
        ];
      });
      return { name, help, type: 'histogram' as const, aggregator: 'sum' as const, values };
    },
  };
}
