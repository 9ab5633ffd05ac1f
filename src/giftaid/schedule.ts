// The Gift Aid claim schedule: which donations a charity can claim from HMRC, laid out as the rows
// of HMRC's Charities Online "Gift Aid schedule" spreadsheet, and why the others cannot be claimed
// as they stand. Pure rules: no I/O, no clock (the claim date is passed in), no database.
//
// Sources: HMRC's guidance "Schedule spreadsheet to claim back tax on Gift Aid donations" (GOV.UK),
// which gives the columns, the 35-character names, the space for a double-barrelled surname's hyphen,
// postcodes "using capital letters and include a space", dates as DD/MM/YY, amounts with two
// decimals and no £ sign, blank cells for what does not apply, and at most 1,000 rows per schedule.
// Where the guidance is silent, the assumptions are stated next to the rule they shape.

import { createRequire } from 'node:module';
import type { StoredDonation } from '../donations/donation.js';
import { isRealDate, ukDay } from '../time.js';
import { groupThousands } from '../numbers.js';
import type { Twin } from './twins.js';

/** The columns of needs-attention.csv: enough to find the donation and the donor, and the reasons. */
export const ATTENTION_COLUMNS = [
  'id',
  'donor_first_name',
  'donor_last_name',
  'donor_email',
  'donor_address',
  'donor_city',
  'donor_postcode',
  'donation_date',
  'amount',
  'reason',
] as const;

/** HMRC accepts at most 1,000 donation rows in one schedule spreadsheet. */
export const MAX_ROWS_PER_SCHEDULE = 1000;
/** HMRC: first and last names "using a maximum of 35 characters". */
export const NAME_MAX_LENGTH = 35;
/**
 * House name or number: HMRC's published guidance gives no length; the schedule spreadsheet's own
 * cell validation allows 40 characters (the same as "first line of address" in its GASDS
 * schedules). Assumption: 40.
 */
export const HOUSE_MAX_LENGTH = 40;
/** Gift Aid can be claimed for up to four years back (see isOutOfTime for how it is counted). */
export const CLAIM_WINDOW_YEARS = 4;
/**
 * The longest accounting period HMRC counts a claim's four years from: a charitable company's for
 * corporation tax, or a trust's tax year, each at most twelve months. So a donation's period ends
 * within a year of it, and one dated more than CLAIM_WINDOW_YEARS + this before the claim date is
 * too late whatever the period (pastEveryPeriodCutoff).
 */
const LONGEST_PERIOD_YEARS = 1;

/** What the rules read of a donation: a StoredDonation (or an export row) fits. */
export type GiftAidDonation = Pick<
  StoredDonation,
  | 'id'
  | 'donor_first_name'
  | 'donor_last_name'
  | 'donor_email'
  | 'donor_address'
  | 'donor_city'
  | 'donor_postcode'
  | 'payment_confirmation_number'
  | 'gift_aid'
  | 'amount_minor'
  | 'donation_date'
>;

/**
 * One donation as it goes into HMRC's schedule, every text already in HMRC's form. Title,
 * aggregated donations and sponsored event are always blank: Almoner does not collect a title,
 * claims each donation on its own row, and knows of no sponsored events.
 */
export interface ScheduleRow {
  donationId: number;
  firstName: string;
  lastName: string;
  houseNameOrNumber: string;
  postcode: string;
  /** YYYY-MM-DD; the file shows it as DD/MM/YY. */
  donationDay: string;
  /** Pence; the file shows it as pounds with two decimals. */
  amountMinor: number;
}

/** A donation that cannot be claimed as it stands, with what the charity needs to fix it. */
export interface AttentionRow {
  id: number;
  donor_first_name: string | null;
  donor_last_name: string | null;
  donor_email: string;
  donor_address: string | null;
  donor_city: string | null;
  donor_postcode: string | null;
  /** YYYY-MM-DD. */
  donation_date: string;
  /** Pounds with two decimals. */
  amount: string;
  /** Every reason, in a fixed order; never empty. */
  reasons: string[];
}

export type Assessment =
  | { kind: 'claimable'; id: number; amountMinor: number; row: ScheduleRow; shortened: Shortened[] }
  | { kind: 'needs-attention'; id: number; amountMinor: number; row: AttentionRow }
  | { kind: 'not-gift-aid'; id: number };

/**
 * A claimable donation's value longer than HMRC's schedule takes, cut to fit: names to 35
 * characters, the house to 40. Claimed as cut (HMRC asks for the names so), but said, so that the
 * charity can check HMRC can still tell the donor (until 2026-11-29 they were cut without a word; a
 * review).
 */
export type Shortened = 'first name' | 'last name' | 'house name or number';

/** Land, not a home, at the start of a line or segment: "Land at Home Farm", "Land adjacent to 4 Mill Lane", "Land to the rear of 12 High St", "Land off Mill Lane". */
const LAND = /(?:^|[\n\r,;])\s*land\s+(?:at|adj\.?|adjacent|adjoining|next\s+to|near|behind|beside|off|opposite|rear\s+of|to\s+(?:the\s+)?(?:rear|side|north|south|east|west)\s+of|(?:north|south|east|west)\s+of)(?=\s|$)/i;

/**
 * A plot or a pitch with its number at the start of a line or segment ("Plot 3 Meadow Way", "Plot 12, Sunnyside Park Homes",
 * "Pitch 14, Riverside Caravan Park"): a building plot's number (a new home before its street numbers it) or a park home's
 * pitch, which may not be the postal address HMRC matches. Until a review "Plot 3 Meadow Way" was claimed with the house
 * "Plot, 3" and "Plot 5 The Paddocks" whole.
 */
const PLOT = /(?:^|[\n\r,;])\s*(?:plot|pitch)\s*(?:no\.?\s*)?\d/i;

/**
 * A place of work in donor_address, in a segment of its own (a line, or the text between commas): a company, by the word
 * ending its name ("Acme Ltd", "Acme Holdings Limited", "Barclays Bank plc", "Jones Solicitors LLP", "Smith & Sons", "Widget
 * Co"); an estate or park of businesses ("Unit 4 Trade Park", "Riverside Industrial Estate", "Enterprise Park"); or a school,
 * hospital, surgery or council by the word ending the segment ("St Mary's School", "Leeds General Infirmary", "The Surgery"),
 * but not an old one made a home ("The Old School", "Old Surgery") nor a house named after one ("School House"). HMRC: the
 * donor's home address "cannot be a place of work". Until a review, "Acme Ltd, Unit 4 Trade Park" was claimed with the house
 * "Unit 4, Trade Park" and "Acme Ltd, 12 High St" with "12", the company passed over as whom the letter was for.
 */
const WORKPLACE = new RegExp(
  String.raw`(?:^|,)\s*(?:` +
    String.raw`[^,]*\s(?:ltd|limited|plc|llp|(?:&|and)\s+(?:co|sons))\.?` +
    String.raw`|[^,]*\S\s+co\.?` +
    String.raw`|[^,]*\b(?:industrial|trading|business|trade|enterprise|retail|science|technology)\s+(?:estate|park|centre|center|village)` +
    String.raw`|(?![^,]*\bold\s)[^,]*\b(?:school|college|academy|university|hospital|infirmary|surgery|medical\s+centre|health\s+centre|council|solicitors|accountants)` +
    String.raw`)\s*(?=,|$)`,
  'i',
);

/** A forces address's BFPO number anywhere in donor_address ("BFPO 123", "HQ 1 Div, BFPO 123"). */
const BFPO = /(?:^|[\s,;])(bfpo\s?\d+)(?=[\s,;]|$)/i;

/** A care-of address anywhere in donor_address ("c/o Mrs Smith", "Flat 2, c/o J Smith", "Care of", "C.O."). */
const CARE_OF = /(?:^|[\s,])(?:c\/o|c\.o\.|care of)(?=[\s:,]|$)/i;
/** A PO box anywhere in donor_address ("PO Box 12", "P.O. Box", "POBox12", "Post Office Box 12"). */
const PO_BOX = /(?:^|[\s,])(?:p\.?\s?o\.?\s?box|post office box)(?=[\s\d:,]|$)/i;

/**
 * A donor's text quoted in a reason, as JSON quotes it, with every character that shows as nothing
 * or as a box written as its code (`"Ed\u0085"`): JSON escapes only those below U+0020, and a
 * needs-attention line quoting DEL, U+0080 to U+009F or a private-use character showed `""` (a review).
 */
export function quoted(text: string): string {
  return JSON.stringify(text).replace(/\p{C}/gu, (c) => {
    const code = c.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** The reasons, word for word, so callers and tests can recognise them. */
export const REASONS = {
  noFirstName: 'no first name',
  firstNameOnlyTitle: (given: string) => `first name is only a title (${quoted(given)}): HMRC needs the donor's first name or initial`,
  twoPeople: (firstName: string) =>
    `first name names two people (${quoted(firstName)}): HMRC's schedule takes one donor a row, so claim each donor's part by hand, each with their own declaration`,
  firstNameNoLetters: 'first name has no letters',
  noLastName: 'no last name',
  lastNameNoLetters: 'last name has no letters',
  noHouse: 'no house name or number (donor_address is empty, or stands for none: "-", "N/A")',
  /** An address with letters or digits but no house read from it: until 2026-11-30 said to be empty (a review); since a later review, a district ("Kensington, London") or a person's name ("Peter Jackson, Mill Lane") is said too. */
  houseNotFound: (address: string) =>
    `no house name or number read from donor_address (${quoted(address)}): it seems to hold a street, a district or a town, or a person's name, only, or a number run into a word; HMRC needs the house's name or number`,
  /** HMRC: a donor's home address, which "cannot be a place of work or care of address" (a review: claimed as the house until 2026-11-29). */
  careOf: "donor_address is a care-of address (c/o): HMRC needs the donor's own home address",
  poBox: "donor_address is a PO box: HMRC needs the donor's home address",
  /** "Land at Home Farm", "Land adjacent to 4 Mill Lane": a plot, no one's home (claimed as the house until a review of 2026-11-30's changes). */
  land: "donor_address is land (\"Land at\", \"Land adjacent to\"), not a home: HMRC needs the donor's home address",
  /** "Plot 3 Meadow Way", "Pitch 14, Riverside Caravan Park": claimed as the house ("Plot, 3") until a review. */
  plot: 'donor_address is a plot or pitch ("Plot 3", "Pitch 14"): a building plot\'s or a park home\'s number may not be its postal address, which HMRC matches: give the house\'s name or number as the post knows it',
  /** "Acme Ltd, Unit 4 Trade Park", "St Mary's School, Church Road": claimed as the house until a review. */
  workplace: (place: string) => `donor_address is a place of work (${quoted(place)}): HMRC needs the donor's home address, which cannot be a place of work`,
  houseIsPostcode: "donor_address holds a postcode where the house should be: HMRC needs the house's name or number",
  houseIsName: "donor_address holds the donor's name where the house should be: HMRC needs the house's name or number",
  noPostcode: 'no postcode',
  badPostcode: (postcode: string) => `postcode ${quoted(postcode)} is not a UK postcode (use X for a donor living outside the UK)`,
  /** "BFPO 123": the advice for a donor abroad (X) is wrong for a forces address, which has a postcode of its own (a review). */
  bfpo: (postcode: string) => `postcode ${quoted(postcode)} is a BFPO number, not a postcode: a forces address has a BF1 postcode (such as BF1 4FB), which is the one to use`,
  /** "BFPO 123" in donor_address: claimed as the house ("BFPO 123", or a unit's name before it) until a review of 2026-11-30's changes. */
  bfpoAddress: (bfpo: string) =>
    `donor_address is a forces address (${quoted(bfpo)}): a BFPO number is not a house name or number, and HMRC matches a donor by their house and postcode; claim it by hand, or give the donor's home address`,
  unwritable: (column: string, chars: readonly string[]) =>
    `${column} holds ${chars.map(quoted).join(', ')}, which HMRC's schedule cannot hold and which has no plain-letter spelling`,
  outOfTime: (cutoff: string, periodEnd?: string) =>
    periodEnd === undefined
      ? `dated more than ${CLAIM_WINDOW_YEARS} years before the claim date (before ${dayMonthYear(cutoff)}): left out, though HMRC takes a claim up to ${CLAIM_WINDOW_YEARS} years after the end of the accounting period the donation fell in, so it may still be in time: if it is, give your accounting period's end (--period-end)`
      : `dated before ${dayMonthYear(cutoff)}, in an accounting period (ending ${periodEnd === '02-29' ? 'on the last day of February' : `${periodEnd.slice(3)}/${periodEnd.slice(0, 2)}`}) that ended more than ${CLAIM_WINDOW_YEARS} years before the claim date: too late to claim`,
  /** Without --period-end, a donation too old for any accounting period: until 2026-12-02 told it "may still be in time", retention's erased ones too (a README walkthrough). */
  pastEveryPeriod: (cutoff: string) =>
    `dated more than ${CLAIM_WINDOW_YEARS + LONGEST_PERIOD_YEARS} years before the claim date (before ${dayMonthYear(cutoff)}): too late to claim, whatever your accounting period: HMRC takes a claim up to ${CLAIM_WINDOW_YEARS} years after the end of the accounting period the donation fell in, which ends within a year of it`,
  future: "dated after the claim date, which HMRC's checker refuses: claimable once its day has come (if its year was mistyped, as 2062 for 2026, it never will be: the donation cannot be edited, so claim it by hand with its right date)",
  notPositive: 'amount is not more than 0.00',
  twin: (id: number) =>
    `the same donor (names, house and postcode), day and amount as donation ${id}, and no other payment_confirmation_number: one gift recorded twice, it seems (sent again under another Idempotency-Key, or none), which is claimed once; if the donor did give twice, claim this one by hand`,
  twinAcrossMidnight: (id: number) =>
    `the same donor (names, house and postcode) and amount as donation ${id}, both sent without a donation_date and recorded within an hour of each other on either side of midnight, and no other payment_confirmation_number: one gift sent again, it seems (a retry after a timeout), which is claimed once; if the donor did give twice, claim this one by hand`,
  inKeptClaim: (claim: number) =>
    `the same donor, day and amount as a donation in claim ${claim} that a restore could not bring back (recorded after the backup): it may be claimed already; claim it by hand only if it is another donation`,
} as const;

/**
 * Decides one donation against the claim date `today` (YYYY-MM-DD, the day the claim is made).
 * Donations without Gift Aid are neither claimed nor reported as needing attention.
 */
export function assessDonation(d: GiftAidDonation, today: string, periodEnd?: string): Assessment {
  assertDay(today, 'today');
  if (!d.gift_aid) return { kind: 'not-gift-aid', id: d.id };

  const reasons: string[] = [];

  // HMRC requires a first name ("first initial is acceptable") and a last name for an individual's
  // donation; only aggregated donations go without, and Almoner never aggregates.
  // Each name whole first, then cut to HMRC's length, so that a cut can be said (shortened).
  const wholeFirstName = hmrcFirstName(d.donor_first_name, d.donor_last_name, Infinity);
  const firstName = cut(wholeFirstName, NAME_MAX_LENGTH);
  const givenFirstName = normaliseSpaces(d.donor_first_name ?? '');
  if (firstName === '') reasons.push(TITLE.test(givenFirstName.split(' ')[0]!) ? REASONS.firstNameOnlyTitle(givenFirstName) : REASONS.noFirstName);
  else if (TWO_PEOPLE.test(firstName)) reasons.push(REASONS.twoPeople(firstName));
  else if (!hasLetter(firstName)) reasons.push(REASONS.firstNameNoLetters);
  const wholeLastName = hmrcLastName(d.donor_last_name, Infinity);
  const lastName = cut(wholeLastName, NAME_MAX_LENGTH);
  if (lastName === '') reasons.push(REASONS.noLastName);
  else if (!hasLetter(lastName)) reasons.push(REASONS.lastNameNoLetters);

  const house = houseNameOrNumber(d.donor_address, d);
  const shortened = (
    [
      ['first name', firstName, wholeFirstName],
      ['last name', lastName, wholeLastName],
      ['house name or number', house, houseNameOrNumber(d.donor_address, d, Infinity)],
    ] as const
  ).flatMap(([column, value, whole]) => (value === whole ? [] : [column]));
  const address = normaliseSpaces(d.donor_address ?? '');
  const workplace = WORKPLACE.exec(segmentsOf(d.donor_address))?.[0].replace(/^,/, '').trim();
  // A care-of address or a PO box is said to be one whether or not a house was read from it ("J Smith, PO Box12").
  if (CARE_OF.test(address)) reasons.push(REASONS.careOf);
  else if (PO_BOX.test(address)) reasons.push(REASONS.poBox);
  else if (LAND.test(d.donor_address ?? '')) reasons.push(REASONS.land);
  else if (PLOT.test(d.donor_address ?? '')) reasons.push(REASONS.plot);
  else if (workplace !== undefined) reasons.push(REASONS.workplace(workplace));
  else if (BFPO.test(address)) reasons.push(REASONS.bfpoAddress(normaliseSpaces(BFPO.exec(address)![1]!)));
  else if (house === '') reasons.push(/[\p{L}\p{N}]/u.test(address) && !NO_ADDRESS.test(address) ? REASONS.houseNotFound(address) : REASONS.noHouse);
  else if (UK_POSTCODE.test(hmrcPostcode(house).value)) reasons.push(REASONS.houseIsPostcode);
  else if (house.includes(' ') && donorsOwnName(d)?.(house)) reasons.push(REASONS.houseIsName);

  const postcode = hmrcPostcode(d.donor_postcode);
  if (postcode.value === '') reasons.push(REASONS.noPostcode);
  else if (!postcode.valid) {
    const given = normaliseSpaces(d.donor_postcode ?? '');
    reasons.push(/^BFPO\b/i.test(given) ? REASONS.bfpo(given) : REASONS.badPostcode(given));
  }

  // HMRC deletes every character outside its set before reading a value. Letters outside it are
  // written in plain letters already (hmrcText); anything left would reach HMRC mangled.
  for (const [column, value] of [
    ['first name', firstName],
    ['last name', lastName],
    ['house name or number', house],
  ] as const) {
    const outside = outsideHmrcCharacters(value);
    if (outside.length > 0) reasons.push(REASONS.unwritable(column, outside));
  }

  const day = donationDay(d.donation_date);
  if (day > today) reasons.push(REASONS.future);
  else if (periodEnd === undefined && day < pastEveryPeriodCutoff(today)) reasons.push(REASONS.pastEveryPeriod(pastEveryPeriodCutoff(today)));
  else if (isOutOfTime(day, today, periodEnd)) reasons.push(REASONS.outOfTime(claimCutoff(today, periodEnd), periodEnd));

  if (!(d.amount_minor > 0)) reasons.push(REASONS.notPositive);

  if (reasons.length > 0) return { kind: 'needs-attention', id: d.id, amountMinor: d.amount_minor, row: attentionRow(d, reasons) };
  return {
    kind: 'claimable',
    id: d.id,
    amountMinor: d.amount_minor,
    shortened,
    row: {
      donationId: d.id,
      firstName,
      lastName,
      houseNameOrNumber: house,
      postcode: postcode.value,
      donationDay: day,
      amountMinor: d.amount_minor,
    },
  };
}

/** donor_address with its lines and semicolons as commas, each segment's spaces normalised: "Acme Ltd\nUnit 4" is "Acme Ltd, Unit 4". */
function segmentsOf(address: string | null): string {
  return (address ?? '')
    .split(/[\r\n,;]+/)
    .map((segment) => normaliseSpaces(segment))
    .filter((segment) => segment !== '')
    .join(', ');
}

/** A donation that cannot be claimed as it stands, for the charity's needs-attention list. */
function attentionRow(d: GiftAidDonation, reasons: string[]): AttentionRow {
  return {
    id: d.id,
    donor_first_name: d.donor_first_name,
    donor_last_name: d.donor_last_name,
    donor_email: d.donor_email,
    donor_address: d.donor_address,
    donor_city: d.donor_city,
    donor_postcode: d.donor_postcode,
    donation_date: donationDay(d.donation_date),
    amount: formatPounds(d.amount_minor),
    reasons,
  };
}

export interface Schedule {
  /** The claimable donations' rows, earliest first (then by id): a claim's first file holds its earliest donations. */
  rows: ScheduleRow[];
  /** The Gift Aid donations that cannot be claimed as they stand, in the donations' order. */
  needsAttention: AttentionRow[];
  /** The sum of the claimable donations, in pence. */
  claimableMinor: number;
  /** The claimable donations with a value cut to fit (Shortened), in the donations' order. */
  shortened: { id: number; columns: Shortened[] }[];
}

/**
 * Decides every donation against the claim date `today`; donations without Gift Aid are left out.
 * `claimedIn` names the claim a claimable row may be in already (a row a restore kept without its
 * donation, ClaimLedger.keepFrom): such a donation needs attention instead.
 */
export function buildSchedule(
  donations: Iterable<GiftAidDonation>,
  today: string,
  { claimedIn = () => undefined, periodEnd }: { claimedIn?: (row: ScheduleRow) => number | undefined; periodEnd?: string } = {},
): Schedule {
  const rows: ScheduleRow[] = [];
  const needsAttention: AttentionRow[] = [];
  const shortened: Schedule['shortened'] = [];
  let claimableMinor = 0;
  for (const d of donations) {
    const a = assessDonation(d, today, periodEnd);
    const claim = a.kind === 'claimable' ? claimedIn(a.row) : undefined;
    if (claim !== undefined) {
      needsAttention.push(attentionRow(d, [REASONS.inKeptClaim(claim)]));
    } else if (a.kind === 'claimable') {
      rows.push(a.row);
      claimableMinor += a.amountMinor;
      if (a.shortened.length > 0) shortened.push({ id: a.id, columns: a.shortened });
    } else if (a.kind === 'needs-attention') {
      needsAttention.push(a.row);
    }
  }
  rows.sort(earliestFirst);
  return { rows, needsAttention, claimableMinor, shortened };
}

/** A schedule's rows' order: by UK day, then by id. */
const earliestFirst = (x: ScheduleRow, y: ScheduleRow): number => (x.donationDay < y.donationDay ? -1 : x.donationDay > y.donationDay ? 1 : x.donationId - y.donationId);

/**
 * The schedule of donations assessed a batch at a time (buildSchedule of each, in the donations'
 * order): the one buildSchedule makes of them all at once, without every donation in memory at once.
 */
export function mergeSchedules(parts: readonly Schedule[]): Schedule {
  if (parts.length === 1) return parts[0]!;
  const merged: Schedule = { rows: [], needsAttention: [], claimableMinor: 0, shortened: [] };
  for (const part of parts) {
    for (const r of part.rows) merged.rows.push(r);
    for (const r of part.needsAttention) merged.needsAttention.push(r);
    for (const s of part.shortened) merged.shortened.push(s);
    merged.claimableMinor += part.claimableMinor;
  }
  merged.rows.sort(earliestFirst);
  return merged;
}

/**
 * `schedule` with the claimable donations that record again an earlier donation (twins.ts), each
 * given with its twin, set aside as needing attention: one gift recorded twice is claimed once.
 */
export function setAsideTwins(schedule: Schedule, twins: ReadonlyMap<number, { donation: GiftAidDonation; twin: Twin }>): Schedule {
  if (twins.size === 0) return schedule;
  return {
    rows: schedule.rows.filter((r) => !twins.has(r.donationId)),
    needsAttention: [...schedule.needsAttention, ...[...twins.values()].map(({ donation, twin }) => attentionRow(donation, [twin.acrossMidnight ? REASONS.twinAcrossMidnight(twin.id) : REASONS.twin(twin.id)]))].sort((x, y) => x.id - y.id),
    claimableMinor: schedule.rows.reduce((sum, r) => (twins.has(r.donationId) ? sum : sum + r.amountMinor), 0),
    shortened: schedule.shortened.filter((s) => !twins.has(s.id)),
  };
}

/** A needs-attention row as cells, in ATTENTION_COLUMNS order; reasons joined with "; ". */
export function attentionCells(r: AttentionRow): string[] {
  return [
    String(r.id),
    r.donor_first_name ?? '',
    r.donor_last_name ?? '',
    r.donor_email,
    r.donor_address ?? '',
    r.donor_city ?? '',
    r.donor_postcode ?? '',
    r.donation_date,
    r.amount,
    r.reasons.join('; '),
  ];
}

/**
 * The list of the donations left out by a preview, or by a claim that claimed nothing: named for its
 * charity, as one folder may take every charity's runs (a month's claims). Until 2026-11-30 it was
 * needs-attention.csv for every charity, so the next charity's run replaced the list with its own
 * donors, or removed it when it left nothing out (a tenants review). Only characters a file name
 * takes plainly are kept (a generated username holds no others).
 */
export const attentionFileName = (username: string): string => `needs-attention-${username.replace(/[^A-Za-z0-9._-]/g, '_')}.csv`;

// --- the rules, one by one ---

/**
 * Whitespace of any kind (line breaks, tabs, non-breaking spaces) becomes one space; the ends are
 * trimmed. Other control characters (U+0001, DEL) stay, for outsideHmrcCharacters to report: until
 * 2026-11-29 they became spaces, and "Ja\u0001ne" was claimed as "Ja ne" without a word (a review). HMRC: "Don't include blank spaces … at the start or end of boxes".
 * Characters that show as nothing (Unicode's format characters: a zero-width space, a left-to-right
 * mark, a soft hyphen, picked up when text is pasted) go, as HMRC's checker deletes them; and letters
 * written as a letter and its accent (Zoe\u0308, as macOS sends them) become one character (Zoë),
 * which HMRC can hold. Until 2026-11-29 the first sent a good donation to needs-attention, quoting a
 * character nobody could see, and the second lost the accent (a review).
 */
export function normaliseSpaces(s: string): string {
  // Printable ASCII with single spaces between words and none at the ends, as nearly every name and address is, is its own
  // normal form (NFC leaves ASCII as it is, and it holds no format character): returned as it is. The whole way below took
  // about 20 s of a claim of 629,000 donations (a scale review).
  if (NORMAL_ASCII.test(s)) return s;
  return s.normalize('NFC').replace(/\p{Cf}+/gu, '').replace(/\s+/gu, ' ').trim();
}

/** Text normaliseSpaces leaves as it is, told at once: printable ASCII words (U+0021 to U+007E) with one space between each two. */
const NORMAL_ASCII = /^(?:[\x21-\x7E]+(?: [\x21-\x7E]+)*)?$/;

/** Cut to `max` characters (Unicode code points, as every length in Almoner), without a trailing space. */
export function cut(s: string, max: number): string {
  const chars = Array.from(s);
  return chars.length <= max ? s : chars.slice(0, max).join('').trimEnd();
}

function hasLetter(s: string): boolean {
  return /\p{L}/u.test(s);
}

/**
 * HMRC's characters: its checker deletes every character outside U+0020 to U+007E and U+00A1 to
 * U+00FF before it reads a value, so "Łukasz" would arrive as "ukasz".
 */
const HMRC_CHARACTER = /[\u0020-\u007E\u00A1-\u00FF]/u;
/** Text of printable ASCII alone, each character one of HMRC's (HMRC_CHARACTER): hmrcText keeps it whole. */
const HMRC_ASCII = /^[\x20-\x7E]*$/;
/**
 * What may be spelt in plain letters: letters and their accents, dashes and quotation marks (O’Brien),
 * and digits of any script, which any-ascii writes as the same digits ("１２", full-width, is "12";
 * until 2026-11-30 such a house needed attention, said to have no plain spelling: a review). Not
 * other numbers: "①" or "Ⅻ" is left for outsideHmrcCharacters.
 */
const SPELLABLE = /[\p{L}\p{M}\p{Pd}\p{Pi}\p{Pf}\p{Nd}]/u;

/**
 * Text in HMRC's characters. A word with a letter or digit outside them is written wholly in plain
 * letters by any-ascii ("Łukasz Żółkiewski" -> "Lukasz Zolkiewski", "O’Brien" -> "O'Brien", "１２" ->
 * "12"), never half and half; a word HMRC can hold as it is keeps its accents ("Zoë" stays "Zoë"). A word with
 * anything else outside HMRC's characters (an emoji, a symbol) is left as it is, for
 * outsideHmrcCharacters to report: it must not reach HMRC mangled.
 */
export function hmrcText(text: string): string {
  if (HMRC_ASCII.test(text)) return text; // every character HMRC's: every word kept as it is, as below
  return text.replace(/\S+/gu, (word) => {
    const outside = Array.from(word).filter((c) => !HMRC_CHARACTER.test(c));
    if (outside.length === 0 || !outside.every((c) => SPELLABLE.test(c))) return word;
    return normaliseSpaces(anyAscii()(word));
  });
}

/**
 * any-ascii, loaded when a word first needs it. Its tables are 555 kB of code, and the server loads
 * this module (a donor's erasure keeps the house number) but never spells a word in plain letters:
 * imported, every start of the server read and parsed them (docs/performance.md). An ES module
 * loaded by require, as Node does from 20.19 and 22.12 (package.json's engines).
 */
const require = createRequire(import.meta.url);
let spell: ((text: string) => string) | undefined;
function anyAscii(): (text: string) => string {
  return (spell ??= (require('any-ascii') as typeof import('any-ascii')).default);
}

/** The characters of `text` that HMRC's schedule cannot hold, each once, in order. */
export function outsideHmrcCharacters(text: string): string[] {
  return [...new Set(Array.from(text).filter((c) => !HMRC_CHARACTER.test(c)))];
}

/**
 * First name: in HMRC's characters, spaces normalised, without the titles before it ("Mr John", "Rev
 * Dr John" are "John"; "Mr & Mrs", and "Mrs Smith" with the last name Smith, are no first name) or
 * the donor's last name after it ("John Smith", last name Smith, is "John"), cut to 35 characters
 * (`max`). Read again, a first name so read is the same (matchableFirstName relies on it). HMRC asks
 * for the first name or initial: until 2026-11-29 "Mr" was claimed as one, and "Mr John" and "John
 * Smith" as given (reviews). Kept as given otherwise: HMRC asks for a space instead of a hyphen only
 * in a double-barrelled surname, so "Mary-Jane" stays.
 */
export function hmrcFirstName(name: string | null, lastName: string | null = null, max = NAME_MAX_LENGTH): string {
  const words = normaliseSpaces(hmrcText(normaliseSpaces(name ?? ''))).split(' ');
  let titles = 0;
  while (titles < words.length && (TITLE.test(words[titles]!) || /^(?:&|and)$/i.test(words[titles]!))) titles++;
  let text = words.slice(titles).join(' ');
  // The last name alone after a title ("Mrs Smith"), or at the end after a space (not a hyphen: "Mary-Jane" Jane stays), read as hmrcLastName reads it.
  const last = hmrcLastName(lastName, Infinity).toLowerCase();
  if (last !== '' && titles > 0 && text.replace(DASHES, ' ').toLowerCase() === last) return '';
  // As often as it is there, so that a name read again is read the same ("John Smith Smith" is "John").
  for (let at = text.length - last.length - 1; last !== '' && at > 0 && text[at] === ' ' && text.replace(DASHES, ' ').toLowerCase().endsWith(` ${last}`); at = text.length - last.length - 1) {
    text = text.slice(0, at);
  }
  return cut(text, max);
}

/** Two people in one name: "J & Mrs K", "John and Mary". */
const TWO_PEOPLE = /(?:^|\s)(?:&|and)(?:\s|$)/i;

/** Any dash character, as a double-barrelled surname's hyphen. */
const DASHES = /[-\u2010-\u2015\u2212]/g;

/**
 * Last name: in HMRC's characters, a double-barrelled surname with a space instead of the hyphen
 * (Smith-Jones becomes Smith Jones; any dash character counts as the hyphen), spaces normalised,
 * cut to 35 characters (`max`).
 */
export function hmrcLastName(name: string | null, max = NAME_MAX_LENGTH): string {
  return cut(normaliseSpaces(hmrcText(normaliseSpaces(name ?? '')).replace(DASHES, ' ')), max);
}

/**
 * A house number at the start of a segment: 12, 12a, 12 A (a letter alone after a space), 12½ or
 * 12 1/2, 12-14, 12/3, 12 & 14, 12 to 14, 12 and 14, perhaps after "No.", "#" or "Nº" (followed by a
 * space, a comma or the end). Until 2026-11-29 "12 A High Street" gave 12 and "12 & 14 High St" gave
 * 12, and "No. 12 High St" and "12 to 14" were not read (reviews): HMRC matches a donor by house and
 * postcode. A half is "12½" or "12 1/2", with a space: "1/2" and "11/2" are a Glasgow flat's floor
 * and door (until a review of 2026-11-30's changes "1/2, 14 Byres Road" gave "½", "11/2 Byres Road"
 * "1½").
 */
const ONE_NUMBER = String.raw`\d+(?:\s?[A-Za-z](?=[\s,]|$)|[A-Za-z])?(?:\s?1/2(?=[\s,]|$)|½)?`;
const HOUSE_NUMBER = new RegExp(String.raw`^(?:no\.?\s*|number\s+|#\s*|nº\s*)?(${ONE_NUMBER}(?:(?:\s*[-/&]\s*|\s+(?:to|and)\s+)${ONE_NUMBER})?)(?=[\s,]|$)`, 'i');

/** The number a segment starts with, written as HMRC gets it ("12 to 14" as 12-14), and what follows it. */
function leadingNumber(segment: string): { value: string; rest: string } | undefined {
  const m = HOUSE_NUMBER.exec(segment);
  if (!m) return undefined;
  const value = m[1]!
    .replace(/(?<=\d[A-Za-z]?)\s1\/2$/, '½') // "12 1/2": a half; "1/2" and "11/2" are a Glasgow flat's (floor 1, flat 2), as typed
    .replace(/\s+to\s+/i, '-')
    .replace(/\s+and\s+/i, '&')
    .replace(/\s+/g, '')
    .replace('&', ' & ');
  return { value, rest: segment.slice(m[0].length).trim() };
}

/** Whether a number can be a UK house's: it has at most four digits ("00100 Roma" is a postcode, "07700" a telephone's). */
const ukHouseNumber = (value: string): boolean => !/\d{5}/.test(value);

/** A building's number after a house name, a UK house's (ukHouseNumber). */
function buildingNumber(segment: string): string | undefined {
  const number = leadingNumber(segment);
  return number && ukHouseNumber(number.value) ? number.value : undefined;
}

const NUMBER_WORD = 'one|two|three|four|five|six|seven|eight|nine|ten';
// "Upper ground" is "upper" and "ground", each a word of the repeated group below: named as one too, every run
// of them could be matched two ways, and a failing match tried each (an address of "upper ground " forty
// times never finished, and held giftaid claim and donor erase; a security review).
const ORDINAL = `\\d+(?:st|nd|rd|th)|ground|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|top|upper|lower|basement|mezzanine`;
/** A flat's letter: one or two, not a little word ("Flat on top of 12", "Room in 12"). */
const FLAT_LETTERS = '(?!(?:on|in|at|of|to|by|or|an|is)\\b)[A-Za-z]{1,2}';
/**
 * A part of a building, as a whole segment: a flat with its number or letter ("Flat 3", "Apartment
 * 4B", "Flat GF", "Flat No 4", "Flat Two", "Fflat 2", "Flt 3", "flat3", "Block B", "Floor 2", "Level
 * 3", "Room 12", "Unit 4"), a floor or a flat named by where it is, perhaps with its letter ("2nd
 * Floor", "Ground Floor Flat A", "Top Flat", "Garden Flat", "Rear Maisonette", "Basement"; a number
 * after them is the building's: "Basement Flat 12 Elm Rd" is flat and building), or an Edinburgh flat
 * ("2F1": second floor, first door).
 */
const PART_OF_BUILDING = new RegExp(
  '^(?:' +
    `(?:flat|flt|fflat|apartment|apt\\.?|unit|suite|room|studio|maisonette|block|floor|level)(?:\\s+(?:no\\.?\\s*)?(?:[^\\s,]*\\d[^\\s,]*|${FLAT_LETTERS}|${NUMBER_WORD})|\\d[^\\s,]*)(?:\\s+floor)?` +
    `|(?:(?:${ORDINAL}|garden|rear|front|side)\\s+){1,4}(?:floor|flat|maisonette|apartment)(?:\\s+(?:flat|apartment|maisonette))?(?:\\s+(?:${FLAT_LETTERS}|left|right|front|rear|${NUMBER_WORD}))?` +
    `|basement|maisonette|\\d+f\\d+` +
    ')$',
  'i',
);
/**
 * A street, by its last word ("High Street", "Elm Rd", "Heol y Frenhines"): never part of the house.
 * Only words seldom a building's name: "Rose Mews", "Park Terrace", "Canary Wharf Square" are often
 * blocks of flats, and are kept as names (but first in the address, a square, a terrace or gardens
 * is a street: SQUARE_FIRST).
 */
const STREET_NAMES = 'street|road|rd|lane|ln|avenue|ave|drive|close|way|crescent|cres|boulevard|row|walk|wynd|brae|parade'; // and St, Dr: below
const STREET_WORD = String.raw`(?:${STREET_NAMES}|st|dr)\.?`;
/**
 * A street's word within a line, where more follows: "St" and "Dr" only at the line's end, as within
 * it they are Saint and Doctor ("The Old Rectory St Andrews Lane": until a review, "The Old").
 */
const STREET_WORD_WITHIN = String.raw`(?:(?:${STREET_NAMES})\.?(?!\S)|(?:st|dr)\.?$)`;
/** The last word of a building's name: where one follows a street's word, the street's word is part of the name ("Long Lane Farm"). */
const BUILDING_WORDS = 'house|hall|court|lodge|cottages?|farm|manor|barn|mill|villa|mansions|buildings|chambers|stables|grange';
/** A saint's "St" (or "Saint") before a name, which with it is one name: "St John's Wood Road", "St Marys Cottage". */
const SAINT = String.raw`(?:st|saint)\.?\s+`;
/**
 * A line that begins with a street: one or two words (perhaps after a saint's "St") and a street's
 * ("High Street London", "Church Lane Ambridge", "Upper Richmond Road London", "St John's Wood Road"):
 * a street, whatever follows it on the line, unless a building's word does ("Long Lane Farm") or
 * comes just before the street's ("Rose Cottage Lane End", a house or a street: kept whole). Until
 * 2026-11-30 only one word before the street's was read so, and "Upper Richmond Road London" was
 * claimed whole as the house (a review).
 */
const STREET_FIRST = new RegExp(
  String.raw`^(?:${SAINT})?(?:\S+\s+(?!(?:${BUILDING_WORDS})\s))?\S+\s+(?:${STREET_NAMES})\.?(?:\s|$)(?!.*\b(?:${BUILDING_WORDS})\b)`,
  'i',
);
/**
 * A square, a terrace or gardens at a line's start: one or two words (perhaps after a saint's "St")
 * and "Square", "Terrace" or "Gardens" ("Russell Square", "The Square Ambridge"), unless a building's
 * word follows ("Park Terrace Farm"). First in the address with no number after it, a street (until
 * 2026-11-30 "Russell Square, London" was claimed with the house "Russell Square": a review); after a
 * flat or before a number, perhaps a block of flats' name ("Flat 2, Park Terrace", "Canary Wharf
 * Square, 1 Dock Rd"), or before a street a house's (SQUARE_NAME), so not among STREET_NAMES. Hill, Grove, Green, Place, Court and Mews are as
 * often a house's name ("Rose Hill", "The Grove", "Ivy Court", "The Mews") and are not here.
 */
const SQUARE_FIRST = new RegExp(String.raw`^(?:${SAINT})?(?:\S+\s+)?\S+\s+(?:square|terrace|gardens)\.?(?:\s|$)(?!.*\b(?:${BUILDING_WORDS})\b)`, 'i');
/**
 * A house named like a square, a terrace or gardens, before a street: with "The" ("The Gardens, Church
 * Lane"), or one word and Gardens or Terrace ("Walled Gardens, Church Lane"). Until a review of
 * 2026-11-30's changes, each needed attention as a street.
 */
const SQUARE_NAME = new RegExp(String.raw`^(?:the\s[^,]+|\S+\s+(?:gardens|terrace)),\s(?:[^,]*\s)?${STREET_WORD}$`, 'i');
/** A Welsh street's first word: Heol, Stryd, Ffordd, and Lôn (also written Lon: "Lôn Las" was claimed as a house until a review of 2026-11-30's changes). */
const WELSH_STREET = 'heol|stryd|ffordd|l[oô]n';
/** A line ending in an English street's word ("Upper Richmond Road"); STREET also takes a Welsh street ("Heol y Frenhines"). */
const STREET_AT_END = new RegExp(String.raw`(?:^|\s)${STREET_WORD}$`, 'i');
const STREET = new RegExp(String.raw`(?:^|\s)(?:${STREET_WORD}|(?:${WELSH_STREET})\s.+)$`, 'i');
/** The street at the end of a text with no comma, and the word before it: "Mill House Mill Lane" is "Mill House" and "Mill Lane". */
const TRAILING_STREET = new RegExp(String.raw`^(.*?)\s*(?:\S+\s+${STREET_WORD}|(?:${WELSH_STREET})\s.+)$`, 'i');
/** A street's first word, before two more ("Upper Richmond Road", "Old Kent Road"), never a house name's last. */
const STREETS_FIRST_WORD = 'upper|lower|old|new|great|little|north|south|east|west|nether';
/**
 * A house name run on into its street with no comma ("Hillview Farm Long Road Ambridge"): the name,
 * when two words or more come before the street's (so "Rose Cottage Lane End" stays whole), a
 * saint's "St" at its start not counted and none at its end ("St Marys Cottage High St" is "St
 * Marys Cottage"; "St John's Wood Road" and "Upper St Martin's Lane" have no name: until 2026-11-30
 * "St John's" and "Upper St"); a saint's street is one ("The Old Rectory St Andrews Lane" is "The
 * Old Rectory"), and so is one of a word such as Upper or Old and two more (STREETS_FIRST_WORD: "Rose
 * Cottage Old Kent Road" is "Rose Cottage", where until a review of 2026-11-30's changes it was "Rose
 * Cottage Old"). Until 2026-11-29 the whole line was the house, and a donor's erasure kept street and
 * village for seven years with it (a review).
 */
const NAME_THEN_STREET = new RegExp(
  String.raw`^((?:${SAINT}|(?!${SAINT}))\S+(?:\s+\S+)+?)(?<!\s(?:st|saint|dr|${STREETS_FIRST_WORD})\.?)\s*[-–,]?\s+(?:(?:st|dr|${STREETS_FIRST_WORD})\.?\s+)?\S+\s+${STREET_WORD_WITHIN}`,
  'i',
);
/**
 * A house name run on into a Welsh street with no comma ("Ty Gwyn Heol y Bont", "Bryn Awel Ffordd y Parc"): the name,
 * as partWithin reads one after a flat. Until a review the whole line, street and all, was claimed as the house. Not a
 * house's first word alone ("Ty Heol Fawr" was claimed as the house "Ty"): the line is read as it was before.
 */
const NAME_THEN_WELSH_STREET = new RegExp(String.raw`^((?!(?:ty|pen|bryn|plas|maes|hen|yr?)\s+(?:${WELSH_STREET})\s)\S+(?:\s+\S+)*?)\s+(?:${WELSH_STREET})\s.+$`, 'i');
/** A house name, its number and the street, with no comma ("Rose Cottage 12 High St"): the name and the number; not a description ending in "of", "above"… ("Flat on top of 12 High St"). */
const NAME_NUMBER_STREET = new RegExp(String.raw`^(\D*\p{L}\D*?)(?<!\b(?:of|on|at|in|above|over|below|behind|near|by|to|and))\s+(\d{1,4}[A-Za-z]?)\s+(?:.*\s)?${STREET_WORD_WITHIN}`, 'iu');

/** The titles before a person's name: Mr, Mrs, Ms, Miss, Mx, Dr, Rev, Revd, Prof, Sir, Lady, Lord, Dame. */
const TITLES = 'mr|mrs|ms|miss|mx|dr|rev|revd|prof|sir|lady|lord|dame';
/** A title alone, as a word (TITLES), perhaps with a dot. */
const TITLE = new RegExp(`^(?:${TITLES})\\.?$`, 'i');

/** What stands for no address at all: "N/A", "none", "unknown" (and anything with no letter or digit, "-", "?"). */
const NO_ADDRESS = /^(?:n\/?a|n\.a\.?|none|none given|nil|unknown|not known|not applicable|tbc|tba|no address|nfa|no fixed abode|same as above|x+)$/i;
/** Whom a letter is for, not where: "FAO Jane Doe", "Attn: Accounts", "Doe Ltd" (each claimed inside the house until 2026-11-30: a review). */
const ADDRESSEE = /^(?:fao|f\.a\.o\.?|attn|attention|for the attention of)\b|\b(?:ltd|limited|plc|llp)\.?$/i;
/**
 * A person's name, by the title before it ("Mrs Jane Smith", "Dr Smith"): never a house. But not a
 * building named after one ("Lord Nelson House", "Lady Margaret Hall", "Dr Smith's Surgery"; a review).
 */
const PERSON = new RegExp(String.raw`^(?:${TITLES})\.?\s(?!.*\b(?:house|hall|court|lodge|cottages?|farm|manor|surgery|mansions|buildings|chambers|college|school|church|centre|center|barn|mill|villa|place|gardens|terrace)$)`, 'i');

/**
 * The house name or number, from the start of donor_address (Almoner has no separate field).
 * The rule, on the address with its lines joined by commas (or semicolons) and its spaces
 * normalised, segment by segment (the text between commas):
 *  1. A segment that starts with a house number (12, 12a, 12 A, 12½, 12-14, 12 & 14, No. 12) gives
 *     that number, and the house ends there: "12 High Street" -> "12"; "12a, High Street" -> "12a".
 *     A Glasgow flat's number ("3/2, 12 Byres Road", "0/1 12 Byres Rd") takes the building's after it.
 *     A flat after the number's street, or in the next segment, goes first: "12 High Street, Flat 3"
 *     -> "Flat 3, 12"; "14 Byres Road, 2/1" -> "2/1, 14"; "10 Marchmont Road (2F1)" -> "2F1, 10".
 *  2. A part of a building (PART_OF_BUILDING: "Flat 3", "2nd Floor", "Top Flat", "2F1") is kept, and
 *     the next segment read by these rules: "Flat 3, 12 High St" -> "Flat 3, 12"; "Flat 3, 1st
 *     Floor, 12 High St" -> "Flat 3, 1st Floor, 12". Within one segment, a part followed by the rest
 *     of the address is read the same (perhaps after "of", "at", "-" or "/"): "Flat 2 of 12 High St"
 *     -> "Flat 2, 12"; "Flat 3 Ivy Court 5 Elm Road" -> "Flat 3, Ivy Court, 5"; "Flat 2 Mill House
 *     Mill Lane" -> "Flat 2, Mill House"; "Flat 10 Downing St" -> "Flat 10"; the donor's town and
 *     a postcode after a building's name are left out: "Flat 3 Ivy Court London" -> "Flat 3, Ivy
 *     Court" (claimed whole until 2026-11-30).
 *  3. A street (STREET) is not part of the house: after a flat it ends the house ("Flat 3, High
 *     Street" -> "Flat 3"), unless a number follows, when it is a building's name ("Flat 2, Rose
 *     Way, 4 Church St" -> "Flat 2, Rose Way, 4"); first, with a number after it, the number is the
 *     house ("Station Road, 12" -> "12"); first with none, it is passed over ("High Street" alone
 *     gives no house, where until 2026-11-29 it was claimed as the house, as were "Upper Richmond
 *     Road" and "St John's Wood Road" until 2026-11-30: a street's word with fewer than two words of
 *     a name before it, a saint's "St" not counted, is all street, and so, since then, is a square,
 *     a terrace or gardens with no number after it, "Russell Square, London" (SQUARE_FIRST), but
 *     not a house so named before a street, "The Gardens, Church Lane" (SQUARE_NAME);
 *     "Station Road, The Old Forge" gives no house either: a name after a street that came first
 *     is a district, town, county or country far more often than a house, so the donation needs
 *     attention; until 2026-11-30 "High Street, London" was claimed with the house "London"). A
 *     line that begins with one or two words and a street's word ("High Street London", "Upper
 *     Richmond Road London") is a street, whatever follows it; and a line of words then a postcode
 *     ("London SW1A 1AA") is the town's.
 *  4. A segment with a person's title ("Mrs Jane Smith", "Dr Smith") is passed over (with the house
 *     after it on its line, the name only: "Mrs Jane Smith 12 High St" -> "12"), and so, given
 *     the donor (`donor`), is their own name ("John Smith", "J Smith") when a number or a part of a
 *     building comes after it ("John Smith, 12 High St"; alone, "Woodlands" of Anne Woodlands may be
 *     the house's name), and another's name sharing one of theirs, or initials and a surname, when
 *     the house's number comes after it ("Jane Brown, 12 High St" of Jane Doe, "B. Smith, 12 High
 *     St": othersNameOf), and so is a stranger's by a common first name ("Bob Smith, 12 High St" ->
 *     "12"; with no house after it the house is not told: strangersName). A telephone number is passed over ("07700 900123", "Tel: 0113 496 0000";
 *     isTelephone). The donor's town (their donor_city, or the town their postcode's area is
 *     named after: donorsTowns), perhaps with a postcode after it, or a UK postcode ends the house
 *     ("Flat 3, London" and "Flat 3, London SW1A 1AA" -> "Flat 3"); an address of the town alone has
 *     no house, and a name after a town that came first is a county or a country (until 2026-11-30
 *     "London, Greater London" gave "London" without a donor_city, "Greater London" with one).
 *  5. Any other segment is a house name, kept whole (but first, with only the donor's town, a postcode or
 *     a county after it, or nothing, a name that ends as an area's does, "Primrose Hill, London", or with
 *     nothing of a house's name before the town, "Kensington, London", is not told from a district:
 *     AREA_END, HOUSE_CUE), with what follows it when that is a part of the
 *     building or the building's number (up to four digits): "Rose Cottage, Lane End" -> "Rose
 *     Cottage"; "The Old Mill, 12 High St" -> "The Old Mill, 12"; "Flat 2, Mill House, Mill Lane" ->
 *     "Flat 2, Mill House"; "Cartwright Hall, Room 12" -> "Cartwright Hall, Room 12". (An address
 *     with no comma, "Hillview Farm Long Road Ambridge", is cut before its street, "Hillview Farm",
 *     when two words or more come before it, or before a Welsh street, "Ty Gwyn Heol y Bont" -> "Ty
 *     Gwyn"; "Rose Cottage Lane End" cannot be told apart from its
 *     street, so the whole first line is taken; a number before the street is the building's: "Rose
 *     Cottage 12 High St" -> "Rose Cottage, 12".)
 *  6. Over 40 characters (`max`), a house name between a flat and the number goes first ("Apartment
 *     12B, 7" rather than losing the 7), and then the end is cut. A segment with no letter or digit
 *     ("-", "?"), or standing for none ("N/A", "unknown", "no fixed abode"), is passed over: an
 *     address of nothing else gives "", as an empty one does (until 2026-11-29 "-" was claimed as
 *     the house; a review).
 * The address is first put in HMRC's characters (hmrcText). Until 2026-11-29 a floor or a named flat
 * lost the building's number ("2nd Floor, 12 High St" gave "2nd Floor"), and "of 12 High St" was
 * taken for a house name (reviews).
 */
export function houseNameOrNumber(address: string | null, donor?: HouseDonor, max = HOUSE_MAX_LENGTH): string {
  const ownName = donor === undefined ? undefined : donorsOwnName(donor);
  const othersName = othersNameOf(donor);
  const towns = donorsTowns(donor);
  const segments = (address ?? '')
    .split(/\r\n|\r|\n/)
    .map((line) => normaliseSpaces(hmrcText(normaliseSpaces(line))))
    .join(',')
    .split(/[,;]/)
    .map((segment) => segment.trim())
    .map((segment) => withoutPersonsName(segment, towns, ownName)) // "Mrs Jane Smith 12 High St": "12 High St"
    .filter((segment) => /[\p{L}\p{N}]/u.test(segment) && !NO_ADDRESS.test(segment) && !ADDRESSEE.test(segment) && !isTelephone(segment))
    // The donor's own name, when the house follows it ("John Smith, 12 High St"); alone, it may be the house's ("Woodlands, Station Road" of Anne Woodlands).
    .filter((segment, i, all) => !ownName?.(segment) || !all.slice(i + 1).some((later) => leadingNumber(later) !== undefined || PART_OF_BUILDING.test(later) || partWithin(later, towns) !== undefined))
    // Another's name (othersNameOf), when the house's number follows it ("Jane Brown, 12 High St", "B. Smith, Flat 2, 12 High St"),
    // or a house's name that is clearly one ("Jane Brown, Rose Cottage, Mill Lane"; CLEAR_HOUSE_NAME).
    .filter((segment, i, all) => !othersName(segment) || (!CLEAR_HOUSE_NAME.test(all[i + 1] ?? '') && !all.slice(i + 1).some((later) => leadingNumber(later) !== undefined || partWithin(later, towns)?.number !== undefined)));
  const parts: { text: string; name: boolean }[] = [];
  let afterPlace = false; // a street or the donor's town came first, with no house before it
  for (let i = 0; i < segments.length && parts.length < 4; i++) {
    let segment = i === 0 ? segments[i]! : segments[i]!.replace(/^(?:of|at)\s+(?=\d)/i, ''); // "Flat 2, at 12 High St"
    const next = segments[i + 1] ?? '';
    const place = townOrPostcode(segment, towns);
    if (place !== undefined) {
      if (parts.length > 0) break; // "Flat 3, London", "Flat 3, London SW1A 1AA": the town, after the house
      if (place === 'town') {
        afterPlace = true; // an address of the town alone has no house, nor "London, Greater London" (a postcode alone is said to be one: houseIsPostcode)
        continue;
      }
    }
    if (PART_OF_BUILDING.test(segment)) {
      parts.push({ text: segment, name: false });
      continue;
    }
    const within = partWithin(segment, towns);
    if (within) {
      parts.push({ text: within.part, name: false });
      if (within.name !== '') parts.push({ text: within.name, name: true });
      if (within.number === undefined) {
        if (within.open && PART_OF_BUILDING.test(next)) continue; // "Room 5 Riverside Court, 2nd Floor, 1 Quay St": read on, as after a comma
        const building = within.open ? buildingNumber(next) : undefined; // "Room 5 Riverside Court, 1 Quay St"
        if (building) parts.push({ text: building, name: false });
        break;
      }
      segment = within.number;
    }
    const number = leadingNumber(segment);
    // Five digits or more are no UK house's number (buildingNumber): "12345 Elm Rd" was claimed with the house "12345" (the day's
    // last review). Abroad (postcode X) they may be: "10001 Main Street".
    if (number && !ukHouseNumber(number.value) && hmrcPostcode(donor?.donor_postcode ?? null).value !== 'X') return '';
    if (number) {
      const building = number.value.includes('/') ? leadingNumber(number.rest === '' ? next : number.rest) : undefined;
      const flatAfter = parts.length === 0 && !building ? trailingPartOfBuilding(number.rest, next) : undefined;
      if (flatAfter) parts.push({ text: flatAfter, name: false }); // "12 High Street, Flat 3" -> "Flat 3, 12"
      parts.push({ text: number.value, name: false });
      if (building) parts.push({ text: building.value, name: false });
      break;
    }
    if (parts.length === 0 && !/\d/.test(segment) && STREET_FIRST.test(segment)) {
      afterPlace = true; // "High Street London", "Church Lane Ambridge": a street, then its town, on one line (claimed whole as the house until 2026-11-30)
      continue;
    }
    if (parts.length === 0 && !/\d/.test(segment) && SQUARE_FIRST.test(segment) && buildingNumber(next) === undefined && !SQUARE_NAME.test(`${segment}, ${next}`)) {
      afterPlace = true; // "Russell Square, London": a street (claimed as the house until 2026-11-30)
      continue;
    }
    if (STREET.test(segment)) {
      const numbered = buildingNumber(next) !== undefined;
      if (!numbered && parts.length > 0) break; // "Flat 3, High Street": the street, after the house
      if (numbered && parts.length === 0) continue; // "Station Road, 12": the number is the house
      // First, with no house name before it (NAME_THEN_STREET), not the house: "High Street", "Upper Richmond Road"
      // (claimed as the house until 2026-11-30: a review); a number or a flat may follow ("Station Road, 12").
      const nameless = TRAILING_STREET.exec(segment)?.[1] === '' || (!/\d/.test(segment) && STREET_AT_END.test(segment) && !NAME_THEN_STREET.test(segment));
      if (parts.length === 0 && nameless) {
        afterPlace = true;
        continue;
      }
    }
    const numberedStreet = NAME_NUMBER_STREET.exec(segment); // "Rose Cottage 12 High St"
    if (numberedStreet) {
      if (!ownName?.(numberedStreet[1]!) && !othersName(numberedStreet[1]!)) parts.push({ text: numberedStreet[1]!, name: true }); // "John Smith 12 High St": the number alone
      parts.push({ text: leadingNumber(numberedStreet[2]!)!.value, name: false });
      break;
    }
    // A name after a street that came first is a district, town, county or country far more often than a
    // house ("High Street, Kensington, London", "Main St, Ambridge, Borsetshire", each claimed as the house
    // until 2026-11-30: a review): no house, and the donation needs attention.
    if (afterPlace && parts.length === 0) break;
    // Another's name (othersNameOf) with more of a house after it than a street or a town ("Jane Brown, Lane End", "Jane Brown,
    // Flat 2") is a person's, the house not told: until a review of 2026-11-30's changes it was claimed in the house. Before a
    // street it may be the house's ("Rose Bower, Mill Lane" of Rose Doe, "Lee Rise, Elm Rd" of Ann Lee), and is kept.
    if (othersName(segment) && !ownName?.(segment) && next !== '' && !STREET.test(next) && townOrPostcode(next, towns) === undefined) return '';
    // A stranger's name by a common first name (strangersName), with no house after it that was read: alone, or before a street
    // or a town, it is a person's, not a house's ("Peter Jackson, Mill Lane"), and the house is not told.
    if (strangersName(segment) && !ownName?.(segment)) return '';
    // A name of three words at most first, with no street in it, and nothing after it but the donor's town, a postcode or a
    // county: one that ends as an area's or a street's does (AREA_END: "Primrose Hill, London", "The Grove, Leeds", "Mill
    // Green, Ingatestone", or alone, "Mill Green") may be either, and one with nothing of a house's name ("Kensington, London",
    // "Old Trafford, Manchester", "Sutton Coldfield, West Midlands") is a district or a lesser town far more often than a house
    // (HOUSE_CUE: "Rose Cottage, Ambridge", "The Old Rectory, London" are houses): the house is not told. Each was claimed as
    // the house until a review. Before a street or a number it is a house's name ("Rose Hill, Mill Lane", "Fernbank, 4 Elm Rd").
    if (parts.length === 0 && !/\d/.test(segment) && !STREET.test(segment) && segment.split(' ').length <= 3 && !ownName?.(segment)) {
      const placeAfter = next !== '' && (townOrPostcode(next, towns) !== undefined || COUNTY.test(next));
      if (AREA_END.test(segment) && (placeAfter || next === '')) return '';
      if (placeAfter && !HOUSE_CUE.test(segment)) return '';
    }
    parts.push({ text: NAME_THEN_STREET.exec(segment)?.[1] ?? NAME_THEN_WELSH_STREET.exec(segment)?.[1] ?? segment, name: true });
    if (PART_OF_BUILDING.test(next)) continue; // "Cartwright Hall, Room 12"
    const building = buildingNumber(next);
    if (building) parts.push({ text: building, name: false });
    break;
  }
  let house = parts.map((p) => p.text).join(', ');
  if (Array.from(house).length > max && parts.length > 2) {
    const withoutNames = parts
      .filter((p, i) => !p.name || i === 0)
      .map((p) => p.text)
      .join(', ');
    if (Array.from(withoutNames).length <= max) house = withoutNames;
  }
  return cut(house, max).replace(/[\s,]+$/, '');
}

/** What else a donation says that tells a house from its donor's name or town: the names, the city and the postcode. */
export type HouseDonor = Partial<Pick<StoredDonation, 'donor_first_name' | 'donor_last_name' | 'donor_city' | 'donor_postcode'>>;

/**
 * What follows a person's name (PERSON) on its line: from the first of the five words after the title
 * that begins a house number or a part of a building ("Mrs Jane Smith 12 High St": "12 High St"; "Mrs
 * Jane Smith Flat 3 12 High St": "Flat 3 12 High St"), or "" when none does: the whole line is the
 * person's. A building named after a person loses its name, never its number ("Lord Nelson House 3
 * Quay St": "3 Quay St"), as what is the person's and what the building's cannot be told ("Mrs Jane
 * Smith Rose Cottage 12 High St"). Until 2026-11-30 the whole line was passed over, and "Mrs Jane
 * Smith 12 High St" needed attention (a review). A telephone number (a number of five digits or more, as
 * a house's has at most four, or a word "Tel" or "Mob") ends the name and its line: "Mrs Jane Doe 07700
 * 900123, Rose Cottage" gave the house "07700" until a review of that day's changes. A flat's word that is
 * also a surname (SURNAME_PART), before a number and a street, is the name's: "Mrs Jane Block 12 High St" is
 * "12 High St" (claimed with the house "Block 12" until that review).
 */
function afterPersonsName(segment: string, towns: ReadonlySet<string>): string {
  const words = segment.split(' ');
  for (let n = 1; n < Math.min(words.length, 7); n++) {
    const rest = words.slice(n).join(' ');
    // A telephone number after the name, never the house ("Mrs Jane Doe 07700 900123", "Mrs Jane Doe Tel 07700 900123").
    if (TELEPHONE_MARK.test(words[n]!) || (leadingNumber(rest) !== undefined && buildingNumber(rest) === undefined)) return '';
    // A surname that is a flat's word, before a number and a street: "Mrs Jane Block 12 High St" is "12 High St", not "Block 12".
    const street = words.slice(n + 2).join(' ');
    if (SURNAME_PART.test(words[n]!) && buildingNumber(words.slice(n + 1).join(' ')) !== undefined && street !== '' && !/\d/.test(street) && (STREET_AT_END.test(street) || STREET_FIRST.test(street))) {
      return words.slice(n + 1).join(' ');
    }
    if (leadingNumber(rest) !== undefined || PART_OF_BUILDING.test(rest) || partWithin(rest, towns) !== undefined) return rest;
  }
  return '';
}

/** A title at a line's start (TITLES), as a word. */
const TITLE_FIRST = new RegExp(String.raw`^(?:${TITLES})\.?\s`, 'i');
/** A title only a person has, never a building named after one ("Lord Nelson House", "Lady Margaret Hall" are). */
const PERSONS_TITLE = /^(?:mr|mrs|ms|miss|mx)\.?$/i;

/**
 * A segment without the person's name at its start: after a title (PERSON: afterPersonsName), and on a
 * line that ends in a building's word, which PERSON leaves for a building named after a person ("Lord
 * Nelson House"), from the first word after the name that begins the house's number or a part of a
 * building ("Mrs Ann Court 3 Ivy Court": "3 Ivy Court"; "Mrs Jane Doe Flat 2 Elm Court"), else after
 * the donor's own name ("Mrs Jane Doe Manor Farm": "Manor Farm") or at a "The" ("Mrs Mary Smith The
 * Barn": "The Barn"); with none of these, the line is another's name and a house that cannot be told
 * apart ("Mrs Mary Smith Manor Farm": "") after Mr, Mrs, Ms, Miss or Mx, and a building's name
 * otherwise ("Lady Margaret Hall"). Without a title, the donor's own name before a number or a part of
 * a building on its line is left out ("Jane Doe Flat 3 Ivy Court London": "Flat 3 Ivy Court London").
 * Until a review of 2026-11-30's changes each such line was claimed whole, the name with it.
 */
function withoutPersonsName(segment: string, towns: ReadonlySet<string>, ownName: ((segment: string) => boolean) | undefined): string {
  if (PERSON.test(segment)) return afterPersonsName(segment, towns);
  const words = segment.split(' ');
  if (TITLE_FIRST.test(segment)) {
    const rest = afterPersonsName(segment, towns);
    if (rest !== '') return rest;
    for (let n = words.length - 1; n >= 2; n--) if (ownName?.(words.slice(1, n).join(' '))) return words.slice(n).join(' ');
    const the = words.findIndex((w, i) => i >= 2 && /^the$/i.test(w));
    if (the > 0) return words.slice(the).join(' ');
    // "Dr Ann Mill": a doctor's, a vicar's or a professor's first name, then a building's word, is a person's too (until a review, claimed as the house).
    return PERSONS_TITLE.test(words[0]!) || (/^(?:dr|rev|revd|prof)\.?$/i.test(words[0]!) && GIVEN_NAMES.has((words[1] ?? '').toLowerCase())) ? '' : segment;
  }
  if (ownName === undefined) return segment;
  for (let n = Math.min(words.length - 1, 4); n >= 1; n--) {
    const rest = words.slice(n).join(' ');
    if (ownName(words.slice(0, n).join(' ')) && (buildingNumber(rest) !== undefined || PART_OF_BUILDING.test(rest) || partWithin(rest, towns) !== undefined)) return rest;
  }
  return segment;
}

/**
 * A flat's word that is also a surname ("Mrs Jane Block", "Mr Tom Room"). Not Unit or Studio, far
 * more often a flat than a name: with them, "Mrs J Doe Unit 4 Elm Rd" lost its unit (a review).
 */
const SURNAME_PART = /^(?:block|room|floor|level|suite)$/i;
/** The word before a telephone number: "Tel", "Tel:", "Tel.", "Telephone", "Phone", "Mob", "Mobile". */
const TELEPHONE_WORD = String.raw`(?:tel|telephone|phone|mob|mobile)\.?:?`;
const TELEPHONE_MARK = new RegExp(`^${TELEPHONE_WORD}$`, 'i');
/** A telephone number, perhaps after its mark (isTelephone). */
const TELEPHONE = new RegExp(String.raw`^(?:(${TELEPHONE_WORD})\s?)?(\+?[\d\s()-]+)$`, 'i');
/**
 * A segment that is a telephone number: digits, spaces, "+", brackets and dashes, nine digits or more, or six
 * after its mark ("07700 900123", "+44 7700 900123", "Tel: 0113 496 0000"). A house's number has at most four
 * digits; until a review of 2026-11-30's changes "07700 900123, Rose Cottage" was claimed with the house "07700".
 */
function isTelephone(segment: string): boolean {
  const m = TELEPHONE.exec(segment);
  return m !== null && m[2]!.replace(/\D/g, '').length >= (m[1] === undefined ? 9 : 6);
}

/**
 * Another person's name without a title, which before the house's number is passed over: two or
 * three names, "&" or "and" aside, one of them the donor's first or last name ("Jane Brown", a
 * maiden name, or "Bob Doe", a partner, of Jane Doe), or initials and a surname ("B. Smith", "J R
 * Smith"); none of them a building's or a place's word ("Doe House", "Rose Mews", "Holly Bank").
 * Until 2026-11-30 only the donor's own name was passed over, and "Jane Brown, 12 High St" was
 * claimed with the house "Jane Brown, 12" (a review). Only before a number: a house so named loses
 * its name, never the house. A stranger's name is one by a common first name (strangersName: "Bob Smith").
 */
function othersNameOf(donor: HouseDonor | undefined): (segment: string) => boolean {
  const donorsNames = new Set([...nameWords(donor?.donor_first_name), ...nameWords(donor?.donor_last_name)]);
  return (segment) => {
    if (!/^[\p{L}\s.'’&-]+$/u.test(segment) || PLACE_WORD.test(segment)) return false;
    if (INITIALS_AND_SURNAME.test(segment)) return true;
    const names = nameWords(segment).filter((w) => w !== '&' && w !== 'and');
    return names.length >= 2 && names.length <= 3 && (names.some((w) => donorsNames.has(w)) || strangersName(segment));
  };
}

/**
 * A stranger's name: two or three words of letters, the first a common first name (GIVEN_NAMES), none a building's or a
 * place's word ("Bob Smith", "Sarah Jane Connor"; not "Holly Bank", "Jack's Barn"). Before the house's number or a clear
 * house's name it is passed over, as a name with a title is ("Bob Smith, 12 High St" -> "12"); with no house after it, the
 * house is not told. Until a review it was claimed in the house, "Bob Smith, 12", and "David Lloyd, Rose Cottage" as "David Lloyd".
 */
function strangersName(segment: string): boolean {
  if (!/^[\p{L}\s.'’-]+$/u.test(segment) || PLACE_WORD.test(segment)) return false;
  const words = segment.split(' ');
  return words.length >= 2 && words.length <= 3 && GIVEN_NAMES.has(words[0]!.toLowerCase()) && words.every((w) => /^\p{Lu}/u.test(w));
}

/**
 * Common first names of UK donors, for strangersName. Not those that are as often a house's word or a place's ("Rose",
 * "Holly", "Ivy", "Hazel", "Heather", "Glen", "Ben", "Bryn", "Grace", "Victoria", "Albert"), which stay a house's name.
 */
const GIVEN_NAMES = new Set(
  `adam alan alex alexander alice alison amanda amy andrew angela ann anna anne anthony barbara barry benjamin bob brian carol
  caroline catherine charles charlotte chris christine christopher claire colin craig daniel david deborah dennis derek diane donald
  dorothy edward elaine elizabeth ellen emily emma eric fiona frances frank gareth gary geoffrey gillian gordon graham harry helen
  ian jack james jane janet jason jean jennifer jessica joan john jonathan joseph julie karen kate katherine keith kevin laura lee
  linda lisa louise lucy margaret mark martin mary matthew michael michelle mohammed muhammad nicholas nicola nigel oliver pamela
  patricia patrick paul pauline peter philip rachel raymond rebecca richard robert ronald ruth sally samuel sandra sarah sharon
  simon stephen steven susan thomas timothy tom tony tracey valerie william`.split(/\s+/),
);

/** A segment that is clearly a house's name, by a building's word at its end ("Rose Cottage", "Manor Farm", "The Old Rectory"), not a street's. */
const CLEAR_HOUSE_NAME = new RegExp(String.raw`^[^\d]*\s(?:${BUILDING_WORDS}|rectory|vicarage|bungalow|farmhouse)$`, 'i');

/**
 * The last word of an area's or a street's name that is as often a house's (Hill, Green, Grove, Heath, Common, Park, Place,
 * Mews, Wharf, Fields, Vale, Rise, Gate, Cross, End): first in the address, of three words at most, with nothing after it
 * but the donor's town, a postcode or a county, the house is not told ("Primrose Hill, London", "The Grove, Leeds", "Mill
 * Green"); before a street it is a house's ("Rose Hill, Mill Lane"). Not Court, more often a house's or a block's ("Ivy Court").
 */
const AREA_END = /(?:^|\s)(?:hill|green|grove|heath|common|park|place|mews|wharf|fields|vale|rise|gate|cross|end)$/i;
/** A county or a region, after a place's name: "West Midlands", "Greater Manchester", "Co Antrim", "Lancashire", "Kent". */
const COUNTY = /^(?:(?:north|south|east|west|greater|mid)\s+)?(?:[\p{L}-]+shire|midlands|yorkshire|sussex|kent|essex|surrey|norfolk|suffolk|devon|cornwall|dorset|somerset|cumbria|merseyside|middlesex|london|manchester|glamorgan|lothian|fife|tyne and wear|(?:county|co\.?)\s+\p{L}+)$/iu;
/**
 * What shows a name is a house's, not a place's: a building's word at its end (CLEAR_HOUSE_NAME: "Rose Cottage", "Manor
 * Farm"), or "The" at its start ("The Old Forge", "The Laurels"), or a Welsh, Gaelic or Cornish house's first word ("Ty
 * Gwyn", "Tigh na Mara", "Chy an Mor", "Bryn Awel").
 */
const HOUSE_CUE = new RegExp(String.raw`${CLEAR_HOUSE_NAME.source}|^(?:the|ty|tŷ|tigh|chy|bwthyn|plas|bryn|pen|hafod|fferm)\s|\s(?:cottage|forge|barn|bungalow|lodge|house)s?$`, 'iu');

/** Initials, then a surname: "B. Smith", "J R Smith", "J.R. Smith". */
const INITIALS_AND_SURNAME = /^(?:\p{L}\.\s?|\p{L}\s){1,3}\p{L}[\p{L}'’-]+$/u;
/**
 * A word of a building's or a place's name, never a person's: "Doe House", "Rose Mews", "Holly Bank", "Jane Street"; and a
 * Gaelic or Welsh word of a house's name after a first name's ("Craig Dhu", "Craig Mhor", "Craig Fawr", "Craig Goch": craig,
 * a rock), which strangersName took for a stranger's name and sent to needs attention.
 */
const PLACE_WORD = new RegExp(String.raw`\b(?:${BUILDING_WORDS}|${STREET_NAMES}|st|dr|square|terrace|gardens|mews|hill|grove|green|place|park|view|bank|end|side|wood|field|lea|croft|rise|ridge|dene|garth|holt|haven|brook|dale|heights|nook|orchard|meadows?|acres?|dhu|dubh|mhor|beag|bheag|ruadh|ddu|fawr|fach|goch)\b`, 'i');

/** A name's words, as the donor's names are compared: in HMRC's characters, lower case, split at spaces, apostrophes, dots and hyphens. */
function nameWords(text: string | null | undefined): string[] {
  return hmrcText(normaliseSpaces(text ?? ''))
    .toLowerCase()
    .split(/[\s'.-]+/)
    .filter((w) => w !== '');
}

/**
 * The donor's own name at the head of the address, without a title ("John Smith, 12 High St", "J
 * Smith", "Smith"): every word one of their names', an initial, a title or "&", their last name
 * among them. Until 2026-11-29 it was taken for a house name ("John Smith, 12"), which HMRC cannot
 * match to the donor. A house named from other words too ("Smith House") stays a house.
 */
function donorsOwnName(donor: HouseDonor): ((segment: string) => boolean) | undefined {
  const last = new Set(nameWords(donor.donor_last_name));
  if (last.size === 0) return undefined;
  const own = new Set([...nameWords(donor.donor_first_name), ...last]);
  return (segment) => {
    // "The Smiths", "The Joneses", "The Jones": the household, by the donor's last name in the plural (or one ending in s) with "The"
    // before it (claimed in the house until a review). Only a last name ending in s takes -es: "The Birches" of Jo Birch is a house. "The Lodge", "The Grange", "The Croft" of a Mr Lodge, Grange or Croft are
    // houses, as they were before that review (which sent them to needs attention as the donor's name).
    const plural = (w: string): string | undefined =>
      w.endsWith('ses') && last.has(w.slice(0, -2)) ? w.slice(0, -2) : w.endsWith('s') && last.has(w.slice(0, -1)) ? w.slice(0, -1) : w.endsWith('s') && last.has(w) ? w : undefined;
    const words = nameWords(segment);
    const household = /^the\s/i.test(segment) && words.slice(1).some((w) => plural(w) !== undefined) ? words.slice(1).map((w) => plural(w) ?? w) : undefined;
    const ws = household ?? words;
    return ws.some((w) => last.has(w)) && ws.every((w) => own.has(w) || TITLE.test(w) || /^\p{L}$/u.test(w) || w === '&' || w === 'and');
  };
}

/**
 * The donor's town (donorsTowns), perhaps with a UK postcode after it, or a postcode alone: where a
 * house has ended ("Flat 3, London", "Flat 3, London SW1A 1AA").
 */
function townOrPostcode(segment: string, towns: ReadonlySet<string>): 'town' | 'postcode' | undefined {
  const words = segment.split(' ');
  // The donor's outward code alone at the end ("Uxbridge UB8", "London W4", "UB8"): until a review, "Uxbridge UB8" was claimed as the house.
  if (towns.has(`outward:${words.at(-1)!.toLowerCase()}`) && !PART_OF_BUILDING.test(segment)) {
    const before = words.slice(0, -1).join(' ');
    if (before === '') return 'postcode';
    if (!/\d/.test(before)) return 'town';
  }
  for (const n of [2, 1]) {
    if (words.length < n || !UK_POSTCODE.test(hmrcPostcode(words.slice(-n).join(' ')).value)) continue;
    const before = words.slice(0, -n).join(' ');
    if (before === '') return 'postcode';
    // A line of words without a number, then a postcode, is the town's, whatever the town: "London
    // SW1A 1AA" with no donor_city was claimed as the house (a review, 2026-11-30).
    if (towns.has(placeKey(before)) || !/\d/.test(before)) return 'town';
  }
  return towns.has(placeKey(segment)) ? 'town' : undefined;
}

/**
 * The names the donor's town goes by, as placeKey writes them: their donor_city, and the town their
 * postcode's area is named after (POSTCODE_AREA_TOWNS), given a donor_city or not. Until 2026-11-30
 * only donor_city was known, and an address of "London" or "Leeds" sent without one was claimed as
 * the house (a review).
 */
function donorsTowns(donor: HouseDonor | undefined): ReadonlySet<string> {
  const towns = new Set<string>();
  const city = placeKey(hmrcText(normaliseSpaces(donor?.donor_city ?? '')));
  if (city !== '') towns.add(city);
  const postcode = hmrcPostcode(donor?.donor_postcode ?? null);
  const area = postcode.valid ? /^[A-Z]+/.exec(postcode.value)?.[0] : undefined; // "X" (abroad) has none
  const named = area === undefined ? undefined : POSTCODE_AREA_TOWNS[area];
  for (const town of named?.split('|') ?? []) towns.add(placeKey(town));
  if (postcode.valid && postcode.value !== 'X') towns.add(`outward:${postcode.value.split(' ')[0]!.toLowerCase()}`); // townOrPostcode: "Uxbridge UB8"
  return towns;
}

/** A place's name for comparing: lower case, without dots or apostrophes, a hyphen as a space, "Saint" as "st" ("St. Albans", "Stoke-on-Trent"). */
function placeKey(name: string): string {
  return name
    .toLowerCase()
    .replace(/[.'’]/g, '')
    .replace(/-/g, ' ')
    .replace(/\bsaint\b/g, 'st')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * The town (or island, or county) each UK postcode area is named after, by Royal Mail, with a short
 * form donors write ("Newcastle"): LS is Leeds; E, EC (also the City of London), N, NW, SE, SW, W
 * and WC are London, and so, as their donors write, are the areas of outer London (BR, CR, DA, EN,
 * HA, IG, KT, RM, SM, TW, UB). An address of only the donor's own area's town is no house; a house named after another
 * area's town ("Lincoln" of a donor in PE) is a house. Only the area's one town: "Otley" (LS21) is
 * known by donor_city only.
 */
const POSTCODE_AREA_TOWNS: Readonly<Record<string, string>> = {
  AB: 'Aberdeen', AL: 'St Albans', B: 'Birmingham', BA: 'Bath', BB: 'Blackburn', BD: 'Bradford', BH: 'Bournemouth', BL: 'Bolton',
  BN: 'Brighton', BR: 'Bromley|London', BS: 'Bristol', BT: 'Belfast', CA: 'Carlisle', CB: 'Cambridge', CF: 'Cardiff', CH: 'Chester',
  CM: 'Chelmsford', CO: 'Colchester', CR: 'Croydon|London', CT: 'Canterbury', CV: 'Coventry', CW: 'Crewe', DA: 'Dartford|London', DD: 'Dundee',
  DE: 'Derby', DG: 'Dumfries', DH: 'Durham', DL: 'Darlington', DN: 'Doncaster', DT: 'Dorchester', DY: 'Dudley', E: 'London',
  EC: 'London|City of London', EH: 'Edinburgh', EN: 'Enfield|London', EX: 'Exeter', FK: 'Falkirk', FY: 'Blackpool', G: 'Glasgow', GL: 'Gloucester',
  GU: 'Guildford', GY: 'Guernsey', HA: 'Harrow|London', HD: 'Huddersfield', HG: 'Harrogate', HP: 'Hemel Hempstead', HR: 'Hereford',
  HS: 'Outer Hebrides', HU: 'Hull|Kingston upon Hull', HX: 'Halifax', IG: 'Ilford|London', IM: 'Isle of Man', IP: 'Ipswich', IV: 'Inverness',
  JE: 'Jersey', KA: 'Kilmarnock', KT: 'Kingston upon Thames|Kingston|London', KW: 'Kirkwall', KY: 'Kirkcaldy', L: 'Liverpool', LA: 'Lancaster',
  LD: 'Llandrindod Wells', LE: 'Leicester', LL: 'Llandudno', LN: 'Lincoln', LS: 'Leeds', LU: 'Luton', M: 'Manchester', ME: 'Rochester',
  MK: 'Milton Keynes', ML: 'Motherwell', N: 'London', NE: 'Newcastle upon Tyne|Newcastle', NG: 'Nottingham', NN: 'Northampton',
  NP: 'Newport', NR: 'Norwich', NW: 'London', OL: 'Oldham', OX: 'Oxford', PA: 'Paisley', PE: 'Peterborough', PH: 'Perth',
  PL: 'Plymouth', PO: 'Portsmouth', PR: 'Preston', RG: 'Reading', RH: 'Redhill', RM: 'Romford|London', S: 'Sheffield', SA: 'Swansea',
  SE: 'London', SG: 'Stevenage', SK: 'Stockport', SL: 'Slough', SM: 'Sutton|London', SN: 'Swindon', SO: 'Southampton', SP: 'Salisbury',
  SR: 'Sunderland', SS: 'Southend-on-Sea|Southend', ST: 'Stoke-on-Trent|Stoke', SW: 'London', SY: 'Shrewsbury', TA: 'Taunton',
  TD: 'Galashiels', TF: 'Telford', TN: 'Tonbridge', TQ: 'Torquay', TR: 'Truro', TS: 'Cleveland|Middlesbrough', TW: 'Twickenham|London',
  UB: 'Southall|London', W: 'London', WA: 'Warrington', WC: 'London', WD: 'Watford', WF: 'Wakefield', WN: 'Wigan', WR: 'Worcester',
  WS: 'Walsall', WV: 'Wolverhampton', YO: 'York', ZE: 'Lerwick',
};

/**
 * A flat written after its building's number and street ("12 High Street, Flat 3", "12 High Street
 * Flat 3"): HMRC's order puts it first, "Flat 3, 12". Until 2026-11-29 it was dropped ("12"), and
 * every flat of the building was one house.
 */
function trailingPartOfBuilding(rest: string, next: string): string | undefined {
  const part = (text: string) => {
    const bare = text.replace(/^\((.*)\)$/, '$1'); // "10 Marchmont Road (2F1)"
    return PART_OF_BUILDING.test(bare) || /^\d+\/\d+$/.test(bare) ? bare : undefined; // "14 Byres Road, 2/1": a Glasgow flat
  };
  const after = part(next);
  if (after) return after;
  const words = rest.split(' ');
  for (let n = 1; n < words.length; n++) {
    const tail = part(words.slice(n).join(' '));
    if (tail) return tail;
  }
  return undefined;
}

/**
 * A part of a building at the start of a segment with no comma, then the rest: a house name, the
 * building's number (from its start), neither, or both ("Flat 3 Ivy Court 5 Elm Road": "Flat 3",
 * "Ivy Court", "5 Elm Road"); a street is no name ("Flat 2 Mill House Mill Lane", "Flat 3 High
 * Street London"), nor the donor's town or a postcode at the end ("Flat 3 Ivy Court London SW1A
 * 1AA": "Flat 3", "Ivy Court"). A name alone after a flat's number or a part of two words or more
 * ("Flat 3 Ivy Court", "Top Flat The Old Mill") is the building's (until 2026-11-30 the line was
 * claimed whole, town and all: a review), and `open` when nothing after it ended the house, so that
 * the next segment may give the building's number ("Room 5 Riverside Court, 1 Quay St"), or a part of
 * it and then the number ("Room 5 Riverside Court, 2nd Floor, 1 Quay St": until a review of that day's
 * changes, "Room 5, Riverside Court"). A part of one word with no number is a house's name ("Basement
 * Cottage").
 */
function partWithin(segment: string, towns: ReadonlySet<string>): { part: string; name: string; number?: string; open?: boolean } | undefined {
  const words = segment.split(' ');
  for (let n = Math.min(words.length - 1, 5); n >= 1; n--) {
    const part = words.slice(0, n).join(' ');
    if (!PART_OF_BUILDING.test(part)) continue;
    const rest = words
      .slice(n)
      .join(' ')
      .replace(/^(?:of|at|[-/:])\s*/i, '');
    if (leadingNumber(rest)) return { part, name: '', number: rest };
    // The building's number after a name: "Ivy Court 5 Elm Road".
    const inside = /^(.*?\D)\s+(?=\d)(.*)$/.exec(rest);
    if (inside && leadingNumber(inside[2]!) && !/\d/.test(inside[1]!)) return { part, name: inside[1]!.replace(/\s+(?:of|at)$/i, ''), number: inside[2]! };
    const name = withoutTownAtEnd(rest, towns);
    if (/\d/.test(name)) continue;
    // A street, with a house's name before it ("Mill House Mill Lane", "Ivy Court High Street London") or none
    // ("Downing St", "St Johns Wood Road": until 2026-11-30 "St Johns"), as at the start of an address.
    const beforeStreet = NAME_THEN_STREET.exec(name);
    if (beforeStreet) return { part, name: beforeStreet[1]! };
    if (STREET_AT_END.test(name) || STREET_FIRST.test(name)) return { part, name: '' };
    const welsh = TRAILING_STREET.exec(name); // "Ty Gwyn Heol y Frenhines"
    if (welsh) return { part, name: welsh[1]! };
    if (/\d/.test(part) || part.includes(' ')) return { part, name, open: name === rest };
  }
  return undefined;
}

/**
 * `text` without a UK postcode at its end, and then without the donor's town (donorsTowns), when that is a
 * whole place's name: "Ivy Court London SW1A 1AA" is "Ivy Court"; "Old Sutton" stays (DANGLING).
 */
function withoutTownAtEnd(text: string, towns: ReadonlySet<string>): string {
  let words = text.split(' ');
  for (const n of [2, 1]) {
    if (words.length >= n && UK_POSTCODE.test(hmrcPostcode(words.slice(-n).join(' ')).value)) {
      words = words.slice(0, -n);
      break;
    }
  }
  for (let n = Math.min(words.length, 4); n >= 1; n--) {
    if (towns.has(placeKey(words.slice(-n).join(' ')))) {
      if (!DANGLING.test(words[words.length - n - 1] ?? '')) words = words.slice(0, -n); // "Old Sutton", "City of London": a place's whole name
      break;
    }
  }
  return words.join(' ');
}

/**
 * A word that a place's name goes on after, never a building's name's last: "Old Sutton", "Little London",
 * "City of London" are not the town after "Old", "Little", "City of" (until a review of 2026-11-30's
 * changes "Flat 6 Old Sutton" gave "Flat 6, Old").
 */
const DANGLING = new RegExp(`^(?:${STREETS_FIRST_WORD}|greater|central|inner|outer|of|on|upon|in|under|by|next|the|le|st|saint)$`, 'i');

/**
 * A UK postcode as HMRC wants it: capital letters, one space before the last three characters
 * ("sw1a1aa" and " SW1A   1AA " both become "SW1A 1AA"). `valid` says whether it can be a real
 * postcode (REAL_POSTCODE), which HMRC's checker then takes. A letter O typed where only a digit can
 * stand, or a 0 where only a letter can, is read as meant when one reading alone can be real ("N1 OAA"
 * -> "N1 0AA", "0X1 4AA" -> "OX1 4AA", "N1O 1AA" -> "N10 1AA"). HMRC's convention for a donor living
 * outside the UK is "X" in the postcode column; a recorded "X" (any case) is kept as X and counts as
 * valid. Anything else cannot be claimed as it stands.
 */
export function hmrcPostcode(raw: string | null): { value: string; valid: boolean } {
  const parts = normaliseSpaces(raw ?? '').toUpperCase().split(' ').filter(Boolean);
  const compact = parts.join('');
  if (compact === '') return { value: '', valid: false };
  if (compact === 'X') return { value: 'X', valid: true };
  // A space typed anywhere but before the last three characters is kept where it is, and so fails: moved,
  // "W11 AA" became "W1 1AA", another real postcode (until 2026-11-29; a review). Spaces inside the
  // outward code ("S W1A 1AA") say nothing of where it ends.
  const inward = parts.length === 1 ? compact.slice(-3) : parts.at(-1)!;
  if (inward.length !== 3) return { value: parts.join(' '), valid: false };
  const value = compact.length > 3 ? `${compact.slice(0, -3)} ${inward}` : compact;
  if (REAL_POSTCODE.test(value)) return { value, valid: true };
  const meant = [...oAndZeroSwapped(value)].filter((v) => REAL_POSTCODE.test(v));
  return meant.length === 1 ? { value: meant[0]!, valid: true } : { value, valid: false };
}

/** `value` with each of its letters O and digits 0 (at most six of them) swapped or not, every way but as it is. */
function* oAndZeroSwapped(value: string): Generator<string> {
  const at = [...value].flatMap((c, i) => (c === 'O' || c === '0' ? [i] : []));
  if (at.length > 6) return;
  for (let mask = 1; mask < 1 << at.length; mask++) {
    const chars = [...value];
    at.forEach((i, bit) => {
      if (mask & (1 << bit)) chars[i] = chars[i] === 'O' ? '0' : 'O';
    });
    yield chars.join('');
  }
}

/**
 * The shapes HMRC's checker takes: GIR 0AA, or an outward code (A9, A99, A9A, AA9, AA99 or AA9A,
 * where a second letter is never I or Z), a space, a digit and two letters.
 */
const UK_POSTCODE = /^(?:GIR 0AA|[A-Z][A-HJ-Y]?[0-9][0-9A-Z]? [0-9][A-Z]{2})$/;
/**
 * A postcode that can be real, by Royal Mail's rules, tighter than HMRC's checker: no Q, V or X
 * first, no I, J or Z second; A9A's letter one of ABCDEFGHJKPSTUW, AA9A's one of ABEHMNPRVWXY; the
 * last two letters never C, I, K, M, O or V. HMRC's checker takes "N1O 1AA" or "M1 1AO", which can
 * be no one's postcode and so match no donor (until 2026-11-29 they were claimed; a review).
 */
const REAL_POSTCODE = /^(?:GIR 0AA|(?:[A-PR-UWYZ][0-9][0-9]?|[A-PR-UWYZ][A-HK-Y][0-9][0-9]?|[A-PR-UWYZ][0-9][A-HJKPSTUW]|[A-PR-UWYZ][A-HK-Y][0-9][ABEHMNPRVWXY]) [0-9][ABD-HJLNP-UW-Z]{2})$/;

/**
 * A first name as a schedule wrote it, for matching a ledger's row with a donation read today,
 * whatever the reading was when the row was written (a title and a trailing last name were kept
 * until 2026-11-29): read again, in lower case, its first 30 characters (a row's is cut to 35, and
 * may have had a title of up to five before it).
 */
export const matchableFirstName = (written: string | null, lastName: string | null): string => hmrcFirstName(written, lastName, Infinity).toLowerCase().slice(0, 30);

/**
 * A postcode as the schedule wrote it, for matching a ledger's row with a donation read today,
 * whatever the reading of O and 0 was when the row was written (it changed on 2026-11-29).
 */
export const matchablePostcode = (postcode: string): string => postcode.replaceAll('O', '0');

/**
 * One gift as claim rows tell it, for a row a restore kept without its donation (ClaimLedger.keepFrom)
 * and a row made from a donation sent again: the first name and postcode as read today, the last
 * name in any case (one sent again as BEE was claimed again: a review), the day and the amount. Not
 * the house, whose reading changed on 2026-11-29 (as madeFrom in store/claims.ts).
 */
export const sameGiftKey = (r: Pick<ScheduleRow, 'firstName' | 'lastName' | 'postcode' | 'donationDay' | 'amountMinor'>): string =>
  JSON.stringify([matchableFirstName(r.firstName, r.lastName), r.lastName.toLowerCase(), matchablePostcode(r.postcode), r.donationDay, r.amountMinor]);

/**
 * The day of a stored donation_date: the day the charity gave (stored as midnight UTC of it), or,
 * for a donation sent without a date, the UK day of the moment it was recorded (00:30 in a British
 * summer is the day it is in the UK, not the day before in UTC).
 */
export function donationDay(donationDate: string): string {
  const day = donationDate.endsWith('T00:00:00.000000Z') ? donationDate.slice(0, 10) : ukDay(new Date(donationDate));
  assertDay(day, 'donation_date');
  return day;
}

/** YYYY-MM-DD as HMRC's DD/MM/YY. */
export function hmrcDate(day: string): string {
  return `${day.slice(8, 10)}/${day.slice(5, 7)}/${day.slice(2, 4)}`;
}

/** YYYY-MM-DD as DD/MM/YYYY, for people. */
export function dayMonthYear(day: string): string {
  return `${day.slice(8, 10)}/${day.slice(5, 7)}/${day.slice(0, 4)}`;
}

/**
 * The earliest donation day still claimable on `today`. Without `periodEnd`: the same date four years
 * earlier (29 February becomes 28 February when that year has none), on the safe side. With the
 * charity's accounting period's end (`MM-DD`, as HMRC counts: four years from the end of the period
 * the donation fell in), the day after the last period end that is more than four years before
 * `today`: a period ending 5 April, on 2026-11-29, gives 2022-04-06.
 */
export function claimCutoff(today: string, periodEnd?: string): string {
  assertDay(today, 'today');
  const year = Number(today.slice(0, 4)) - CLAIM_WINDOW_YEARS;
  if (periodEnd === undefined) return sameDateYearsBefore(today, CLAIM_WINDOW_YEARS);
  // The period ending in `year` is out of time once its end four years on has passed.
  const endThisYear = `${today.slice(0, 4)}-${endOfPeriodIn(Number(today.slice(0, 4)), periodEnd)}`;
  const endYear = endThisYear < today ? year : year - 1;
  const end = new Date(`${String(endYear).padStart(4, '0')}-${endOfPeriodIn(endYear, periodEnd)}T00:00:00Z`);
  end.setUTCDate(end.getUTCDate() + 1);
  return end.toISOString().slice(0, 10);
}

/** The same date `years` before `today` (YYYY-MM-DD; 29 February becomes 28 February when that year has none). */
function sameDateYearsBefore(today: string, years: number): string {
  const year = Number(today.slice(0, 4)) - years;
  const rest = today.slice(4) === '-02-29' && !isLeap(year) ? '-02-28' : today.slice(4);
  return `${String(year).padStart(4, '0')}${rest}`;
}

/**
 * The earliest donation day that some accounting period could still claim on `today`: five years
 * back (LONGEST_PERIOD_YEARS). A donation before it is too late whatever --period-end would say.
 */
export function pastEveryPeriodCutoff(today: string): string {
  assertDay(today, 'today');
  return sameDateYearsBefore(today, CLAIM_WINDOW_YEARS + LONGEST_PERIOD_YEARS);
}

/**
 * An accounting period's end as `MM-DD`, or undefined if it is not one. `02-29` is the last day of
 * February, the 28th in a year without a 29th, as a period ending at the end of February runs
 * (refused until 2026-11-29; a review).
 */
export function periodEndOf(value: string): string | undefined {
  const m = /^(\d{2})-(\d{2})$/.exec(value);
  return m && isRealDate(2000, Number(m[1]), Number(m[2])) ? value : undefined; // 2000: a leap year
}

/** The day (MM-DD) a period ending on `periodEnd` each year ends in `year`: 02-29 is 02-28 when that year has none. */
function endOfPeriodIn(year: number, periodEnd: string): string {
  return periodEnd === '02-29' && !isLeap(year) ? '02-28' : periodEnd;
}

/**
 * Out of time on `today`: before claimCutoff. Without `periodEnd` that is an assumption on the safe
 * side (HMRC's limit runs four years from the end of the charity's accounting period in which the
 * donation was made, never earlier), so nothing reported in time here is out of time there; with
 * it, HMRC's own rule.
 */
export function isOutOfTime(day: string, today: string, periodEnd?: string): boolean {
  return day < claimCutoff(today, periodEnd);
}

/** Integer pence as pounds with two decimals and no currency sign: 2500 -> "25.00", 5 -> "0.05". */
export function formatPounds(minor: number): string {
  if (!Number.isSafeInteger(minor)) throw new RangeError(`not a whole number of pence: ${minor}`);
  const sign = minor < 0 ? '-' : '';
  const abs = Math.abs(minor);
  const pence = abs % 100;
  return `${sign}${(abs - pence) / 100}.${String(pence).padStart(2, '0')}`;
}

/** Pence as £1,234.56, for people (the schedule's donation rows carry no currency sign). */
export function pounds(minor: number): string {
  const [whole, pence] = formatPounds(minor).split('.');
  return `£${groupThousands(whole!)}.${pence}`;
}

export function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

function assertDay(day: string, what: string): void {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new RangeError(`${what} must be a day as YYYY-MM-DD, not ${JSON.stringify(day)}`);
}
