// Erasing a donor's personal data (UK GDPR Article 17), and how long a gift-aided donation's must
// first be kept (Article 17(3)(b): a legal obligation). HMRC requires Gift Aid records for six
// years after the end of the accounting period that holds the donation (a charitable company), or
// of the tax year (a charitable trust). Almoner does not know each charity's period; one of up to
// 12 months ends within a year of the donation's day, and so does the tax year, so it keeps them
// seven years from that day.
// Which fields are personal, and what erasing each does, is the field table's (fields.ts).
import { donationDay, houseNameOrNumber } from '../giftaid/schedule.js';
import { DONATION_FIELDS, type StoredDonation } from './fields.js';
import { dayIso, ukDay } from '../time.js';

export const GIFT_AID_RETENTION_YEARS = 7;

/** What an erased value becomes where the field may not be empty (the donor's e-mail address): an address that can never be delivered to (RFC 2606). */
export const ERASED_EMAIL = 'erased@erased.invalid';

type Field = (typeof DONATION_FIELDS)[number];
type Personal = Exclude<Field, { readonly erasure: 'none' }>;

/** The personal fields, in the table's order. */
export const PERSONAL_FIELDS = DONATION_FIELDS.filter((f): f is Personal => f.erasure !== 'none');

type PersonalField = Personal['name'];

/** The last day (YYYY-MM-DD) a gift-aided donation on `day` must be kept: the same day seven years on. */
export function giftAidKeptUntil(day: string): string {
  return yearsLater(GIFT_AID_RETENTION_YEARS, day);
}

/**
 * The day (YYYY-MM-DD) `years` after `day`: 29 February in a year without one is 1 March; the
 * year in four digits (a donation dated in the year 215 is kept until 0222, not "222", which sorts
 * after every later year); past 9999, which no date can hold, the last day there is.
 */
export function yearsLater(years: number, day: string): string {
  const [year, month, date] = day.split('-').map(Number) as [number, number, number];
  if (year + years > 9999) return '9999-12-31';
  const later = new Date(0);
  later.setUTCFullYear(year + years, month - 1, date);
  return dayIso(later.getUTCFullYear(), later.getUTCMonth() + 1, later.getUTCDate());
}

/** What erasing a donation's personal data changes, and what it keeps and until when. */
export interface Erasure {
  /** The new values of the fields that change. */
  set: Partial<Record<PersonalField, string | null>>;
  erased: PersonalField[];
  /** Cut down to what is kept of them (the address to its house name or number): the rest erased, which the donor is told too. */
  cut: PersonalField[];
  kept: PersonalField[];
  /** The day the kept fields must go after (a gift-aided donation in its retention period), else null. */
  keptUntil: string | null;
}

export type ErasableDonation = Pick<StoredDonation, 'gift_aid' | 'donation_date' | PersonalField> & Partial<Pick<StoredDonation, 'recorded_at'>>;

/**
 * The day a donation's retention counts from: its own day, but never more than a year after the UK
 * day it was recorded. A date typed in the future (2062 for 2026) kept a donor's details for
 * decades, and 31-12-9999 for ever, until 2026-11-29 (a review); a donation truly dated ahead of its
 * recording (a payment on a set day, within the year) keeps its own day, and with it HMRC's period.
 *
 * `notLongBeforeRecorded`, for retention's own run over a donation nobody asked to erase: nor more
 * than a year before it was recorded. One typed in the past (2016 for 2026) lost its donor's details
 * the night it was recorded, until later on 2026-11-29 (a review). A donor's own request counts from
 * the donation's day, as HMRC's period does: what no claim can need is not kept against their wish.
 */
export function retentionDay(
  d: Pick<StoredDonation, 'donation_date'> & Partial<Pick<StoredDonation, 'recorded_at'>>,
  { notLongBeforeRecorded = false }: { notLongBeforeRecorded?: boolean } = {},
): string {
  const day = donationDay(d.donation_date);
  if (d.recorded_at === undefined) return day;
  const recorded = ukDay(new Date(d.recorded_at));
  const latest = yearsLater(1, recorded);
  if (day > latest) return latest;
  const earliest = yearsLater(-1, recorded);
  return notLongBeforeRecorded && day < earliest ? earliest : day;
}

/**
 * Erasing `d`'s personal data on `today` (YYYY-MM-DD, in the UK): everything goes, except, on a
 * gift-aided donation still inside its retention period, what HMRC needs to match the donor (the
 * names, the house name or number and the postcode), kept until the period ends. Already-erased
 * values are not counted again.
 */
export function erasureOf(d: ErasableDonation, today: string): Erasure {
  const keptUntil = d.gift_aid ? giftAidKeptUntil(retentionDay(d)) : null;
  const keep = keptUntil !== null && today <= keptUntil;
  const erasure: Erasure = { set: {}, erased: [], cut: [], kept: [], keptUntil: null };
  for (const f of PERSONAL_FIELDS) {
    const now: string | null = d[f.name];
    const erased = f.required ? ERASED_EMAIL : null;
    const next = !keep || f.erasure === 'now' ? erased : f.erasure === 'house' ? houseNameOrNumber(now, d) || null : now;
    if (next !== now) {
      erasure.set[f.name] = next;
      if (next === erased) erasure.erased.push(f.name);
      else erasure.cut.push(f.name);
    }
    if (next !== erased && next !== '') erasure.kept.push(f.name); // a blank kept is nothing kept (it said "kept donor postcode" of a blank one)
  }
  erasure.keptUntil = keep && erasure.kept.length > 0 ? keptUntil : null;
  return erasure;
}
