// One gift recorded twice: the integration sent it again under another Idempotency-Key, or with
// none, after a timeout or a retry of its own. Both records are valid donations, with ids of their
// own, so the ledger's rule (no donation in two live claims) let both be claimed, and HMRC, whose
// checker reads each row alone, would have paid Gift Aid on the one gift twice (until 2026-11-29; a
// review staged 14 gifts sent twice and had 12 pairs in one claim). Pure.
import { foldEmail, type StoredDonation } from '../donations/donation.js';
import { ERASED_EMAIL } from '../donations/erasure.js';
import { donationDay } from './schedule.js';

/** What tells one gift from another. */
export type GiftFacts = Pick<
  StoredDonation,
  'id' | 'payment_confirmation_number' | 'donor_email' | 'donor_first_name' | 'donor_last_name' | 'donor_address' | 'donor_postcode' | 'amount_minor' | 'donation_date'
>;

/**
 * Which of the candidates seem to record again a gift that an earlier donation (a lower id) among
 * `donations` (the charity's, on the candidates' days) recorded: the same donor (e-mail address in
 * any case, names, address and postcode, as a retry sends them again), on the same UK day, for the
 * same amount, and not two different payment_confirmation_numbers (two references are two
 * payments, however alike). A payment reference alone is not enough: an integration may send the
 * same placeholder ("N/A", "cash") with every gift. A donor may truly give twice in a day: the later
 * gift is left for a person to claim by hand, as claiming one gift twice is HMRC's money to pay back.
 */
export async function twinsAmong(
  candidates: Iterable<GiftFacts>,
  donations: AsyncIterable<GiftFacts> | Iterable<GiftFacts>,
): Promise<(d: GiftFacts) => number | undefined> {
  /** By donor and gift, for the candidates' alone (so memory holds no more than they): the lowest id, and the lowest id of each payment reference (none as ''). */
  const seen = new Map<string, { first: number; byReference: Map<string, number> }>();
  for (const d of candidates) {
    const key = donorKey(d);
    if (key !== undefined) seen.set(key, { first: Infinity, byReference: new Map() });
  }
  for await (const d of donations) {
    const key = donorKey(d);
    const entry = key === undefined ? undefined : seen.get(key);
    if (entry === undefined) continue;
    const id = Number(d.id);
    entry.first = Math.min(entry.first, id);
    const ref = reference(d);
    entry.byReference.set(ref, Math.min(entry.byReference.get(ref) ?? id, id));
  }
  return (d) => {
    const key = donorKey(d);
    const entry = key === undefined ? undefined : seen.get(key);
    if (entry === undefined) return undefined;
    const id = Number(d.id);
    const ref = reference(d);
    // Without a reference, any earlier record of the gift; with one, an earlier record with the same one or none.
    const candidates = ref === '' ? [entry.first] : [entry.byReference.get(ref), entry.byReference.get('')];
    const earlier = candidates.filter((other): other is number => other !== undefined && other < id);
    return earlier.length === 0 ? undefined : Math.min(...earlier);
  };
}

const reference = (d: GiftFacts): string => d.payment_confirmation_number ?? '';

const SPACES = /\s+/g;

/**
 * The donor as sent (the e-mail address folded, foldEmail; the names, address and postcode in lower
 * case, their spaces aside) and the gift (UK day, amount); none once erased.
 */
function donorKey(d: GiftFacts): string | undefined {
  if (d.donor_email === ERASED_EMAIL) return undefined;
  const text = (n: string | null) => (n === null ? '' : n.normalize('NFC').replace(SPACES, '').toLowerCase());
  // Joined by a character no value holds (a NUL is refused in every field): cheaper than JSON, read a million times in a first claim.
  return `${donationDay(d.donation_date)}\0${d.amount_minor}\0${foldEmail(d.donor_email)}\0${text(d.donor_first_name)}\0${text(d.donor_last_name)}\0${text(d.donor_address)}\0${text(d.donor_postcode)}`;
}
