// How long a request may wait for the database, in all: its credential look-up, its idempotency
// key and its write share one budget, so a database that stalls or slows down costs a request
// one deadline, never one timeout per query. Time spent elsewhere (reading the body, hashing)
// is not counted.

import { setDeadline } from '../time.js';

/**
 * A request's time with the database: 4.5 s, so that its answer (a 503 when the time runs out) is
 * out within the 5 s the README promises, with room for a busy machine to send it.
 */
export const DATABASE_BUDGET_MS = 4500;

/** The request's time for the database ran out; nothing of what was cut short was acknowledged. */
export class DatabaseDeadlineError extends Error {
  readonly code = 'ALMONER_DATABASE_DEADLINE';
  /** `cause`: what held the writes up until then, if anything said (SQLite's SQLITE_BUSY). */
  constructor(override readonly cause?: unknown) {
    const code = (cause as { code?: unknown } | undefined)?.code;
    super(`the database did not answer within the request's time for it${cause instanceof Error ? ` (held up by ${typeof code === 'string' ? `${code}: ` : ''}${cause.message})` : ''}`);
  }
}

export class DatabaseBudget {
  private spentMs = 0;

  constructor(readonly totalMs = DATABASE_BUDGET_MS) {}

  /**
   * Runs `work`, telling it the moment (on performance.now()'s clock) by which it must be done;
   * the time it takes is spent.
   */
  async spend<T>(work: (deadline: number) => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work(started + this.totalMs - this.spentMs);
    } finally {
      this.spentMs += performance.now() - started;
    }
  }
}

/**
 * `reading`, or DatabaseDeadlineError once `deadline` has passed and what had arrived by then was read (setDeadline); what was asked runs on. For reads, and
 * for a commit token's claim (group-commit.ts), whose running on is what settles it; group-commit.ts cuts a write short.
 */
export function byDeadline<T>(deadline: number | undefined, reading: Promise<T>): Promise<T> {
  if (deadline === undefined) return reading;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setDeadline(() => reject(new DatabaseDeadlineError()), Math.max(0, deadline - performance.now())); // a no-op once reading has won the race
  });
  return Promise.race([reading, late]).finally(() => clearTimeout(timer));
}
