// Group commit: writes that arrive together run in one transaction, so one commit (one fsync on
// SQLite with synchronous=FULL) serves them all. Each caller's promise settles only after the
// transaction holding its write has committed: a 200 still means "on disk".
import type { Kysely, Transaction } from 'kysely';

type Write<DB> = (trx: Transaction<DB>) => Promise<unknown>;

interface Pending<DB> {
  write: Write<DB>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Batch sizes, for whoever wants to watch them (metrics). */
export type BatchObserver = (size: number, seconds: number) => void;

export class GroupCommit<DB> {
  private readonly queue: Pending<DB>[] = [];
  private running = 0;
  private scheduled = false;

  constructor(
    private readonly db: Kysely<DB>,
    /** Transactions at once: 1 for SQLite (one writer), the pool size for PostgreSQL. */
    private readonly concurrency: number,
    private readonly maxBatch = 256,
  ) {}

  private observe: BatchObserver | undefined;

  /** Reports each batch's size and commit time (to metrics). */
  observeWith(observer: BatchObserver): void {
    this.observe = observer;
  }

  /** Runs `write` inside a shared transaction; resolves once that transaction has committed. */
  run<T>(write: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.concurrency || this.queue.length === 0) return;
    this.scheduled = true;
    // One turn of the event loop lets the writes of requests arriving together join the batch.
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.running >= this.concurrency || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.running++;
    this.schedule(); // with spare concurrency, the next batch may start at once
    const started = performance.now();
    try {
      const results = await this.db.transaction().execute(async (trx) => {
        const values: unknown[] = [];
        for (const p of batch) values.push(await p.write(trx));
        return values;
      });
      batch.forEach((p, i) => p.resolve(results[i]));
    } catch {
      // One write failed and took the batch with it: give each its own transaction, so only the
      // one at fault fails (nothing of the batch was committed, so rerunning is safe).
      for (const p of batch) {
        try {
          p.resolve(await this.db.transaction().execute((trx) => p.write(trx)));
        } catch (err) {
          p.reject(err);
        }
      }
    } finally {
      this.observe?.(batch.length, (performance.now() - started) / 1000);
      this.running--;
      this.schedule();
    }
  }
}
