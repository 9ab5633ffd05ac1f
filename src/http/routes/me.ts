// POST /api/v1/me: "Test Connection". Authentication has already run; this names who it found.
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { ME_RESPONSE_SCHEMA } from '../../donations/schema.js';

export async function meRoutes(app: FastifyInstance, { authenticate }: { authenticate: onRequestHookHandler }): Promise<void> {
  // The interface's /me takes no body, and reads none: whatever comes is read (within the body's
  // limit, else 413) and set aside, as a Laravel route that reads no input does. Laravel's own HTTP
  // client sends `[]` as JSON with a bodiless post(), and fetch sends '' as text/plain: both were a
  // 400 or a 415 here until 2026-11-28. (This plugin's own parsers: the create route's stay strict.)
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) => done(null, undefined));
  // Not async: Fastify sends a value returned at once, without a promise and a turn of the microtask queue for it.
  app.post('/me', { onRequest: authenticate, config: { readsNoBody: true }, schema: { response: { 200: ME_RESPONSE_SCHEMA } } }, (request) => ({
    success: true,
    message: 'Authenticated',
    data: { name: request.charity.name, email: request.charity.email },
  }));
}
