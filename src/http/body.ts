// Request bodies: JSON or application/x-www-form-urlencoded, both UTF-8, at most 64 KiB.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import { parse as parseQueryString } from 'fast-querystring';
import sjson from 'secure-json-parse';
import { DONATION_FIELDS } from '../donations/fields.js';
import { HttpError, UNSUPPORTED_MEDIA_TYPE } from './errors.js';

/**
 * The largest body taken: 64 KiB, many times the largest donation (its 15 fields at their longest,
 * each character escaped as JSON's \uXXXX pairs, come to about 46 KB). Until 2026-11-30 it was
 * 1 MiB, and a charity's credentials could hold the event loop 130 ms a body parsing 90,000 keys or
 * pairs (16 such bodies at once held /health to 1.75 s), and 500 bodies sent slowly held 497 MB
 * (a faults review).
 */
export const BODY_LIMIT = 64 * 1024;
/** BODY_LIMIT as a person reads it, in the 413's message. */
export const BODY_LIMIT_TEXT = `${BODY_LIMIT / 1024} KiB`;
/** The 413's message (nginx's own 413, in deploy/nginx.conf, is the same). */
export const TOO_LARGE_MESSAGE = `The request body must not be larger than ${BODY_LIMIT_TEXT}.`;
/**
 * How much of an oversize body is read (and thrown away) before answering 413. Closing the
 * connection while the client is still sending makes its kernel answer with a reset, which
 * destroys our 413 before the client reads it; reading to the end lets the answer arrive.
 * Past this bound (or a Content-Length above it) the connection is closed instead.
 */
export const DRAIN_LIMIT = 16 * 1024 * 1024;

function tooLarge(): HttpError {
  return new HttpError(413, TOO_LARGE_MESSAGE);
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
  // Told nothing yet, a client of Expect: 100-continue has not sent its body: the answer goes without
  // it, and the connection closes after it. Unless the body comes anyway, as from a client that does
  // not wait (Python's http.client): read as any other, or the answer was lost in the reset.
  const awaiting = AWAITING_CONTINUE.delete(req);
  let seen = 0;
  await new Promise<void>((resolve) => {
    const unsent = awaiting
      ? setTimeout(() => {
          if (seen > 0) return;
          res.setHeader('Connection', 'close');
          req.pause();
          resolve();
        }, CONTINUE_GRACE_MS)
      : undefined;
    const done = () => {
      clearTimeout(unsent);
      resolve();
    };
    req.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DRAIN_LIMIT) {
        res.setHeader('Connection', 'close');
        done();
      }
    });
    req.once('end', done);
    req.once('close', done);
    req.once('error', done);
    req.resume();
  });
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** A Content-Type's parameters after its media type: each name, and its value, in quotes or not (a quoted one may hold `;`). */
const PARAMETER = /;\s*([^=;\s]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;

/** The charset parameters of a Content-Type, in lower case: none, one, or (refused) more. A `charset=` within another's quoted value is not one. */
function charsetsOf(contentType: string | undefined): string[] {
  const charsets: string[] = [];
  for (const m of (contentType ?? '').matchAll(PARAMETER)) {
    // As before: an empty one is none, and an unclosed quote is read past (`charset="utf-8`).
    const value = (m[2] ?? m[3] ?? '').trim().replace(/^"/, '').toLowerCase();
    if (m[1]!.toLowerCase() === 'charset' && value !== '') charsets.push(value);
  }
  return charsets;
}

/**
 * Requests sent with `Expect: 100-continue` whose client waits for the 100 before sending its body.
 * Node sent the 100 at once, before the credentials or the declared size were looked at, so a wrong
 * password uploaded the whole body before its 401, and a body of 20 MB was sent into a connection
 * closing on its 413 (until 2026-11-29; a review). Now the 100 goes once the request is
 * authenticated and its Content-Length is within the limit (boundBody), and an answer given before
 * that (401, 404, 405, 413, 429) is given at once, and closes the connection (discardBody).
 */
const AWAITING_CONTINUE = new WeakSet<IncomingMessage>();

/** How long an answer given without the 100 waits for a body sent without waiting for it. */
const CONTINUE_GRACE_MS = 250;

/** The server's `checkContinue` listener: the request goes on to the app with its 100 held back. */
export function holdContinue(server: { emit(event: 'request', req: IncomingMessage, res: ServerResponse): boolean }) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    AWAITING_CONTINUE.add(req);
    server.emit('request', req, res);
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route sets aside any body, of any type, unread (/me): the headers that refuse a body before its 100 (refusedByHeaders) do not apply. */
    readsNoBody?: true;
  }
}

/** A preParsing hook: a body without a Content-Length within the limit is counted as it arrives. */
export function boundBody(request: FastifyRequest, reply: FastifyReply, payload: RequestPayload, done: (err: Error | null, body?: RequestPayload) => void): void {
  const { headers } = request;
  if (AWAITING_CONTINUE.has(request.raw)) {
    // Not sent, the body is not read; sent anyway, it is read and thrown away (up to DRAIN_LIMIT) so the answer arrives.
    // Until 2026-11-29 a 415 its headers alone decide came after the 100, and the body was sent for nothing (a review).
    const declared = Number(headers['content-length']);
    // A route that reads no body (/me) takes one of any kind, with the 100 as without it.
    const parsed = (declared > 0 || headers['transfer-encoding'] !== undefined) && request.routeOptions.config.readsNoBody !== true;
    const refused = declared > BODY_LIMIT ? tooLarge() : parsed ? refusedByHeaders(headers) : undefined;
    if (refused) return void discardBody(request.raw, reply.raw).then(() => done(refused));
    AWAITING_CONTINUE.delete(request.raw);
    reply.raw.writeContinue();
  }
  // Node's parser delivers exactly Content-Length bytes: within the limit, the body needs no counting.
  if (headers['transfer-encoding'] === undefined && !(Number(headers['content-length']) > BODY_LIMIT)) return done(null, payload);
  // pipe(), not pipeline(): pipeline costs an AbortController per request. Errors are forwarded by hand.
  const limited = new BodyLimit();
  payload.on('error', (err) => limited.destroy(err));
  done(null, payload.pipe(limited));
}

/** The donation fields whose blank value in a form post is no value (see FieldSpec.blankInFormIsAbsent). */
export const BLANK_IS_ABSENT = DONATION_FIELDS.filter((f) => 'blankInFormIsAbsent' in f).map((f) => f.name);

/** A run of percent-escapes: the bytes of one or more characters, which must be UTF-8. */
const ESCAPED_BYTES = /(?:%[0-9A-Fa-f]{2})+/g;
/** A `%` that escapes nothing: the parser would keep its whole value undecoded. */
const BARE_PERCENT = /%(?![0-9A-Fa-f]{2})/;

/**
 * A form post as PHP and HTML send it: UTF-8 bytes whose percent-escapes are UTF-8 too (a form on
 * a Latin-1 page sends é as %E9: a 400, not "%E9" or U+FFFD stored in a donor's name), parsed by
 * fast-querystring pair by pair, each key named as PHP names it (phpName), a blank value of a field the table marks blankInFormIsAbsent dropped, and a
 * JSON text sent as a form (curl's -d without a Content-Type: one key beginning with `{`) refused
 * with the fix, not read as fields. A field sent twice takes its last value. A `%` not followed by two hex digits is a 400 too: the parser
 * would keep that whole value as sent, escapes and all (`%zz%C3%A9`, not `%zzé`).
 */
function parseForm(text: string): Record<string, unknown> {
  // Told by its text, before any of a form's own checks: a JSON text holding `&` or `%` in a value (an
  // address "Flat 2 & 3", "100% card") parsed as several keys, or failed on its `%`, and got four
  // "is required" errors or a 400 about percent-escapes instead of this 415.
  if (text.trimStart().startsWith('{')) throw jsonAsForm();
  const bare = BARE_PERCENT.exec(text);
  if (bare) throw new HttpError(400, `The form body is not valid: "${text.slice(bare.index, bare.index + 3)}" is not a percent-escape (a form sends % as %25).`);
  for (const [run] of text.matchAll(ESCAPED_BYTES)) {
    try {
      STRICT_UTF8.decode(Buffer.from(run.replaceAll('%', ''), 'hex'));
    } catch {
      throw new HttpError(400, `The form body is not valid UTF-8: ${run.length > 30 ? `${run.slice(0, 30)}…` : run} is not the percent-encoding of UTF-8 text.`);
    }
  }
  // Pair by pair, in order, each decoded by fast-querystring: a field's name as PHP reads it (phpName), and a
  // field sent again, under any of its names, takes its last value, as PHP reads a form: a hidden "no"
  // before a checkbox's "on" gives "on" (a review), and `gift+aid=yes&gift_aid=no` is "no" (a review).
  const body: Record<string, unknown> = Object.create(null);
  const keys = new Set<string>();
  for (const segment of text.split('&')) {
    if (segment === '') continue;
    for (const [key, value] of Object.entries(parseQueryString(segment) as Record<string, unknown>)) {
      keys.add(key);
      const { name, array } = phpName(key);
      body[name] = array ? [value] : value;
    }
  }
  if (keys.size === 1 && [...keys][0]!.trimStart().startsWith('{')) throw jsonAsForm(); // escaped: %7B…
  for (const name of BLANK_IS_ABSENT) if (body[name] === '') delete body[name];
  return body;
}

/**
 * A form key as PHP names its variable: leading spaces dropped, a space, a dot or a `[` left open an
 * underscore (`donor.city`, `donor+city` are `donor_city`), and its array syntax (`donor_city[]`,
 * `donor_city[a]b`) an array of that name, which Laravel answers "must be a string". Such keys were
 * unknown here, and their values dropped with a 200 (an integrator's review).
 */
function phpName(key: string): { name: string; array: boolean } {
  const trimmed = key.replace(/^ +/, '');
  const open = trimmed.indexOf('[');
  const array = open > 0 && trimmed.indexOf(']', open) > open;
  return { name: (array ? trimmed.slice(0, open) : trimmed).replace(/[ .[]/g, '_'), array };
}

/** A form's or a query string's key as PHP names its variable (phpName), without its array syntax. */
export const formFieldName = (key: string): string => phpName(key).name;

const jsonAsForm = () => new HttpError(415, 'The body is JSON but was sent as a form (application/x-www-form-urlencoded): send it with Content-Type: application/json.');

/** The media types a body may have (the parsers registerBodyParsing adds), and what each is called in a message. */
const JSON_TYPE = 'application/json';
const FORM_TYPE = 'application/x-www-form-urlencoded';
const MEDIA_TYPES = { [JSON_TYPE]: 'JSON', [FORM_TYPE]: 'form' } as const;

/**
 * What the headers alone refuse in a body, before a byte of it is read: a media type with no parser,
 * a content coding, a transfer coding other than chunked, a charset other than UTF-8.
 */
function refusedByHeaders(headers: IncomingHttpHeaders, parsedAs?: 'JSON' | 'form'): HttpError | undefined {
  // A parser's own request has its media type already (Fastify chose the parser by it): looked up only before the 100.
  const kind = parsedAs ?? (MEDIA_TYPES[(headers['content-type']?.split(';', 1)[0]!.trim().toLowerCase() ?? '') as keyof typeof MEDIA_TYPES] as string | undefined);
  if (kind === undefined) return new HttpError(415, UNSUPPORTED_MEDIA_TYPE);
  // No content coding is decoded: a gzip body was told it was not UTF-8, and a plain one labelled br was taken.
  const coding = headers['content-encoding']?.trim().toLowerCase();
  if (coding && coding !== 'identity') return new HttpError(415, `Content-Encoding ${JSON.stringify(coding)} is not supported: send the body uncompressed, without a Content-Encoding header.`);
  // Node undoes only the chunked framing: "gzip, chunked" handed over the gzip bytes, and a plain body so labelled was taken (until 2026-11-29; a review).
  const transfer = headers['transfer-encoding']?.trim().toLowerCase();
  if (transfer && transfer !== 'chunked') return new HttpError(415, `Transfer-Encoding ${JSON.stringify(transfer)} is not supported: send the body uncompressed, with a Content-Length or Transfer-Encoding: chunked alone.`);
  const charsets = charsetsOf(headers['content-type']);
  // Two (`charset=utf-8; charset=latin1`): the first was taken until 2026-11-30, where another reader may take the last (a security review).
  if (charsets.length > 1) return new HttpError(415, `The Content-Type has ${charsets.length} charset parameters: send one, UTF-8, or none.`);
  const charset = charsets[0];
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return new HttpError(415, `Unsupported charset: ${kind} bodies must be UTF-8.`);
  return undefined;
}

/** The body as text: UTF-8 by its headers (refusedByHeaders) and by its bytes, strictly, else the HttpError. */
function utf8Text(request: FastifyRequest, bytes: Buffer, kind: 'JSON' | 'form'): string | HttpError {
  const refused = refusedByHeaders(request.headers, kind);
  if (refused) return refused;
  try {
    // Strict: invalid bytes are an error, not U+FFFD stored in place of what was meant.
    return STRICT_UTF8.decode(bytes);
  } catch {
    return new HttpError(400, 'The request body is not valid UTF-8.');
  }
}

/** A JSON body of nothing but JSON's whitespace (space, tab, LF, CR). */
const JSON_WHITESPACE_ONLY = /^[ \t\n\r]*$/;

/** The JSON and form parsers (the body's limit is boundBody's; both within the app-wide bodyLimit, DRAIN_LIMIT). */
export function registerBodyParsing(app: FastifyInstance): void {
  app.removeAllContentTypeParsers(); // no text/plain, no guessing: JSON and forms only

  app.addContentTypeParser(FORM_TYPE, { parseAs: 'buffer' }, (request, bytes, done) => {
    const text = utf8Text(request, bytes as Buffer, 'form');
    if (text instanceof HttpError) return done(text, undefined);
    try {
      done(null, parseForm(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.addContentTypeParser(JSON_TYPE, { parseAs: 'buffer' }, (request, bytes, done) => {
    const text = utf8Text(request, bytes as Buffer, 'JSON');
    if (text instanceof HttpError) return done(text, undefined);
    // JSON's own whitespace only: String.prototype.trim also took a second byte-order mark (the decoder
    // takes one), no-break spaces and U+2028 round the body (a review). secure-json-parse would take a BOM too.
    if (JSON_WHITESPACE_ONLY.test(text)) return done(null, {}); // an empty JSON body is an empty object, as in Laravel
    if (text.charCodeAt(0) === 0xfeff) return done(new HttpError(400, 'The request body is not valid JSON.'), undefined);
    let body: unknown;
    try {
      body = sjson.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' });
    } catch {
      return done(new HttpError(400, 'The request body is not valid JSON.'), undefined);
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return done(new HttpError(400, 'The request body must be a JSON object.'), undefined);
    }
    done(null, body);
  });
}
