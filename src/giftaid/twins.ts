// One gift recorded twice: the integration sent it again under another Idempotency-Key, or with
// none, after a timeout or a retry of its own. Both records are valid donations, with ids of their
// own, so the ledger's rule (no donation in two live claims) let both be claimed, and HMRC, whose
// checker reads each row alone, would have paid Gift Aid on the one gift twice (until 2026-11-29; a
// review staged 14 gifts sent twice and had 12 pairs in one claim). Pure.
import { foldEmail, type StoredDonation } from '../donations/donation.js';
import { ERASED_EMAIL } from '../donations/erasure.js';
import { donationDay, hmrcLastName, hmrcPostcode, houseNameOrNumber, matchableFirstName, matchablePostcode } from './schedule.js';

/** What tells one gift from another: the columns read of every donation of the candidates' days (ClaimLedger.dated). */
export const GIFT_FACTS = [
  'id',
  'payment_confirmation_number',
  'donor_email',
  'donor_first_name',
  'donor_last_name',
  'donor_address',
  'donor_city',
  'donor_postcode',
  'amount_minor',
  'donation_date',
  'recorded_at',
  'gift_aid',
] as const satisfies ReadonlyArray<keyof StoredDonation>;
export type GiftFacts = Pick<StoredDonation, (typeof GIFT_FACTS)[number]> & {
  /** In a live claim already (ClaimLedger.dated says): the first record of its gift whatever its id. */
  claimed?: boolean;
};

/**
 * How far apart two gifts sent without a date (each dated the moment it was recorded) may be
 * recorded, across a UK midnight, to be one gift sent again: a retry after a timeout comes within
 * seconds or minutes, but lands on the next day if it crosses midnight (claimed twice until
 * 2026-11-29: a review's retry 3 s after 23:59:58). Within one UK day the day alone tells, as for
 * gifts sent with their date.
 */
export const RETRY_ACROSS_MIDNIGHT_MS = 3_600_000; // an hour

/**
 * Which of the candidates seem to record again a gift that an earlier Gift Aid donation (a lower id, or one in a live claim already) among
 * `donations` (the charity's, on the candidates' days and within RETRY_ACROSS_MIDNIGHT_MS of them)
 * recorded: the same donor as HMRC's schedule
 * tells one (the names, the house and the postcode, as the schedule reads them, in any case: what a
 * donor's erasure keeps, so a gift recorded twice is told after its donor is erased too, where
 * until a review it was not, and was claimed twice) and the same e-mail address (in any case) unless
 * either was erased, on the same UK day (or, both sent without a date, recorded within
 * RETRY_ACROSS_MIDNIGHT_MS of each other), for the same amount, and
 * not two different payment_confirmation_numbers (two references are two
 * payments, however alike). A payment reference alone is not enough: an integration may send the
 * same placeholder ("N/A", "cash") with every gift. A donor may truly give twice in a day: the later
 * gift is left for a person to claim by hand, as claiming one gift twice is HMRC's money to pay back.
 */
export async function twinsAmong(
  candidates: Iterable<GiftFacts>,
  donations: AsyncIterable<GiftFacts> | Iterable<GiftFacts>,
): Promise<(d: GiftFacts) => Twin | undefined> {
  const twins = new TwinFinder();
  for (const d of candidates) twins.add(d);
  await twins.read(donations);
  return (d) => twins.twinOf(d);
}

/** What a record found under a candidate's key holds (TwinFinder). */
interface GiftRecord {
  id: number;
  reference: string;
  email: string;
  at: number;
  claimed: boolean;
}

/** What TwinFinder keeps of a candidate: its keys (donorKeys), read once, and what tells its gift from another's. */
interface Candidate {
  keys: string[];
  reference: string;
  email: string;
  at: number;
}

/**
 * twinsAmong in steps, for candidates found a few at a time (`giftaid claim` assesses its donations a
 * batch at a time, and keeps none of them whole: a scale review, 2026-11-30, had a claim of 630,000
 * keep every donation until its twins were found, 1.7 GB): add() each candidate, read() the
 * donations, then twinOfCandidate() by id, from what add() kept (its keys, reference, e-mail address
 * and when it was recorded), or twinOf() with the donation.
 */
export class TwinFinder {
  /**
   * By donor and gift, for the candidates' keys alone (so memory holds no more than they): the records
   * found, each with its reference, e-mail address and when it was recorded. A gift sent without a
   * date near a UK midnight is also under a key without its day (UNDATED), where the records are told
   * by their times.
   */
  private readonly seen = new Map<string, GiftRecord[]>();
  private readonly gifts = new Set<string>();
  /** Each candidate's donor, read once (a house is read from an address in about 10 µs; a first claim may have 100,000 candidates). */
  private readonly candidates = new Map<number, Candidate>();

  add(d: GiftFacts): void {
    const ofGift = giftKeys(d);
    const keys = donorKeys(d, ofGift);
    this.candidates.set(Number(d.id), { keys, reference: reference(d), email: email(d), at: Date.parse(d.recorded_at) });
    for (const key of keys) this.seen.set(key, NONE_YET);
    for (const key of ofGift) this.gifts.add(key);
  }

  async read(donations: AsyncIterable<GiftFacts> | Iterable<GiftFacts>): Promise<void> {
    for await (const d of donations) {
      // A record without Gift Aid is never claimed: the gift it records again is claimed once by claiming
      // the other (a gift sent again with gift_aid "yes", to add it, was set aside as claimed: a review).
      if (!d.gift_aid) continue;
      // The donor read (a house read from the address) only for a gift of a candidate's day, amount and last name.
      const ofGift = giftKeys(d);
      if (!ofGift.some((key) => this.gifts.has(key))) continue;
      const record = { id: Number(d.id), reference: reference(d), email: email(d), at: Date.parse(d.recorded_at), claimed: d.claimed === true };
      for (const key of this.keysOf(d, ofGift)) {
        const records = this.seen.get(key);
        if (records === NONE_YET) this.seen.set(key, [record]);
        else records?.push(record);
      }
    }
  }

  /** The earlier record of the gift candidate `id` (one add() was given) records again, if any. */
  twinOfCandidate(id: number): Twin | undefined {
    const c = this.candidates.get(id);
    if (c === undefined) throw new RangeError(`donation ${id} is not a candidate`);
    return this.first(id, c.reference, c.email, c.at, c.keys);
  }

  /** The earlier record of the gift `d` records again, if any. */
  twinOf(d: GiftFacts): Twin | undefined {
    return this.first(Number(d.id), reference(d), email(d), Date.parse(d.recorded_at), this.keysOf(d));
  }

  private keysOf(d: GiftFacts, ofGift = giftKeys(d)): string[] {
    return this.candidates.get(Number(d.id))?.keys ?? donorKeys(d, ofGift);
  }

  private first(id: number, ref: string, address: string, at: number, [sameDay, undated]: string[]): Twin | undefined {
    const first = (records: GiftRecord[]) => {
      const earlier = records.filter(
        (other) =>
          // A record in a live claim is the first, whatever its id: on PostgreSQL a record stalled after taking its id (a
          // retry sent meanwhile, and claimed) commits with the lower one, and was claimed again (a review of 2026-11-30).
          (other.id < id || (other.claimed && other.id !== id)) &&
          // Two references are two payments; two e-mail addresses two people (a couple, a parent and child at one house), unless one was erased.
          (ref === '' || other.reference === '' || other.reference === ref) &&
          (address === ERASED || other.email === ERASED || other.email === address),
      );
      return earlier.length === 0 ? undefined : Math.min(...earlier.map((other) => other.id));
    };
    const onItsDay = first(this.seen.get(sameDay!) ?? []);
    const nearby = undated === undefined ? undefined : first((this.seen.get(undated) ?? []).filter((other) => Math.abs(other.at - at) <= RETRY_ACROSS_MIDNIGHT_MS));
    if (onItsDay !== undefined && (nearby === undefined || onItsDay <= nearby)) return { id: onItsDay, acrossMidnight: false };
    return nearby === undefined ? undefined : { id: nearby, acrossMidnight: true };
  }
}

/**
 * A candidate's key no record has been found under yet: one array for them all, never pushed to (TwinFinder gives a key its own
 * array with its first record). An empty array of its own took about 150 bytes a key once pushed to (V8 gives it room for 17),
 * nearly every key holding one record, the candidate's own (a scale review).
 */
const NONE_YET: never[] = Object.freeze([]) as never[];

/** The earlier donation a candidate records again: on its UK day, or, sent without a date, on the day before or after, recorded within RETRY_ACROSS_MIDNIGHT_MS of it. */
export interface Twin {
  id: number;
  acrossMidnight: boolean;
}

/** The day of a gift sent without a date in its keys: none, as it is told by when it was recorded. NUL-free, and no day. */
const UNDATED = 'undated';

/** Sent without a date: stored as the moment it was recorded (store/rows.ts). */
const isUndated = (d: GiftFacts): boolean => d.donation_date === d.recorded_at;

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Whether a gift sent without a date was recorded near enough a UK midnight (00:00 UTC in winter,
 * 23:00 UTC in summer) for a retry to cross it: a band of UTC hours that holds both, read from the
 * instant alone (no time zone's rules, for each of a million donations). Only such gifts are also
 * looked for across days; every one was, in the first version, which took twice as long (a review:
 * 41 s against 19 s for 300,000 candidates among 1,000,000 donations).
 */
function nearUkMidnight(d: GiftFacts): boolean {
  const hourOfDay = (((Date.parse(d.recorded_at) % DAY_MS) + DAY_MS) % DAY_MS) / HOUR_MS;
  return hourOfDay >= 23 - RETRY_ACROSS_MIDNIGHT_MS / HOUR_MS || hourOfDay <= RETRY_ACROSS_MIDNIGHT_MS / HOUR_MS;
}

const ERASED = foldEmail(ERASED_EMAIL);
const email = (d: GiftFacts): string => foldEmail(d.donor_email);

const reference = (d: GiftFacts): string => d.payment_confirmation_number ?? '';

/** The gift, and the donor's last name: UK day, amount, the last name as the schedule reads it. Joined by a NUL, which no value holds. */
const giftKey = (d: GiftFacts, day: string): string => `${day}\0${d.amount_minor}\0${hmrcLastName(d.donor_last_name).toLowerCase()}`;

/** A gift's keys: by its UK day, and, sent without a date near a UK midnight, by none (UNDATED). */
export const giftKeys = (d: GiftFacts): string[] =>
  isUndated(d) && nearUkMidnight(d) ? [giftKey(d, donationDay(d.donation_date)), giftKey(d, UNDATED)] : [giftKey(d, donationDay(d.donation_date))];

/** The gift and the donor as HMRC's schedule tells them, under each of the gift's keys (giftKeys): with the first name, the house (spaces aside) and the postcode as read for it. */
function donorKeys(d: GiftFacts, ofGift: string[]): string[] {
  const house = houseNameOrNumber(d.donor_address, d).replace(/\s+/g, '').toLowerCase();
  const donor = `\0${matchableFirstName(d.donor_first_name, d.donor_last_name)}\0${house}\0${matchablePostcode(hmrcPostcode(d.donor_postcode).value)}`;
  return ofGift.map((gift) => `${gift}${donor}`);
}
