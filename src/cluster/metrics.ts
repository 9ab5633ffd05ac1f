// WORKERS > 1, in the primary: GET /metrics as one server's, every worker's metrics summed by
// prom-client (AggregatorRegistry.aggregate), with what the workers that have gone had counted.
// A worker's counters die with it: summed over the live workers alone, a total went down when a
// worker was replaced (a review saw status="422" go from 23 to 10), which Prometheus's rate() and
// increase() read as a reset of the whole series. So each worker's last answer is kept, and when the
// worker exits its counters and histograms (never its gauges: memory, event-loop lag) are added to
// what earlier workers left. A total then never goes down; what a worker counted after the last
// scrape before it died is lost.
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { isMessage, toWorker } from './ipc.js';

/** One worker's metrics, as its registry's getMetricsAsJSON() gives them. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string> & { metricName?: string }>[];

/** How long the primary waits for each worker's metrics before the scrape is a 503 (prom-client's own wait). */
const WORKER_METRICS_TIMEOUT_MS = 5000;

/** Sums the live workers' metrics and the gone workers' counts, on each call. */
export function sumWorkersMetrics(timeoutMs = WORKER_METRICS_TIMEOUT_MS): () => Promise<string> {
  /** Each live worker's last answer. */
  const latest = new Map<Worker, MetricsSnapshot>();
  const gone = new GoneWorkersCounts();
  let nextId = 0;
  const asked = new Map<number, { worker: Worker; settle: () => void }>();

  cluster.on('message', (worker, m: unknown) => {
    if (!isMessage(m, 'almoner:worker-metrics') || m.metrics === undefined) return;
    const question = asked.get(m.id);
    if (question?.worker !== worker) return;
    latest.set(worker, m.metrics);
    question.settle();
  });
  cluster.on('exit', (worker) => {
    const last = latest.get(worker);
    latest.delete(worker);
    if (last) gone.add(last);
    for (const question of asked.values()) if (question.worker === worker) question.settle(); // its counts are in `gone` now
  });

  /** Asks one worker for its metrics: settles once it has answered (into `latest`) or exited; fails if it does neither in time. */
  const ask = (worker: Worker) =>
    new Promise<void>((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        asked.delete(id);
        reject(new Error(`worker ${worker.id} did not give its metrics within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      asked.set(id, {
        worker,
        settle: () => {
          clearTimeout(timer);
          asked.delete(id);
          resolve();
        },
      });
      toWorker(worker, { type: 'almoner:worker-metrics', id });
    });

  return async () => {
    const live = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
    await Promise.all(live.map(ask));
    // Read in one turn, after every answer: a worker that exited meanwhile is in `gone`, not in `latest`, never in both.
    return AggregatorRegistry.aggregate([...latest.values(), gone.snapshot()]).metrics();
  };
}

/** The counters and histograms of the workers that have gone, as last seen, added together. */
class GoneWorkersCounts {
  private readonly metrics = new Map<string, { metric: MetricsSnapshot[number]; values: Map<string, MetricsSnapshot[number]['values'][number]> }>();

  add(snapshot: MetricsSnapshot): void {
    for (const metric of snapshot) {
      const kind = metric.type as unknown as string; // a string at run time ('counter'), though typed as an enum
      if (kind !== 'counter' && kind !== 'histogram') continue;
      let kept = this.metrics.get(metric.name);
      if (!kept) this.metrics.set(metric.name, (kept = { metric, values: new Map() }));
      for (const value of metric.values) {
        // A histogram's buckets, sum and count share its labels and differ by metricName.
        const key = JSON.stringify([value.metricName, Object.entries(value.labels).sort(([a], [b]) => (a < b ? -1 : 1))]);
        const sum = kept.values.get(key);
        if (sum) sum.value += value.value;
        else kept.values.set(key, { ...value });
      }
    }
  }

  snapshot(): MetricsSnapshot {
    return [...this.metrics.values()].map(({ metric, values }) => ({ ...metric, values: [...values.values()] }));
  }
}
