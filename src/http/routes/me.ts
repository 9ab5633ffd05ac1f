// POST /api/v1/me: "Test Connection". Authentication has already run; this names who it found.
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { ME_RESPONSE_SCHEMA } from '../../donations/schema.js';

export async function meRoutes(app: FastifyInstance, { authenticate }: { authenticate: onRequestHookHandler }): Promise<void> {
  // Not async: Fastify sends a value returned at once, without a promise and a turn of the microtask queue for it.
  app.post('/me', { onRequest: authenticate, schema: { response: { 200: ME_RESPONSE_SCHEMA } } }, (request) => ({
    success: true,
    message: 'Authenticated',
    data: { name: request.charity.name, email: request.charity.email },
  }));
}
