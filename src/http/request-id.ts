// A request's id: the client's X-Request-Id when it sends a usable one, else a fresh UUID. It is
// echoed on every answer and written on the request's log lines (http/openapi.ts documents both).
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/** An X-Request-Id taken as it is: 1 to 200 printable ASCII characters, no space. */
export const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** Fastify's genReqId: the client's X-Request-Id if it is one, else a fresh UUID. */
export function requestIdOf(req: { headers: IncomingHttpHeaders }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
