// almoner/client: a typed client for Almoner's HTTP interface (POST /api/v1/me and
// POST /api/v1/donation/create). No runtime dependencies: it uses the global fetch of Node 18+
// (or a browser's, from the server's own origin: it sends no CORS headers), or the one it is given. The record type is the server's own, so the two cannot drift.
import type { DonationInput, DonationRecord, DonationType } from '../donations/donation.js';
import {
  AlmonerError,
  AuthenticationError,
  ConflictError,
  NetworkError,
  RateLimitError,
  TimeoutError,
  UnavailableError,
  ValidationError,
} from './errors.js';

/**
 * DonationInput is a donation to record: the interface's fields as the service accepts them, the
 * required ones required (each field's rules are in the OpenAPI document, /api/v1/openapi.json). Text
 * fields may be omitted or `null` (the record then has `null`); unknown fields are ignored. Prefer
 * strings for `amount`: a string is echoed exactly. `zakat_donation` takes what the service takes:
 * a boolean, 0 or 1, or yes/no, true/false, 1/0 or on as text (typed in lower case; the service
 * takes any case). DonationRecord is the record the service returns.
 * Both are the server's own types, derived from its field table, so the client cannot drift.
 */
export type { DonationInput, DonationRecord, DonationType };
export * from './errors.js';

export interface AlmonerClientOptions {
  /**
   * Where the service runs: its root, e.g. `http://127.0.0.1:3000` or `https://almoner.example/some/prefix`.
   * A trailing `/api/v1` (and trailing slashes) is tolerated: `http://127.0.0.1:3000/api/v1` is the same service.
   */
  baseUrl: string | URL;
  /** The charity's username, as `bin/almoner charity create` printed it. */
  username: string;
  /** The charity's password. */
  password: string;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch | undefined;
  /**
   * Milliseconds to wait for a complete answer before a TimeoutError; 30,000 by default.
   * `Infinity` waits for ever.
   */
  timeoutMs?: number | undefined;
}

export interface RequestOptions {
  /** Aborts the call; it then rejects with the signal's reason, as fetch does. */
  signal?: AbortSignal | undefined;
}

export interface CreateDonationOptions extends RequestOptions {
  /**
   * 1 to 255 printable ASCII characters, e.g. `crypto.randomUUID()`: a retry with the same key
   * and the same donation gets the first answer again (`replayed: true`) instead of recording a
   * second donation. Keys are remembered for 24 hours.
   */
  idempotencyKey?: string | undefined;
}

/** Who the credentials belong to, as `me()` returns it. */
export interface CharityIdentity {
  name: string;
  email: string;
}

export interface CreatedDonation {
  /** The donation as stored, exactly as the service returned it (every field). */
  record: DonationRecord;
  /**
   * True when this answer replays an earlier request with the same idempotencyKey: no new
   * donation was recorded, and `record` is the one the first request stored.
   */
  replayed: boolean;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_TIMER_MS = 2 ** 31 - 1; // setTimeout's limit: a larger delay would fire at once
/** As the server's (http/idempotency.ts): no space at either end, which HTTP would drop. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/;

export class AlmonerClient {
  /** The API's root the client calls, e.g. `http://127.0.0.1:3000/api/v1`. */
  readonly apiUrl: string;
  readonly #authorization: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;

  constructor(options: AlmonerClientOptions) {
    const { baseUrl, username, password, timeoutMs = DEFAULT_TIMEOUT_MS } = options;
    this.apiUrl = apiUrlOf(baseUrl);
    if (typeof username !== 'string' || username === '' || username.includes(':')) {
      throw new TypeError('AlmonerClient: username must be a non-empty string without ":".');
    }
    if (typeof password !== 'string') throw new TypeError('AlmonerClient: password must be a string.');
    if (!(timeoutMs === Infinity || (typeof timeoutMs === 'number' && timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS))) {
      throw new TypeError(`AlmonerClient: timeoutMs must be a number of milliseconds from 1 to ${MAX_TIMER_MS}, or Infinity.`);
    }
    this.#authorization = basicAuthorization(username, password);
    // Called as a plain function: a browser's fetch refuses to run with another `this`.
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#timeoutMs = timeoutMs;
  }

  /** "Test Connection": checks the credentials and returns the charity's name and e-mail. */
  async me(options: RequestOptions = {}): Promise<CharityIdentity> {
    const { body, response } = await this.#post('/me', undefined, {}, options.signal);
    const data = isObject(body) ? body.data : undefined;
    if (!isObject(data) || typeof data.name !== 'string' || typeof data.email !== 'string') {
      throw unexpected(`${this.apiUrl}/me`, response, body);
    }
    return { name: data.name, email: data.email };
  }

  /**
   * Records a donation; resolves once it is committed to the service's database. Rejects with a
   * ValidationError (422) naming every failing field, an AuthenticationError (401), a
   * RateLimitError (429), a ConflictError (409, the same idempotencyKey still in progress), an
   * UnavailableError (503), a NetworkError or TimeoutError (no answer), or an AlmonerError.
   */
  async createDonation(input: DonationInput, options: CreateDonationOptions = {}): Promise<CreatedDonation> {
    const { idempotencyKey, signal } = options;
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (idempotencyKey !== undefined) {
      if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
        throw new TypeError('createDonation: idempotencyKey must be 1 to 255 printable ASCII characters, with no space at either end.');
      }
      headers['Idempotency-Key'] = idempotencyKey;
    }
    const { body, response } = await this.#post('/donation/create', JSON.stringify(input), headers, signal, idempotencyKey === undefined ? 'unkeyed' : 'keyed');
    const record = isObject(body) ? body.data : undefined;
    if (!isObject(record) || typeof record.id !== 'number') throw unexpected(`${this.apiUrl}/donation/create`, response, body);
    return {
      record: record as unknown as DonationRecord,
      replayed: response.headers.get('idempotent-replayed') === 'true',
    };
  }

  async #post(
    path: string,
    payload: string | undefined,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    /** Whether the call may record something (a create), and with an idempotencyKey or without. */
    records: 'no' | 'keyed' | 'unkeyed' = 'no',
  ): Promise<{ response: Response; body: unknown }> {
    const url = `${this.apiUrl}${path}`;
    // One controller of the call's own, aborted by its deadline or by the caller's signal. Not
    // AbortSignal.any: on Node 20 it keeps every signal it made alive for as long as a signal given
    // to it lives, so an app-wide shutdown signal passed to every call held about 60 bytes a call
    // for good (nodejs/node#55351; a review, 2026-11-29).
    const controller = new AbortController();
    let timedOut = false;
    const timer =
      this.#timeoutMs === Infinity
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
          }, this.#timeoutMs);
    const abortWithCaller = () => controller.abort(signal!.reason);
    if (signal?.aborted) abortWithCaller();
    else signal?.addEventListener('abort', abortWithCaller, { once: true });
    // Only a key makes the retry of a create whose answer never came safe: without one, say so.
    const outcome = OUTCOME[records];
    const doFetch = this.#fetch;
    let response: Response;
    let text: string;
    try {
      response = await doFetch(url, {
        method: 'POST',
        // X-Requested-With: a 401 is then challenged with XBasic, not Basic, so that a browser (from the
        // server's own origin) hands it to the caller as an AuthenticationError instead of covering the
        // page with its login dialog, and resending the request with whatever is typed there (a review).
        headers: { Accept: 'application/json', Authorization: this.#authorization, 'X-Requested-With': 'XMLHttpRequest', ...headers },
        ...(payload === undefined ? {} : { body: payload }),
        // A redirect is reported, not followed: following one could resend the donation elsewhere.
        redirect: 'manual',
        signal: controller.signal,
      });
      text = await response.text(); // under the same deadline as the headers
    } catch (err) {
      if (signal?.aborted) throw err; // the caller's own abort is theirs to handle
      if (timedOut) {
        throw new TimeoutError(`No answer from ${url} within ${this.#timeoutMs} ms.${outcome}`, { status: 0, cause: err });
      }
      throw new NetworkError(`Could not reach ${url}: ${reason(err)}.${outcome}`, { status: 0, cause: err });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abortWithCaller);
    }

    const body = parseBody(text);
    if (response.status >= 200 && response.status < 300) return { response, body };
    throw errorFor(url, response, body, outcome);
  }
}

/** What a caller is told of a call whose answer never came, or came from a gateway: whether it may have recorded something. */
const OUTCOME = {
  no: '',
  keyed: ' The donation may or may not have been recorded: retry with the same idempotencyKey.',
  unkeyed:
    ' The donation may or may not have been recorded, and it was sent without an idempotencyKey: a retry may record it twice. Check before retrying, and send an idempotencyKey with every create.',
} as const;

/** The API root from a service root, tolerating a trailing `/api/v1` and slashes. */
function apiUrlOf(baseUrl: string | URL): string {
  let url: URL;
  try {
    url = new URL(String(baseUrl));
  } catch {
    throw new TypeError(`AlmonerClient: baseUrl is not a URL: ${String(baseUrl)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('AlmonerClient: baseUrl must be http: or https:.');
  if (url.username || url.password) throw new TypeError('AlmonerClient: give the credentials as username and password, not in baseUrl.');
  if (url.search || url.hash) throw new TypeError('AlmonerClient: baseUrl must not have a query string or fragment.');
  const path = url.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
  return `${url.origin}${path}/api/v1`;
}

/** HTTP Basic credentials, UTF-8 encoded as the service expects (RFC 7617, charset="UTF-8"). */
function basicAuthorization(username: string, password: string): string {
  let binary = '';
  for (const byte of new TextEncoder().encode(`${username}:${password}`)) binary += String.fromCharCode(byte);
  return `Basic ${btoa(binary)}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Why fetch failed, from its cause chain (Node's "fetch failed" says nothing by itself). */
function reason(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) parts.push(e.message);
  return parts.at(-1) ?? String(err);
}

/**
 * The longest wait a Retry-After is taken to ask for: Almoner's own ask for a minute at most, and a
 * larger one (a proxy's, or a server's whose clock jumped) became a wait nobody meant, or, past
 * 2^31 ms, a setTimeout that fired at once: `99999…` gave 1e23 (a review).
 */
export const MAX_RETRY_AFTER_SECONDS = 3600;

/** Seconds from a Retry-After header (seconds or an HTTP date), at most MAX_RETRY_AFTER_SECONDS; 1 when missing or unreadable. */
function retryAfterSeconds(header: string | null): number {
  const value = header?.trim() ?? '';
  const when = Date.parse(value);
  const seconds = /^\d+$/.test(value) ? Number(value) : Number.isNaN(when) ? 1 : Math.max(0, Math.ceil((when - Date.now()) / 1000));
  return Math.min(seconds, MAX_RETRY_AFTER_SECONDS);
}

function fieldErrors(value: unknown): Record<string, string[]> {
  const errors: Record<string, string[]> = {};
  if (!isObject(value)) return errors;
  for (const [field, messages] of Object.entries(value)) {
    if (Array.isArray(messages)) errors[field] = messages.filter((m): m is string => typeof m === 'string');
  }
  return errors;
}

function errorFor(url: string, response: Response, body: unknown, outcome: string): AlmonerError {
  const { status } = response;
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const details = { status, body, requestId };
  if (response.type === 'opaqueredirect' || (status >= 300 && status < 400)) {
    const location = response.headers.get('location');
    return new AlmonerError(
      `${url} answered with a redirect${location ? ` to ${location}` : ''}; point baseUrl at the service itself.`,
      details,
    );
  }
  const message =
    isObject(body) && typeof body.message === 'string'
      ? body.message
      : `${url} answered HTTP ${status}${response.statusText ? ` ${response.statusText}` : ''}.`;
  switch (status) {
    case 401:
      return new AuthenticationError(message, details);
    case 409:
      return new ConflictError(message, details);
    case 422:
      return new ValidationError(message, { ...details, errors: fieldErrors(isObject(body) ? body.errors : undefined) });
    case 429:
      return new RateLimitError(message, { ...details, retryAfterSeconds: retryAfterSeconds(response.headers.get('retry-after')) });
    case 503:
      return new UnavailableError(message, { ...details, retryAfterSeconds: retryAfterSeconds(response.headers.get('retry-after')) });
    // A gateway in front (the shipped nginx) that could not reach the service, or gave up waiting: come back
    // later, as for a 503, though a create may have been stored before its answer was lost (until 2026-11-29 a
    // plain AlmonerError, which a caller retrying UnavailableErrors took for a failure for good).
    case 502:
    case 504:
      return new UnavailableError(`${message}${outcome}`, { ...details, retryAfterSeconds: retryAfterSeconds(response.headers.get('retry-after')) });
    default:
      return new AlmonerError(message, details);
  }
}

function unexpected(url: string, response: Response, body: unknown): AlmonerError {
  const { status } = response;
  const requestId = response.headers.get('x-request-id') ?? undefined;
  return new AlmonerError(`${url} answered ${status} with a body that is not Almoner's; is baseUrl right?`, { status, body, requestId });
}
