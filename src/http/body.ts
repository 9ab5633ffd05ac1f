// Request bodies: JSON (UTF-8) or application/x-www-form-urlencoded, at most 1 MiB.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import { parse as parseQueryString } from 'fast-querystring';
import sjson from 'secure-json-parse';
import { DONATION_FIELDS } from '../donations/fields.js';
import { HttpError } from './errors.js';

export const BODY_LIMIT = 1024 * 1024;
/**
 * How much of an oversize body is read (and thrown away) before answering 413. Closing the
 * connection while the client is still sending makes its kernel answer with a reset, which
 * destroys our 413 before the client reads it; reading to the end lets the answer arrive.
 * Past this bound (or a Content-Length above it) the connection is closed instead.
 */
export const DRAIN_LIMIT = 16 * BODY_LIMIT;

function tooLarge(): HttpError {
  return new HttpError(413, 'The request body must not be larger than 1 MiB.');
}

/** Passes up to BODY_LIMIT bytes through; discards the rest and then fails with 413. */
class BodyLimit extends Transform {
  private received = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.received += chunk.length;
    if (this.received > DRAIN_LIMIT) return done(tooLarge());
    if (this.received > BODY_LIMIT) return done();
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    done(this.received > BODY_LIMIT ? tooLarge() : null);
  }
}

/**
 * Reads and throws away a request body that will not be used (for example before a 401), so the
 * answer reaches a client that sends its whole body before reading. Bounded like the 413 path: a
 * body declared or found larger than DRAIN_LIMIT is left unread, and the answer closes the
 * connection (what is left of the body must never be read as the next request).
 */
export async function discardBody(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const declared = Number(req.headers['content-length'] ?? 0);
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (req.readableEnded || (!chunked && !(declared > 0))) return;
  if (declared > DRAIN_LIMIT) return void res.setHeader('Connection', 'close');
  let seen = 0;
  await new Promise<void>((resolve) => {
    req.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DRAIN_LIMIT) {
        res.setHeader('Connection', 'close');
        resolve();
      }
    });
    req.once('end', resolve);
    req.once('close', resolve);
    req.once('error', resolve);
    req.resume();
  });
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
}

/** A preParsing hook: a body without a Content-Length within the limit is counted as it arrives. */
export function boundBody(request: FastifyRequest, _reply: FastifyReply, payload: RequestPayload, done: (err: Error | null, body?: RequestPayload) => void): void {
  const { headers } = request;
  // Node's parser delivers exactly Content-Length bytes: within the limit, the body needs no counting.
  if (headers['transfer-encoding'] === undefined && !(Number(headers['content-length']) > BODY_LIMIT)) return done(null, payload);
  // pipe(), not pipeline(): pipeline costs an AbortController per request. Errors are forwarded by hand.
  const limited = new BodyLimit();
  payload.on('error', (err) => limited.destroy(err));
  done(null, payload.pipe(limited));
}

/** The donation fields whose blank value in a form post is no value (see FieldSpec.blankInFormIsAbsent). */
export const BLANK_IS_ABSENT = DONATION_FIELDS.filter((f) => 'blankInFormIsAbsent' in f).map((f) => f.name);

/**
 * A form post as PHP and HTML send it: parsed by fast-querystring (as @fastify/formbody does), a
 * blank value of a field the table marks blankInFormIsAbsent dropped, and a JSON text sent as a form (curl's -d
 * without a Content-Type: one key beginning with `{`) refused with the fix, not read as fields.
 */
function parseForm(text: string): Record<string, unknown> {
  const body = parseQueryString(text) as Record<string, unknown>;
  const keys = Object.keys(body);
  if (keys.length === 1 && keys[0]!.trimStart().startsWith('{')) {
    throw new HttpError(415, 'The body is JSON but was sent as a form (application/x-www-form-urlencoded): send it with Content-Type: application/json.');
  }
  for (const name of BLANK_IS_ABSENT) if (body[name] === '') delete body[name];
  return body;
}

/** The JSON and form parsers (the body's limit is boundBody's). */
export async function registerBodyParsing(app: FastifyInstance): Promise<void> {
  app.removeAllContentTypeParsers(); // no text/plain, no guessing: JSON and forms only

  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(new HttpError(415, 'Unsupported charset: JSON bodies must be UTF-8.'), undefined);
    }
    let text: string;
    try {
      // Strict: invalid bytes are an error, not U+FFFD stored in place of what was meant.
      text = STRICT_UTF8.decode(bytes as Buffer);
    } catch {
      return done(new HttpError(400, 'The request body is not valid UTF-8.'), undefined);
    }
    const source = text.trim();
    if (source === '') return done(null, {}); // an empty JSON body is an empty object, as in Laravel
    let body: unknown;
    try {
      body = sjson.parse(source, undefined, { protoAction: 'remove', constructorAction: 'remove' });
    } catch {
      return done(new HttpError(400, 'The request body is not valid JSON.'), undefined);
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return done(new HttpError(400, 'The request body must be a JSON object.'), undefined);
    }
    done(null, body);
  });

  await app.register(formbody, { parser: parseForm }); // within the app-wide bodyLimit (DRAIN_LIMIT), like the JSON parser
}
