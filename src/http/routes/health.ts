// GET /health (the process is up) and GET /health/ready (the database answers), outside /api/v1
// and without authentication, for load balancers and orchestrators.
import type { FastifyInstance } from 'fastify';
import type { Store } from '../../store/store.js';
import { loggable } from '../../loggable.js';

export async function healthRoutes(app: FastifyInstance, { store }: { store: Store }): Promise<void> {
  app.get('/health', async () => ({ status: 'ok' }));

  app.get('/health/ready', async (request, reply) => {
    try {
      await store.ping(request.database);
      return { status: 'ready' };
    } catch (err) {
      request.log.warn({ err: loggable(err) }, 'readiness check failed');
      return reply.code(503).send({ status: 'unavailable', message: 'The database is unavailable.' });
    }
  });
}
