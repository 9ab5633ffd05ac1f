// buildApp assembles the HTTP service from its parts, in the order a request meets them.
// No I/O happens here: the store arrives open, and listening is the caller's business.
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Store } from './store/store.js';
import { basicAuth } from './http/auth.js';
import { DRAIN_LIMIT, registerBodyParsing } from './http/body.js';
import { registerErrorHandling } from './http/errors.js';
import { donationRoutes } from './http/routes/donations.js';
import { meRoutes } from './http/routes/me.js';

export interface AppOptions {
  store: Store;
  /** Fastify/pino logger options; false (the default) for none. */
  logger?: boolean | { level: string };
}

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

export async function buildApp({ store, logger = false }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger,
    logController: new LogController({ disableRequestLogging: true }), // one line per request, written below without personal data
    bodyLimit: DRAIN_LIMIT, // the real 1 MiB limit is enforced while reading: see http/body.ts
    requestIdHeader: 'x-request-id',
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
  });

  app.addHook('onSend', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
    reply.header('Cache-Control', 'no-store');
    reply.header('X-Content-Type-Options', 'nosniff');
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      { method: request.method, path: request.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
      'request',
    );
  });

  registerErrorHandling(app);
  await registerBodyParsing(app);

  await app.register(
    async (api) => {
      // Per route, not per prefix, so an unknown path under /api/v1 is a plain 404 without credentials.
      const authenticate = basicAuth((username) => store.findCredential(username));
      await api.register(meRoutes, { authenticate });
      await api.register(donationRoutes, { authenticate, store });
    },
    { prefix: '/api/v1' },
  );

  return app;
}
