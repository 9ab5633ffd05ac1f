// Idempotency keys on create, after the IETF "Idempotency-Key HTTP Header Field" draft and
// Stripe's practice: a retried request with the same key gets the first answer again.
import { hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NewDonation } from '../donations/donation.js';
import { VALUE_WHEN_ABSENT } from '../donations/validate.js';
import { headerCount, HttpError } from './errors.js';

export const IDEMPOTENCY = {
  /** A key is remembered this long. */
  ttlMicros: 24 * 3600 * 1_000_000,
};

/**
 * What an Idempotency-Key may be: 1 to 255 printable ASCII characters, the first and last not a
 * space (HTTP drops a header value's spaces at either end, so ' x ' would arrive as 'x', and ' ' as nothing).
 */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/;

/** The request's Idempotency-Key, undefined without one; a malformed key is a 400. */
export function idempotencyKeyOf(request: Pick<IncomingMessage, 'headers' | 'rawHeaders'>): string | undefined {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  // Node joins repeated headers with ", ": two keys were taken as the one key "a1, a2". rawHeaders
  // can hold a few more lines than headers (up to 1,023 of them, against Node's limit of 1,000): a second
  // key past that limit is counted too, a 400 where headersDistinct took the first key alone.
  if (headerCount(request.rawHeaders, 'idempotency-key') > 1) throw new HttpError(400, 'Send one Idempotency-Key header, not several.');
  if (typeof raw !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(raw)) {
    throw new HttpError(400, 'The Idempotency-Key header must be 1 to 255 printable ASCII characters.');
  }
  return raw;
}

/**
 * What "the same body" means: the same donation once validated. Fields Almoner ignores do not
 * count, nor do fields holding what validation makes of them when they are not sent (null; false
 * for a flag), so a field added to the table later, of any kind, leaves the fingerprint of a body
 * that does not send it unchanged; `10` and `"10"` are the same amount only if they come back the same.
 */
export function fingerprint(d: NewDonation): string {
  return RULE + unmarkedFingerprint(d);
}

/**
 * Which rule made a stored fingerprint: this one's are marked with it, so a key stored by this
 * version is compared with this rule's fingerprint alone, never with an earlier version's. Without
 * the mark, a field added to the table later could make a body that sends it look like an earlier
 * version's form of a body that did not, and replay that donation for it: with every flag true,
 * the fingerprint of 2026-11-27 over FORMER_KEYS is this rule's for the body without the new field.
 */
const RULE = 'v2:';

/** This rule's fingerprint without its mark, as the version before 2026-11-28 stored it. */
function unmarkedFingerprint(d: NewDonation): string {
  // The donation without those values, then JSON.stringify's own path: with a replacer function it
  // calls back for every field, 1.25 against 0.8 µs for the JSON of the benchmark's donation.
  const valued: Record<string, unknown> = {};
  for (const name in d) {
    const value = d[name as keyof NewDonation];
    if (value !== VALUE_WHEN_ABSENT.get(name)) valued[name] = value;
  }
  return sha256(JSON.stringify(valued));
}

/**
 * The keys the fingerprints of earlier versions hashed, in their order (Almoner 0.1's, and the
 * rule until 2026-11-27; no field was added between the two): a fact of those releases, not of the
 * field table, so it is stated here and never follows the table. A field added since must not
 * change what a key stored by them is compared with, even one whose unsent value is not null.
 */
const FORMER_KEYS = [
  'donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'donor_ip',
  'gift_aid', 'amount', 'amount_minor', 'payment_method', 'payment_confirmation_number', 'donation_type', 'donation_date', 'zakat_donation',
] as const;

/**
 * The fingerprints earlier versions stored for the same body, none of them marked, so that a key
 * stored before an upgrade still replays after it: this rule's unmarked (2026-11-27 to 28); until
 * 2026-11-27, nulls left out but an unsent flag's false counted; and Almoner 0.1's, nulls included.
 * The last two over FORMER_KEYS only. A key stored by this version is marked (RULE), so it never
 * equals one of these. Keys live 24 hours, so these can go in the release after next.
 */
export function formerFingerprints(d: NewDonation): string[] {
  const valued: Record<string, unknown> = {};
  for (const name of FORMER_KEYS) {
    const value = d[name];
    if (value !== null) valued[name] = value;
  }
  return [unmarkedFingerprint(d), sha256(JSON.stringify(valued)), sha256(JSON.stringify(d, [...FORMER_KEYS]))]; // an array replacer keeps those keys, in its order
}

const sha256 = (text: string) => hash('sha256', text, 'hex'); // the one-shot form: no Hash object per key

export function inFlight(): HttpError {
  return new HttpError(409, 'A request with this Idempotency-Key is still in progress. Retry it in a moment.');
}
