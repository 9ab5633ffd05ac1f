// Erasing a donor's personal data (UK GDPR Article 17), and how long a gift-aided donation's must
// first be kept (Article 17(3)(b): a legal obligation). HMRC requires Gift Aid records for six
// years after the end of the charity's accounting period; Almoner does not know each charity's
// period, so it counts six years from the end of the UK tax year (5 April) of the donation's day.
// Which fields are personal, and what erasing each does, is the field table's (fields.ts).
import { donationDay, houseNameOrNumber } from '../giftaid/schedule.js';
import { DONATION_FIELDS, type StoredDonation } from './fields.js';
import { dayIso } from '../time.js';

export const GIFT_AID_RETENTION_YEARS = 6;

/** What an erased value becomes where the field may not be empty (the donor's e-mail address): an address that can never be delivered to (RFC 2606). */
export const ERASED_EMAIL = 'erased@erased.invalid';

type Field = (typeof DONATION_FIELDS)[number];
type Personal = Extract<Field, { readonly erasure: string }>;

/** The personal fields, in the table's order. */
export const PERSONAL_FIELDS = DONATION_FIELDS.filter((f): f is Personal => 'erasure' in f);

type PersonalField = Personal['name'];

/** The last day (YYYY-MM-DD) a gift-aided donation on `day` must be kept: 5 April, six tax years on. */
export function giftAidKeptUntil(day: string): string {
  const [year, month, date] = day.split('-').map(Number) as [number, number, number];
  const taxYearEnds = month < 4 || (month === 4 && date <= 5) ? year : year + 1;
  return yearsLater(GIFT_AID_RETENTION_YEARS, taxYearEnds, 4, 5);
}

/**
 * The day `years` after year-month-day, as YYYY-MM-DD (a donation dated in the year 215 is kept
 * until 0221, not "221", which sorts after every later year), and past 9999, which no date can
 * hold, the last day there is.
 */
export function yearsLater(years: number, year: number, month: number, day: number): string {
  return year + years > 9999 ? '9999-12-31' : dayIso(year + years, month, day);
}

/** What erasing a donation's personal data changes, and what it keeps and until when. */
export interface Erasure {
  /** The new values of the fields that change. */
  set: Partial<Record<PersonalField, string | null>>;
  erased: PersonalField[];
  kept: PersonalField[];
  /** The day the kept fields must go after (a gift-aided donation in its retention period), else null. */
  keptUntil: string | null;
}

type ErasableDonation = Pick<StoredDonation, 'gift_aid' | 'donation_date' | PersonalField>;

/**
 * Erasing `d`'s personal data on `today` (YYYY-MM-DD, in the UK): everything goes, except, on a
 * gift-aided donation still inside its retention period, what HMRC needs to match the donor (the
 * names, the house name or number and the postcode), kept until the period ends. Already-erased
 * values are not counted again.
 */
export function erasureOf(d: ErasableDonation, today: string): Erasure {
  const keptUntil = d.gift_aid ? giftAidKeptUntil(donationDay(d.donation_date)) : null;
  const keep = keptUntil !== null && today <= keptUntil;
  const erasure: Erasure = { set: {}, erased: [], kept: [], keptUntil: null };
  for (const f of PERSONAL_FIELDS) {
    const now: string | null = d[f.name];
    const erased = f.required ? ERASED_EMAIL : null;
    const next = !keep || f.erasure === 'now' ? erased : f.erasure === 'house' ? houseNameOrNumber(now) || null : now;
    if (next !== now) {
      erasure.set[f.name] = next;
      if (next === erased) erasure.erased.push(f.name);
    }
    if (next !== erased) erasure.kept.push(f.name);
  }
  erasure.keptUntil = keep && erasure.kept.length > 0 ? keptUntil : null;
  return erasure;
}
