// The donations with their charity's username, filtered: what an export, a donor's export and an
// erasure read. One statement of the filters, so the three always pick the same donations.
import { createHash } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { domainToASCII } from 'node:url';
import { foldEmail, foldEmailCase } from '../donations/donation.js';
import type { DatabaseLocation } from '../config.js';
import type { Database } from './schema.js';

export interface DonationFilter {
  /** The charity's username. */
  charity?: string;
  /** Inclusive bounds on donation_date, in the stored timestamp format. */
  from?: string;
  to?: string;
  /** Only this donor's donations: the e-mail address as foldEmail folds it (in any case, in any Unicode form, its domain in either form). */
  donorEmail?: string;
  /** With donorEmail: what a scan made before (donorScan) found, so that only those rows and the rows recorded since are read now. */
  donorScanned?: DonorScan;
}

/** A donor's donations as a scan of every address found them (donorScan): their ids, the largest id it read, and the ids below it it did not see. */
export interface DonorScan {
  ids: number[];
  lastId: number;
  /**
   * The ids below lastId (and past the scan's start) it read no row of, as [first, last] ranges: on
   * PostgreSQL a donation's id is taken before its statement commits (ahead of need: DonationIds), so
   * a donation may commit after the scan under one of them. Mostly ids never used (a failed insert,
   * ids taken ahead and dropped), looked at again all the same.
   */
  gaps: Array<[number, number]>;
}

/**
 * `column` is one of `ids`, however many: they go as one parameter (a JSON array on SQLite, an array
 * on PostgreSQL), where a parameter each met SQLite's limit of 32,766 a statement and PostgreSQL's of
 * 65,535. A donor with more donations than that could not be exported or erased (until 2026-11-30).
 */
export function isOneOf(dialect: DatabaseLocation['dialect'], column: string, ids: readonly number[]): RawBuilder<boolean> {
  return dialect === 'postgres' ? sql<boolean>`${sql.ref(column)} = any(${[...ids]}::bigint[])` : sql<boolean>`${sql.ref(column)} in (select value from json_each(${JSON.stringify(ids)}))`;
}


/**
 * How a donor is named without their personal data (in the audit trail, and on their donations
 * erased but kept for Gift Aid): a SHA-256 of the e-mail address folded, cut short. Whoever has
 * the address can find its entries; the trail alone cannot say whose they are.
 */
export function donorReference(email: string): string {
  return referenceOf(foldEmail(email));
}

/**
 * Every reference this donor may be named by: donorReference's, and those made before 2026-11-29,
 * when a domain's ASCII form (`xn--bcher-kva.de`) was not read as its name (`bücher.de`), of the
 * address as given and with its domain in ASCII. What finds a donor's erased or kept rows.
 */
export function donorReferences(email: string): Set<string> {
  const references = new Set([donorReference(email), referenceOf(foldEmailCase(email))]);
  const at = email.lastIndexOf('@');
  const ascii = at < 0 ? '' : domainToASCII(email.slice(at + 1));
  if (ascii !== '') references.add(referenceOf(foldEmailCase(`${email.slice(0, at + 1)}${ascii}`)));
  return references;
}

const referenceOf = (folded: string): string => `donor ${createHash('sha256').update(folded).digest('hex').slice(0, 16)}`;

/**
 * The query, unordered and unrun: within `db` (a transaction, say). A donor's donations are looked
 * up first (donorScan), as their addresses are folded here, not by the database.
 */
export async function donationsWithCharity(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], filter: DonationFilter = {}) {
  let q = db.selectFrom('donations').innerJoin('charities', 'charities.id', 'donations.charity_id').selectAll('donations').select('charities.username as charity');
  if (filter.charity !== undefined) q = q.where('charities.username', '=', filter.charity);
  if (filter.from !== undefined) q = q.where('donations.donation_date', '>=', filter.from);
  if (filter.to !== undefined) q = q.where('donations.donation_date', '<=', filter.to);
  if (filter.donorEmail !== undefined) {
    const ids = filter.donorScanned === undefined ? (await donorScan(db, filter.donorEmail)).ids : await donorDonationsSince(db, dialect, filter.donorEmail, filter.donorScanned);
    q = q.where(isOneOf(dialect, 'donations.id', ids));
  }
  return q;
}

/**
 * The ids of the donations recorded with this address, folded alike (foldEmail), and of those
 * erased on its donor's request whose details are still kept for Gift Aid (their address is gone,
 * their reference kept: store/donors.ts): every address is read, as donors' requests are rare.
 * Rows after `afterId` only, if given. Best made outside a write transaction: on SQLite a write
 * transaction holds every other writer (the server's creates) while it reads, and a table of
 * 600,000 donations took 4.5 s (a review).
 */
export async function donorScan(db: Kysely<Database>, email: string, afterId = 0): Promise<DonorScan> {
  const isTheirs = donorsRow(email);
  const ids: number[] = [];
  const gaps: Array<[number, number]> = [];
  let lastId = afterId;
  // In id order, so that the ids it did not see are the gaps between those it did.
  for await (const row of db.selectFrom('donations').select(['id', 'donor_email', 'erased_donor']).where('id', '>', afterId).orderBy('id').stream(1000)) {
    const id = Number(row.id);
    if (id > lastId + 1) gaps.push([lastId + 1, id - 1]);
    lastId = id;
    if (isTheirs(row)) ids.push(id);
  }
  return { ids, lastId, gaps };
}

/** Whether a row is this donor's: recorded with their address, folded alike, or erased on their request and kept under their reference. */
function donorsRow(email: string): (row: { donor_email: string; erased_donor: string | null }) => boolean {
  const wanted = foldEmail(email);
  const references = donorReferences(email);
  return (row) => foldEmail(row.donor_email) === wanted || (row.erased_donor !== null && references.has(row.erased_donor));
}

/**
 * A donor's donations now, from a scan made before (donorScan): those it found, read again (one
 * erased meanwhile may have lost its reference), and those recorded since: past the largest id it
 * read, or under an id it did not see (on PostgreSQL a donation may commit after one with a larger
 * id, to within about a second: DonationIds; one of theirs so was left unerased until a review of
 * 2026-11-30). Donations are never re-addressed, only erased, so nothing else can have become theirs.
 */
async function donorDonationsSince(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], email: string, scanned: DonorScan): Promise<number[]> {
  const isTheirs = donorsRow(email);
  const rows = await db.selectFrom('donations').select(['id', 'donor_email', 'erased_donor']).where(isOneOf(dialect, 'id', scanned.ids)).execute();
  const inGaps = scanned.gaps.length === 0 ? [] : (await rowsInRanges(dialect, scanned.gaps).execute(db)).rows;
  return [...[...rows, ...inGaps].filter(isTheirs).map((row) => Number(row.id)), ...(await donorScan(db, email, scanned.lastId)).ids];
}

/** The donations whose ids are within these [first, last] ranges (id, address, reference), each range read through the ids' index. */
function rowsInRanges(dialect: DatabaseLocation['dialect'], ranges: ReadonlyArray<[number, number]>) {
  const columns = sql`d.id, d.donor_email, d.erased_donor`;
  type Row = { id: number; donor_email: string; erased_donor: string | null };
  return dialect === 'postgres'
    ? sql<Row>`select ${columns} from unnest(${ranges.map((r) => r[0])}::bigint[], ${ranges.map((r) => r[1])}::bigint[]) as g(first, last) join donations d on d.id between g.first and g.last`
    : sql<Row>`select ${columns} from json_each(${JSON.stringify(ranges)}) as g join donations d on d.id between g.value ->> 0 and g.value ->> 1`;
}
