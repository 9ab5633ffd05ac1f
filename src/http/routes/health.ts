// GET /health (the process is up) and GET /health/ready (the database answers), outside /api/v1
// and without authentication, for load balancers and orchestrators.
import type { FastifyInstance } from 'fastify';
import type { Store } from '../../store/store.js';
import { loggable } from '../../loggable.js';
import { monotonicClock, type Clock } from '../../time.js';

/**
 * How long the database's answer to a readiness check stands for the checks after it. Unthrottled
 * and unauthenticated, each check queried the database: a flood of them (800 connections) starved
 * the pool, so every instance said it was not ready and creates took 13 s (a review, 2026-11-30).
 * Now checks that come together share one query, and for this long after it answered they query
 * nothing: a flood costs the database two queries a second. A write failing for want of the
 * database (a full disk) is looked at on every check all the same: that costs no query.
 */
export const READY_STANDS_MS = 500;

export async function healthRoutes(app: FastifyInstance, { store, clock = monotonicClock }: { store: Store; clock?: Clock }): Promise<void> {
  app.get('/health', async () => ({ status: 'ok' }));

  /** When the database last answered a check, on `clock`; and the check under way, which later ones wait for. */
  let answeredAt = -Infinity;
  let checking: Promise<void> | undefined;

  app.get('/health/ready', async (request, reply) => {
    const asking = checking === undefined && clock() - answeredAt >= READY_STANDS_MS;
    try {
      if (asking) {
        checking = store.ping(request.database).then(
          () => {
            answeredAt = clock();
            checking = undefined;
          },
          (err: unknown) => {
            checking = undefined;
            throw err;
          },
        );
      }
      await checking;
      const failing = store.writeFailure();
      if (failing !== undefined) throw failing;
      return { status: 'ready' };
    } catch (err) {
      // Said once, by the check that asked: not once for each check waiting for it.
      if (asking) request.log.warn({ err: loggable(err) }, 'readiness check failed');
      return reply.code(503).send({ status: 'unavailable', message: 'The database is unavailable.' });
    }
  });
}
