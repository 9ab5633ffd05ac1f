// The client's errors: one class per answer a caller may want to handle apart, all AlmonerErrors.

export interface AlmonerErrorDetails {
  /** The HTTP status; 0 when no answer arrived (NetworkError, TimeoutError). */
  status: number;
  /** The answer's body: parsed JSON when it was JSON, else its text; undefined without one. */
  body?: unknown;
  /** The answer's X-Request-Id, to quote to the operator: it names the request in the server's log. */
  requestId?: string | undefined;
  cause?: unknown;
}

/**
 * Anything that went wrong with a call. A status without a class of its own (400, 404, 405, 413,
 * 415, 500, an unexpected redirect...) is a plain AlmonerError; `message` is the server's own
 * message when it sent one.
 */
export class AlmonerError extends Error {
  override name: string = 'AlmonerError';
  readonly status: number;
  readonly body: unknown;
  readonly requestId: string | undefined;

  constructor(message: string, details: AlmonerErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.status = details.status;
    this.body = details.body;
    this.requestId = details.requestId;
  }
}

/** 401: the username or password is wrong, or the charity is disabled. */
export class AuthenticationError extends AlmonerError {
  override name: string = 'AuthenticationError';
}

/**
 * 422: the donation failed validation. `errors` names every failing field with its messages,
 * e.g. `{ donor_email: ['The donor email is required.'] }`. An idempotencyKey reused for a
 * different donation is one too, under `errors.idempotency_key`.
 */
export class ValidationError extends AlmonerError {
  override name: string = 'ValidationError';
  readonly errors: Record<string, string[]>;

  constructor(message: string, details: AlmonerErrorDetails & { errors: Record<string, string[]> }) {
    super(message, details);
    this.errors = details.errors;
  }
}

/** 409: the first request with this idempotencyKey is still in progress; retry it in a moment. */
export class ConflictError extends AlmonerError {
  override name: string = 'ConflictError';
}

/** An answer that says to come back later: `retryAfterSeconds` from Retry-After (1 if it had none). */
export class RetryLaterError extends AlmonerError {
  override name: string = 'RetryLaterError';
  readonly retryAfterSeconds: number;

  constructor(message: string, details: AlmonerErrorDetails & { retryAfterSeconds: number }) {
    super(message, details);
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/**
 * 429: too many donations too quickly for this charity, or too many failed authentications from
 * this address. Wait `retryAfterSeconds` before retrying.
 */
export class RateLimitError extends RetryLaterError {
  override name: string = 'RateLimitError';
}

/**
 * 503: the service's database cannot answer right now; or 502 or 504 from a gateway in front of it
 * (the shipped nginx, while the service is down or too slow). The request was not acknowledged. A
 * create may still have been stored when the database did not confirm its commit (common while the
 * database stalls under load), and the message then says so ("The database did not confirm whether
 * this donation was stored…"); for a gateway's 502 or 504, this client adds to the message that the
 * donation may or may not have been recorded. Retry a create after `retryAfterSeconds` with the
 * same idempotencyKey, never without one.
 */
export class UnavailableError extends RetryLaterError {
  override name: string = 'UnavailableError';
}

/**
 * No answer: the connection was refused, reset, or failed (DNS, TLS...). `cause` holds the
 * underlying error. A createDonation that fails this way may or may not have been recorded:
 * retry it with the same idempotencyKey (one sent without a key may be recorded twice by a retry).
 */
export class NetworkError extends AlmonerError {
  override name: string = 'NetworkError';
}

/** No complete answer within `timeoutMs`. As with NetworkError, retry a create with the same idempotencyKey. */
export class TimeoutError extends NetworkError {
  override name: string = 'TimeoutError';
}
