// Prometheus metrics. Labels never carry personal data or a charity's identity: routes are
// patterns, and donations are counted by their kind only.
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'almoner_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });

  readonly latency = new Histogram({
    name: 'almoner_http_request_duration_seconds',
    help: 'Time from the request to the answer, by route pattern and method.',
    labelNames: ['route', 'method'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly donations = new Counter({
    name: 'almoner_donations_recorded_total',
    help: 'Donations recorded (replays of an idempotent request not counted), by Gift Aid and type.',
    labelNames: ['gift_aid', 'donation_type'] as const,
    registers: [this.registry],
  });

  readonly authenticationFailures = new Counter({
    name: 'almoner_authentication_failures_total',
    help: 'Requests refused for missing, wrong or disabled credentials (401).',
    registers: [this.registry],
  });

  readonly commitSeconds = new Histogram({
    name: 'almoner_db_commit_seconds',
    help: 'Time to run and commit one group-commit transaction.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly batchSize = new Histogram({
    name: 'almoner_db_batch_size',
    help: 'Writes committed together in one group-commit transaction.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** For the store's group commit. */
  readonly observeBatch = (size: number, seconds: number): void => {
    this.batchSize.observe(size);
    this.commitSeconds.observe(seconds);
  };

  /** Each route, method and status's counter and each route and method's histogram, bound once: the labels are hashed once, not per request. */
  private readonly counted = new Map<string, { inc(): void }>();
  private readonly timed = new Map<string, { observe(seconds: number): void }>();

  /** Counts an answered request; the route is its pattern ("(no route)" for 404s), never the URL. */
  readonly requestAnswered = (route: string, method: string, status: number, seconds: number): void => {
    const key = `${method} ${route}`;
    let timed = this.timed.get(key);
    if (!timed) this.timed.set(key, (timed = this.latency.labels(route, method)));
    timed.observe(seconds);
    const countKey = `${key} ${status}`;
    let counted = this.counted.get(countKey);
    if (!counted) this.counted.set(countKey, (counted = this.requests.labels(route, method, String(status))));
    counted.inc();
  };

  /** GET /metrics in Prometheus's text format. */
  async route(app: FastifyInstance): Promise<void> {
    app.get('/metrics', async (_request, reply) => {
      reply.header('Content-Type', this.registry.contentType);
      return this.registry.metrics();
    });
  }
}
