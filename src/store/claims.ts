// The Gift Aid claim ledger: which donations have been put in which claim, and what became of it.
// The rule that matters, one donation in at most one live claim, is the database's to keep (a
// unique index over live rows, see migration 0003), not this code's: two claims prepared at the
// same moment, in two processes or on two instances, cannot both take a donation. A row a restore
// kept without its donation (migration 0014) has no such index: a claim prepared or reopened looks
// for the same gift in the charity's live claims (sameGiftKey), taking turns with the others (takeTurn).
import { CompiledQuery, sql, type Kysely, type Selectable } from 'kysely';
import { movesOf, NEXT_STATUSES, statusesBefore, statusReopened, type ClaimStatus } from '../giftaid/claim.js';
import { donationDay, hmrcLastName, hmrcPostcode, matchableFirstName, matchablePostcode, sameGiftKey, type ScheduleRow } from '../giftaid/schedule.js';
import { GIFT_FACTS, giftKeys, RETRY_ACROSS_MIDNIGHT_MS, twinsAmong, type GiftFacts } from '../giftaid/twins.js';
import { formatMicros, nowIso } from '../time.js';
import type { DatabaseLocation } from '../config.js';
import type { CharityRow, Database, GiftaidClaimDonationsTable, GiftaidClaimRowsWithoutDonationTable, GiftaidClaimsTable } from './schema.js';
import { appendAudit } from './audit.js';
import { idsAfter, insertWithId } from './sequence.js';
import { donorReference } from './donation-query.js';
import { ERASED_EMAIL } from '../donations/erasure.js';

/** A claim as the ledger gives it: its row, with the charity's username for its id. */
export type Claim = Omit<Selectable<GiftaidClaimsTable>, 'charity_id'> & { charity: string };

export interface NewClaim {
  charityId: number;
  /** YYYY-MM-DD: the last donation day the claim took. */
  upTo: string;
  /** YYYY-MM-DD: the day the claim's rules were applied. */
  claimDate: string;
  /** The claim's donations, in the order of its files; at least one. */
  rows: readonly ScheduleRow[];
  /** How many Gift Aid donations were left out for the charity's attention (written to its needs-attention file), for the audit trail. */
  needsAttention: number;
  /** MM-DD: the accounting period's end the claim's four years were counted from (--period-end), for the audit trail; none: from the claim's day. */
  periodEnd?: string;
  /** Made with --checked-since-backup after a restore that left the claims since its backup unknown: said in the audit trail. */
  checkedSinceBackup?: boolean;
}

/** A donation of the new claim was put in another live claim meanwhile; nothing was recorded. */
export class ClaimConflictError extends Error {
  constructor() {
    super('another claim took some of these donations at the same moment');
  }
}

/** The claim cannot be marked so from its present status; nothing was changed. */
export class ClaimStatusError extends Error {
  constructor(
    readonly claim: Claim,
    readonly to: ClaimStatus,
  ) {
    const next = NEXT_STATUSES[claim.status];
    super(
      `claim ${claim.id} is ${claim.status}, so it cannot be marked ${to}` +
        (next.length > 0
          ? ` (it can be marked ${next.join(' or ')})`
          : claim.status === 'rejected'
            ? ` (if it was marked rejected by mistake, bin/almoner giftaid reopen ${claim.id} makes it ${statusReopened(claim)} again)`
            : ` (a ${claim.status} claim is final)`) +
        '.',
    );
  }
}

/** The claim cannot be reopened: it is not rejected, or another live claim has taken some of its donations since; nothing was changed. */
export class ClaimReopenError extends Error {
  constructor(
    readonly claim: Claim,
    /** The live claims that hold some of its donations now, in id order. */
    readonly takenBy: readonly number[] = [],
    /** Those of them that are paid: final, so not to be marked rejected to let it reopen. */
    readonly paid: readonly number[] = [],
  ) {
    super(claim.status !== 'rejected' ? `claim ${claim.id} is ${claim.status}, not rejected: only a rejected claim can be reopened.` : reopenRefused(claim, takenBy, paid));
  }
}

/**
 * Why rejected `claim` cannot be reopened while claims `takenBy` hold its donations, and what to do,
 * said where it is needed (it was only in the README until a review of 2026-11-30). A paid claim is
 * final: until 2026-12-02 the advice was to mark it rejected too, which `giftaid mark` refuses (a review).
 */
function reopenRefused(claim: Claim, takenBy: readonly number[], paid: readonly number[]): string {
  const said =
    `claim ${claim.id} cannot be reopened: its donations, or other records of the same gifts, are in ${takenBy.length === 1 ? 'claim' : 'claims'} ${takenBy.join(', ')} now, ` +
    'and reopened it would claim them twice. Nothing was changed. ';
  if (paid.length > 0) {
    return said + `${paid.length === 1 ? `Claim ${paid[0]} is` : `Claims ${paid.join(', ')} are`} paid, which is final: HMRC has paid for those gifts there, so claim ${claim.id} stays rejected.`;
  }
  return (
    said +
    (takenBy.length === 1
      ? `If claim ${takenBy[0]} was never sent to HMRC, mark it rejected (bin/almoner giftaid mark ${takenBy[0]} rejected), then reopen claim ${claim.id}.`
      : `If claims ${takenBy.join(', ')} were never sent to HMRC, mark each rejected (bin/almoner giftaid mark ${takenBy[0]} rejected, and so on), then reopen claim ${claim.id}.`)
  );
}

/** What a claim row becomes once its donation's data is erased in full (the claim's totals stay). */
export const ERASED_IN_CLAIM = '[erased]';
/** A claim row's donor details, erased. */
export const ERASED_CLAIM_DETAILS = { first_name: ERASED_IN_CLAIM, last_name: ERASED_IN_CLAIM, house: ERASED_IN_CLAIM, postcode: ERASED_IN_CLAIM } as const;

/** Rows inserted per statement: well inside both backends' limits on bound parameters. */
const INSERT_CHUNK = 500;

/**
 * A new claim's rows as insert statements of INSERT_CHUNK rows each, compiled by Kysely before the
 * claim's write transaction, every claim_id 0 for prepare to fill in (fillClaimId) once the claim
 * has its id. In donation id order, each row with its position in the claim's files: the ledger's
 * indexes (the claim's and donation's key, the live rows' unique index) and the check that each
 * donation is there are then met in the order they are kept in, not at random, as a claim's files
 * order the rows (by day).
 */
function claimRowInserts(db: Kysely<Database>, rows: readonly ScheduleRow[]): Array<{ query: CompiledQuery; rows: number }> {
  const ordered = rows.map((r, i) => ({ r, position: i + 1 })).sort((a, b) => a.r.donationId - b.r.donationId);
  const inserts: Array<{ query: CompiledQuery; rows: number }> = [];
  /** Each statement's text, one of each: every whole batch's is the same. */
  const texts = new Map<string, string>();
  for (let start = 0; start < ordered.length; start += INSERT_CHUNK) {
    const values = ordered.slice(start, start + INSERT_CHUNK).map(({ r, position }) => ({
      claim_id: 0, // first: fillClaimId
      donation_id: r.donationId,
      position,
      live: 1 as const,
      first_name: r.firstName,
      last_name: r.lastName,
      house: r.houseNameOrNumber,
      postcode: r.postcode,
      donation_day: r.donationDay,
      amount_minor: r.amountMinor,
    }));
    const { sql: text, parameters } = db.insertInto('giftaid_claim_donations').values(values).compile();
    if (!texts.has(text)) texts.set(text, text);
    // Its text and values alone: the compiled query's tree of Kysely's nodes, a few objects a value, kept for every row
    // until the claim was recorded, was the largest thing a claim held in memory (about 970 bytes a row: 240 MB for a
    // claim of 250,000; a scale review, 2026-11-30). fillClaimId makes it a query again.
    inserts.push({ query: CompiledQuery.raw(texts.get(text)!, parameters as unknown[]), rows: values.length });
  }
  return inserts;
}

/** A claimRowInserts statement with its claim's id: each row's first value (Kysely binds each row's values in its object's key order). */
function fillClaimId({ query, rows }: { query: CompiledQuery; rows: number }, claimId: number): CompiledQuery {
  const parameters = [...query.parameters];
  const width = parameters.length / rows;
  if (!Number.isInteger(width)) throw new Error(`a claim's insert bound ${parameters.length} values for ${rows} rows`); // a value left undefined (Kysely's DEFAULT) would shift the rest
  for (let at = 0; at < parameters.length; at += width) parameters[at] = claimId;
  return CompiledQuery.raw(query.sql, parameters);
}

/** A whole claim ledger as another database held it (the one a restore replaced), as a PostgreSQL restore's claims file holds it (writeLedgerFile). */
export interface LedgerCopy {
  claims: Selectable<GiftaidClaimsTable>[];
  /**
   * Each with its donor's reference (donorReference) as that database knew it, so that a row kept
   * without its donation is still found by the donor's requests. Absent from a copy written before 2026-11-29.
   */
  rows: Array<Selectable<GiftaidClaimDonationsTable> & { donor?: string | null }>;
  /** Rows a restore had already kept without their donation (migration 0014), if that database has them. */
  withoutDonation: Selectable<GiftaidClaimRowsWithoutDonationTable>[];
  /**
   * That database's charities, by id: a claim is kept only under the charity it was made for, not
   * another that signed up since and took the same id. Absent from a copy written before 2026-11-29;
   * their id and username alone until 2026-11-30, when a restore began to carry their credentials
   * over (cli/backup.ts): each row whole, as that database holds it (a database of a version before
   * migration 0018 has no old password).
   */
  charities?: Array<Pick<CharityRow, 'id' | 'username'> & Partial<CharityRow>>;
  /** The largest donation id that database gave out: a restore gives none of them again. Absent from a copy written before 2026-11-29. */
  largestDonationId?: number;
  /** How many donations that database held: a restore says how many are not in the backup. Absent from a copy written before 2026-11-30. */
  donationCount?: number;
}

/** A row of another ledger's claim: one made from a donation there, with its donor's reference, or one kept without its donation. */
export type LedgerRow = LedgerCopy['rows'][number] | LedgerCopy['withoutDonation'][number];

/** Another ledger but for its claims' rows: its claims, charities and counts. */
export type LedgerHead = Omit<LedgerCopy, 'rows' | 'withoutDonation'>;

/**
 * Another ledger whose rows are read as keepFrom takes them: a claim's, a page at a time, both kinds
 * together in position order. Until 2026-12-01 a restore read every row of the replaced ledger at
 * once (a scale review: about 1 GB for 629,000), though it takes in only the claims the restored
 * database lacks.
 */
export interface LedgerPages extends LedgerHead {
  rowsOf(claimId: number): AsyncIterable<LedgerRow[]>;
}

/** Rows of another ledger read at a time (a page): one insert statement's (INSERT_CHUNK). */
export const LEDGER_PAGE = INSERT_CHUNK;

/** A ledger held whole (a test's, say), read as pages. */
export function pagesOf(copy: LedgerCopy | LedgerPages): LedgerPages {
  if ('rowsOf' in copy) return copy;
  const { rows, withoutDonation, ...head } = copy;
  const byClaim = (all: readonly LedgerRow[]) => {
    const of = new Map<number, LedgerRow[]>();
    for (const r of all) {
      const rows = of.get(r.claim_id);
      if (rows) rows.push(r);
      else of.set(r.claim_id, [r]);
    }
    return of;
  };
  let held: Array<Map<number, LedgerRow[]>> | undefined;
  return {
    ...head,
    rowsOf(claimId) {
      held ??= [byClaim(rows), byClaim(withoutDonation)];
      const [linked, without] = held.map((of) => inPages([...(of.get(claimId) ?? [])].sort((a, b) => a.position - b.position)));
      return byPosition(linked!, without!);
    },
  };
}

/** Rows held already, as pages. */
async function* inPages<T>(rows: readonly T[]): AsyncIterable<T[]> {
  for (let start = 0; start < rows.length; start += LEDGER_PAGE) yield rows.slice(start, start + LEDGER_PAGE);
}

/**
 * A claim's two kinds of rows, each in position order, as one, in pages of LEDGER_PAGE: a row made
 * from a donation before one kept without it at the same position (as a stable sort of the two, one
 * after the other, has them).
 */
export async function* byPosition(linked: AsyncIterable<LedgerRow[]>, without: AsyncIterable<LedgerRow[]>): AsyncIterable<LedgerRow[]> {
  const sources = [linked, without].map((pages) => ({ pages: pages[Symbol.asyncIterator](), page: [] as LedgerRow[], at: 0, done: false }));
  const next = async (s: (typeof sources)[number]) => {
    while (!s.done && s.at >= s.page.length) {
      const read = await s.pages.next();
      if (read.done) s.done = true;
      else [s.page, s.at] = [read.value, 0];
    }
    return s.done ? undefined : s.page[s.at];
  };
  let out: LedgerRow[] = [];
  for (;;) {
    const [a, b] = [await next(sources[0]!), await next(sources[1]!)];
    if (a === undefined && b === undefined) break;
    const from = b === undefined || (a !== undefined && a.position <= b.position) ? sources[0]! : sources[1]!;
    out.push(from.page[from.at++]!);
    if (out.length === LEDGER_PAGE) {
      yield out;
      out = [];
    }
  }
  if (out.length > 0) yield out;
}

/** How another database is asked (readLedger): whether a table is there, and a query's rows; pg and better-sqlite3 alike. */
export interface LedgerQueries {
  has: (table: string) => boolean | Promise<boolean>;
  all: (query: string) => Record<string, unknown>[] | Promise<Record<string, unknown>[]>;
}

/** Another database's ledger, its rows read from it as they are asked for (a claim's, or all of one kind, a page at a time). */
export interface DatabaseLedger extends LedgerPages {
  /** Every row of a kind, in claim and position order, a page at a time: as a claims file holds them (writeLedgerFile). */
  every(kind: 'rows' | 'withoutDonation'): AsyncIterable<LedgerRow[]>;
}

/** The two tables a claim's rows are in: those made from a donation, and those a restore kept without it (keepFrom). */
const CLAIM_ROW_TABLES = ['giftaid_claim_donations', 'giftaid_claim_rows_without_donation'] as const;
/** What a claim's row holds as it went into its files, in both tables. */
const CLAIM_ROW_COLUMNS = ['donation_id', 'position', 'first_name', 'last_name', 'house', 'postcode', 'donation_day', 'amount_minor'] as const;

/** int8 columns come back as strings from pg: numbers here, as everywhere else. */
const numbers = <T>(row: Record<string, unknown>, names: readonly string[]) => ({ ...row, ...Object.fromEntries(names.map((n) => [n, Number(row[n])])) }) as T;
const ROW_NUMBERS = ['claim_id', 'donation_id', 'position', 'amount_minor'];

/**
 * The claim ledger of another database, asked through `has` (whether a table is there) and `all` (a
 * query's rows), so pg and better-sqlite3 read it alike, and a database from before a table was
 * made reads as having none: its claims, charities and counts at once, its rows as they are asked
 * for, through the same `has` and `all` (which must still reach that database then).
 */
export async function readLedger(has: LedgerQueries['has'], all: LedgerQueries['all']): Promise<DatabaseLedger> {
  const rowsOf = async (table: string, order: string) => ((await has(table)) ? await all(`select * from ${table} order by ${order}`) : []);
  return {
    claims: (await rowsOf('giftaid_claims', 'id')).map((c) => numbers(c, ['id', 'charity_id', 'donation_count', 'total_minor'])),
    charities: (await rowsOf('charities', 'id')).map((c) => ({ ...c, id: Number(c.id), username: String(c.username) })),
    largestDonationId: await largestDonationId(has, all),
    donationCount: (await has('donations')) ? Number((await all('select count(*) as n from donations'))[0]?.n ?? 0) : 0,
    ...readLedgerRows(has, all),
  };
}

/** Another database's claim rows alone, as readLedger reads them: through a connection of their own (the one readLedger's went, say). */
export function readLedgerRows(has: LedgerQueries['has'], all: LedgerQueries['all']): Pick<DatabaseLedger, 'rowsOf' | 'every'> {
  const pages = rowPages(has, all);
  return { rowsOf: (claimId) => byPosition(pages('rows', claimId), pages('withoutDonation', claimId)), every: (kind) => pages(kind) };
}

/**
 * The rows of another database's claim ledger, of one kind, in claim and position order, a page at
 * a time, each read by its key after the last page's (both tables are keyed by claim and position):
 * of one claim, or every claim's. A row made from a donation comes with `donor`: the reference of the
 * donor of its donation there (the address's, or an erased donation's kept reference; null once the
 * row's details are erased). A database from before migration 0012 has no kept references.
 */
function rowPages(has: LedgerQueries['has'], all: LedgerQueries['all']) {
  let erased: 'd.erased_donor' | 'null' | undefined;
  return async function* (kind: 'rows' | 'withoutDonation', claimId?: number): AsyncIterable<LedgerRow[]> {
    const table = kind === 'rows' ? 'giftaid_claim_donations' : 'giftaid_claim_rows_without_donation';
    if (!(await has(table))) return;
    const page = async (after: { claim: number; position: number }): Promise<LedgerRow[]> => {
      // Numbers only, read as numbers: nothing else is written into the query.
      const where = claimId === undefined ? `(r.claim_id, r.position) > (${after.claim}, ${after.position})` : `r.claim_id = ${Number(claimId)} and r.position > ${after.position}`;
      const order = `order by r.claim_id, r.position limit ${LEDGER_PAGE}`;
      if (kind === 'withoutDonation') return (await all(`select r.* from ${table} r where ${where} ${order}`)).map((r) => numbers(r, ROW_NUMBERS));
      const joined = (from: 'd.erased_donor' | 'null') =>
        all(`select r.*, d.donor_email as donation_email, ${from} as donation_erased_donor from ${table} r left join donations d on d.id = r.donation_id where ${where} ${order}`);
      let rows: Record<string, unknown>[];
      if (erased === undefined) {
        try {
          rows = await joined('d.erased_donor');
          erased = 'd.erased_donor';
        } catch {
          rows = await joined('null');
          erased = 'null';
        }
      } else rows = await joined(erased);
      return rows.map(({ donation_email: email, donation_erased_donor: erasedDonor, ...row }) =>
        numbers(
          { ...row, donor: row.first_name === ERASED_IN_CLAIM || typeof email !== 'string' ? null : email === ERASED_EMAIL ? ((erasedDonor as string | null) ?? null) : donorReference(email) },
          ROW_NUMBERS,
        ),
      );
    };
    for (let after = { claim: 0, position: 0 }; ; ) {
      const rows = await page(after);
      if (rows.length > 0) yield rows;
      if (rows.length < LEDGER_PAGE) return;
      const last = rows.at(-1)!;
      after = { claim: last.claim_id, position: last.position };
    }
  };
}

/**
 * The largest donation id another database gave out: its largest stored, or its counter's, if that is
 * ahead (a restore or keep-replaced moved it on; a PostgreSQL instance took ids ahead). Only the
 * largest stored, until 2026-11-29: a second restore moved the counter back (a review).
 */
async function largestDonationId(has: LedgerQueries['has'], all: LedgerQueries['all']): Promise<number> {
  if (!(await has('donations'))) return 0;
  const stored = Number((await all('select max(id) as n from donations'))[0]?.n ?? 0);
  const counterQuery = (await has('sqlite_sequence'))
    ? "select seq as n from sqlite_sequence where name = 'donations'"
    : "select pg_sequence_last_value(pg_get_serial_sequence('donations', 'id')::regclass) as n";
  let counter = 0;
  try {
    counter = Number((await all(counterQuery))[0]?.n ?? 0);
  } catch {
    // Not readable as either: the ids stored alone.
  }
  return Math.max(stored, counter);
}

/**
 * Why keepFrom() left a claim out: the number is another claim's here (another charity or time), the
 * two ledgers moved it apart (one paid, the other rejected), its charity is not in this database (it
 * signed up after the backup, and is lost with the database replaced), or a donation of it is in
 * another live claim here.
 */
export type RefusedWhy = 'another claim' | 'status' | 'charity' | 'taken' | 'reopened';

/** A donor's row in a claim (ClaimLedger.ofDonor): the row as it went to HMRC, its claim, and whether its donation is in this database. */
export interface DonorClaimRow extends ScheduleRow {
  claimId: number;
  status: ClaimStatus;
  charity: string;
  position: number;
  /** False for a row a restore kept without its donation (recorded after the backup, and gone with the database replaced). */
  donationHere: boolean;
}

/** A donor's row in a claim as ofDonor and keptRowsOfDonor read it: the row, its claim's status and its charity's username. */
const DONOR_ROW_COLUMNS = ['r.claim_id', 'r.donation_id', 'r.position', 'r.first_name', 'r.last_name', 'r.house', 'r.postcode', 'r.donation_day', 'r.amount_minor', 'c.status', 'ch.username as charity'] as const;

/**
 * The claim rows a restore kept without their donation (keepFrom) under one of a donor's
 * `references`, of one charity's claims or every charity's, in claim and position order, unrun:
 * within `db` (a donor's erasure's transaction, say).
 */
export function keptRowsOfDonor(db: Kysely<Database>, references: ReadonlySet<string>, charity?: string) {
  let q = db
    .selectFrom('giftaid_claim_rows_without_donation as r')
    .innerJoin('giftaid_claims as c', 'c.id', 'r.claim_id')
    .innerJoin('charities as ch', 'ch.id', 'c.charity_id')
    .select(DONOR_ROW_COLUMNS)
    .where('r.donor', 'in', [...references]);
  if (charity !== undefined) q = q.where('ch.username', '=', charity);
  return q.orderBy('r.claim_id').orderBy('r.position');
}

/** What keepFrom() kept of another ledger. */
export interface KeptClaims {
  /**
   * Claims that were not here, added with their own ids, and how many of each one's rows name no
   * donation here that is theirs (recorded after the backup, and lost with the database replaced):
   * those rows are kept without a donation (migration 0014).
   */
  added: Array<{ id: number; status: ClaimStatus; withoutDonation: number }>;
  /** Claims here that the other ledger had moved on (submitted, paid, rejected, or reopened), and their status now. */
  marked: Array<{ id: number; status: ClaimStatus; reopened?: true }>;
  /** Claims of the other ledger that cannot be this database's, each with why: left out. */
  refused: Array<{ id: number; why: RefusedWhy }>;
}

/** A donation's GIFT_FACTS as toStoredDonation reads them: the id and minor units numbers, the yes/no a boolean. */
const giftFacts = (r: Omit<GiftFacts, 'claimed' | 'gift_aid'> & { gift_aid: unknown }): GiftFacts => ({ ...r, id: Number(r.id), amount_minor: Number(r.amount_minor), gift_aid: Boolean(r.gift_aid) });

export class ClaimLedger {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DatabaseLocation['dialect'],
  ) {}

  /**
   * The charity's Gift Aid donations dated up to `to` (a stored timestamp, inclusive), and from
   * `from` if given, that are in no live claim, in id order: what a claim's assessment reads of each
   * (GIFT_FACTS, which hold every column giftaid/schedule.ts's rules read too), not the whole row.
   * A claim keeps every one it reads until its twins are found: whole rows (the phone, the IP
   * address, the payment method, the erasure's columns) took 170 MB of 250,000 donations, and a claim
   * of 630,000 peaked at 1.7 GB (a scale review, 2026-11-30).
   */
  async *unclaimed(charityId: number, range: { from?: string; to: string }): AsyncIterable<GiftFacts> {
    let q = this.db
      .selectFrom('donations')
      .select(GIFT_FACTS)
      .where('charity_id', '=', charityId)
      .where('gift_aid', '=', 1)
      .where('donation_date', '<=', range.to)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('giftaid_claim_donations as c')
              .select(sql.lit(1).as('one'))
              .whereRef('c.donation_id', '=', 'donations.id')
              .where('c.live', '=', 1),
          ),
        ),
      );
    if (range.from !== undefined) q = q.where('donation_date', '>=', range.from);
    for await (const r of q.orderBy('id').stream(500)) yield giftFacts(r);
  }

  /** The donations of these ids, as unclaimed() reads them (GIFT_FACTS), by id: those a claim sets aside as twins, to list them (giftaid.ts). */
  async facts(ids: readonly number[]): Promise<Map<number, GiftFacts>> {
    const found = new Map<number, GiftFacts>();
    for (let start = 0; start < ids.length; start += INSERT_CHUNK) {
      const rows = await this.db.selectFrom('donations').select(GIFT_FACTS).where('id', 'in', ids.slice(start, start + INSERT_CHUNK)).execute();
      for (const r of rows) found.set(Number(r.id), giftFacts(r));
    }
    return found;
  }

  /**
   * Every donation of the charity dated from `from` to `to` (stored timestamps, inclusive), Gift
   * Aid or not, claimed or not, erased or not: where a gift recorded twice is looked for (giftaid/twins.ts).
   */
  async *dated(charityId: number, range: { from: string; to: string }): AsyncIterable<GiftFacts> {
    const q = this.db
      .selectFrom('donations')
      .select(GIFT_FACTS)
      // Whether it is in a live claim: the first record of its gift whatever its id (twinsAmong).
      .select(({ exists, selectFrom }) =>
        exists(selectFrom('giftaid_claim_donations as c').select(sql.lit(1).as('one')).whereRef('c.donation_id', '=', 'donations.id').where('c.live', '=', 1)).as('claimed'),
      )
      .where('charity_id', '=', charityId)
      .where('donation_date', '>=', range.from)
      .where('donation_date', '<=', range.to);
    for await (const r of q.stream(1000)) yield { ...giftFacts(r), claimed: Boolean(r.claimed) };
  }

  /** How many of the charity's Gift Aid donations in the range are in a live claim. */
  async countClaimed(charityId: number, range: { from?: string; to: string }): Promise<number> {
    let q = this.db
      .selectFrom('giftaid_claim_donations as c')
      .innerJoin('donations', 'donations.id', 'c.donation_id')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('donations.charity_id', '=', charityId)
      .where('c.live', '=', 1)
      .where('donations.donation_date', '<=', range.to);
    if (range.from !== undefined) q = q.where('donations.donation_date', '>=', range.from);
    const { n } = await q.executeTakeFirstOrThrow();
    return Number(n);
  }

  /**
   * Records a new claim of these rows, all or nothing, in one transaction. Throws
   * ClaimConflictError when one of its donations is in another live claim by then.
   */
  async prepare(claim: NewClaim): Promise<Claim> {
    if (claim.rows.length === 0) throw new RangeError('a claim needs at least one donation');
    const preparedAt = nowIso();
    const totalMinor = claim.rows.reduce((sum, r) => sum + r.amountMinor, 0);
    // Every row's statement and values made before the write transaction begins, which holds SQLite's write lock (and the
    // server's creates wait for it): until 2026-11-30 each batch of rows was built and compiled by Kysely inside it (a scale
    // review measured the lock held 14 to 26 s by a claim of 629,000 donations, every create meanwhile answered 503).
    const inserts = claimRowInserts(this.db, claim.rows);
    try {
      const id = await this.db.transaction().execute(async (trx) => {
        await takeTurn(trx, this.dialect, claim.charityId);
        // A row a restore kept without its donation (keepFrom) in a claim live now, the same gift as one of these: a claim
        // reopened since these rows were chosen (giftaid reopen) sent it to HMRC; chosen again, it needs attention.
        const kept = new Set((await keptRowsOfLiveClaims(trx, claim.charityId)).map(sameGiftKey));
        if (kept.size > 0 && claim.rows.some((r) => kept.has(sameGiftKey(r)))) throw new ClaimConflictError();
        const { id } = await trx
          .insertInto('giftaid_claims')
          .values({
            charity_id: claim.charityId,
            status: 'prepared',
            up_to: claim.upTo,
            claim_date: claim.claimDate,
            donation_count: claim.rows.length,
            total_minor: totalMinor,
            prepared_at: preparedAt,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        await appendAudit(trx, {
          action: 'giftaid claim',
          target: `claim ${id}`,
          summary: {
            charity_id: claim.charityId,
            up_to: claim.upTo,
            donations: claim.rows.length,
            total_minor: totalMinor,
            needs_attention: claim.needsAttention,
            period_end: claim.periodEnd ?? null,
            ...(claim.checkedSinceBackup && { checked_since_backup: true }),
          },
        });
        // The rows built before the transaction (claimRowInserts): here only the claim's id is filled in, and each statement run.
        for (const insert of inserts) await trx.executeQuery(fillClaimId(insert, Number(id)));
        return Number(id);
      });
      return (await this.find(id))!;
    } catch (err) {
      if (isUniqueViolation(err)) throw new ClaimConflictError();
      throw err;
    }
  }

  async find(id: number): Promise<Claim | undefined> {
    const row = await this.claims().where('giftaid_claims.id', '=', id).executeTakeFirst();
    return row && toClaim(row);
  }

  /** Every claim, or one charity's, newest first. */
  async list(charityId?: number): Promise<Claim[]> {
    let q = this.claims();
    if (charityId !== undefined) q = q.where('giftaid_claims.charity_id', '=', charityId);
    return (await q.orderBy('giftaid_claims.id', 'desc').execute()).map(toClaim);
  }

  /** The claim's rows as they went into its files, in order. */
  async rows(claimId: number): Promise<ScheduleRow[]> {
    return await claimRows(this.db, claimId);
  }

  /** How many rows the claim holds: those made from a donation, and those a restore kept without it (keepFrom). */
  async rowCount(claimId: number): Promise<number> {
    const counted = await Promise.all(
      CLAIM_ROW_TABLES.map((table) =>
        this.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where('claim_id', '=', claimId).executeTakeFirstOrThrow(),
      ),
    );
    return counted.reduce((sum, { n }) => sum + Number(n), 0);
  }

  /**
   * The claim's rows as rows() gives them, `size` at a time (its files' rows, file by file): each page
   * read by position after the last (both tables' key), so that no more than a page is held. Until
   * 2026-12-01 a claim's files were made from all its rows at once (a scale review: 450 MB for 630 files).
   */
  async *rowPages(claimId: number, size: number): AsyncIterable<ScheduleRow[]> {
    for (let after = 0; ; ) {
      const page = (
        await Promise.all(
          CLAIM_ROW_TABLES.map((table) =>
            this.db.selectFrom(table).select(CLAIM_ROW_COLUMNS).where('claim_id', '=', claimId).where('position', '>', after).orderBy('position').limit(size).execute(),
          ),
        )
      )
        .flat()
        .sort((a, b) => Number(a.position) - Number(b.position))
        .slice(0, size);
      if (page.length === 0) return;
      yield page.map(scheduleRow);
      after = Number(page.at(-1)!.position);
    }
  }

  /**
   * A donor's rows in claims, as they went to HMRC: those made from `donationIds`, and those a
   * restore kept without their donation under one of the donor's `references` (keepFrom); of one charity's
   * claims, or every charity's. In claim and position order.
   */
  async ofDonor({ donationIds, references, charity }: { donationIds: readonly number[]; references: ReadonlySet<string>; charity?: string }): Promise<DonorClaimRow[]> {
    const found: DonorClaimRow[] = [];
    const add = (rows: Array<Omit<Selectable<GiftaidClaimDonationsTable>, 'live'> & { status: ClaimStatus; charity: string }>, donationHere: boolean) => {
      for (const r of rows) found.push({ ...scheduleRow(r), claimId: Number(r.claim_id), status: r.status, charity: r.charity, position: Number(r.position), donationHere });
    };
    for (let start = 0; start < donationIds.length; start += INSERT_CHUNK) {
      let q = this.db
        .selectFrom('giftaid_claim_donations as r')
        .innerJoin('giftaid_claims as c', 'c.id', 'r.claim_id')
        .innerJoin('charities as ch', 'ch.id', 'c.charity_id')
        .select(DONOR_ROW_COLUMNS)
        .where('r.donation_id', 'in', donationIds.slice(start, start + INSERT_CHUNK));
      if (charity !== undefined) q = q.where('ch.username', '=', charity);
      add(await q.execute(), true);
    }
    add(await keptRowsOfDonor(this.db, references, charity).execute(), false);
    return found.sort((a, b) => a.claimId - b.claimId || a.position - b.position);
  }

  /**
   * The rows of the charity's live claims that a restore kept without their donation (keepFrom),
   * with their claim: a donation sent again that matches one may be claimed already.
   */
  async rowsWithoutDonation(charityId: number): Promise<Array<ScheduleRow & { claimId: number }>> {
    return await keptRowsOfLiveClaims(this.db, charityId);
  }

  /**
   * Records what happened to a claim at HMRC. Marking it rejected frees its donations for the next
   * claim, in the same transaction. Marking it with the status it has is no change and no error.
   * Throws ClaimStatusError for a move NEXT_STATUSES does not allow; undefined for no such claim.
   */
  async mark(id: number, to: ClaimStatus): Promise<{ claim: Claim; changed: boolean } | undefined> {
    const from = statusesBefore(to);
    const changed = from.length > 0 && await this.db.transaction().execute(async (trx) => {
      const at = nowIso();
      const r = await trx
        .updateTable('giftaid_claims')
        .set((eb) => ({ status: to, [`${to}_at`]: at, moves: eb('moves', '+', 1) }))
        .where('id', '=', id)
        .where('status', 'in', from)
        .executeTakeFirst();
      if (r.numUpdatedRows === 0n) return false;
      await appendAudit(trx, { action: 'giftaid mark', target: `claim ${id}`, summary: { status: to } });
      if (to === 'rejected') {
        await trx.updateTable('giftaid_claim_donations').set({ live: null }).where('claim_id', '=', id).execute();
      }
      return true;
    });
    const claim = await this.find(id);
    if (!claim) return undefined;
    if (!changed && claim.status !== to) throw new ClaimStatusError(claim, to);
    return { claim, changed };
  }

  /**
   * Takes back a rejection marked by mistake: the claim is again what it was when it was rejected
   * (statusReopened), and its donations are its own again, in one transaction with its audit entry.
   * Throws ClaimReopenError when it is not rejected, or when another live claim has taken some of
   * its donations since (or, for rows a restore kept without their donation, a row of the same
   * donor, day and amount); undefined for no such claim.
   */
  async reopen(id: number): Promise<Claim | undefined> {
    const claim = await this.find(id);
    if (!claim) return undefined;
    if (claim.status !== 'rejected') throw new ClaimReopenError(claim);
    const status = statusReopened(claim);
    const reopened = async () =>
      await this.db.transaction().execute(async (trx) => {
        const of = await trx.selectFrom('giftaid_claims').select('charity_id').where('id', '=', id).executeTakeFirst();
        if (of) await takeTurn(trx, this.dialect, Number(of.charity_id));
        const takenBy = await claimsHoldingRowsOf(trx, id);
        if (takenBy.length > 0) return takenBy;
        const r = await trx
          .updateTable('giftaid_claims')
          .set((eb) => ({ status, rejected_at: null, moves: eb('moves', '+', 1) }))
          .where('id', '=', id)
          .where('status', '=', 'rejected')
          .executeTakeFirst();
        if (r.numUpdatedRows === 0n) return null; // reopened (or gone) meanwhile
        await trx.updateTable('giftaid_claim_donations').set({ live: 1 }).where('claim_id', '=', id).execute();
        await appendAudit(trx, { action: 'giftaid reopen', target: `claim ${id}`, summary: { status, rejected_at: claim.rejected_at } });
        return [];
      });
    let takenBy: number[] | null;
    try {
      takenBy = await reopened();
    } catch (err) {
      // A claim prepared at the same moment took one of its donations: say which.
      if (!isUniqueViolation(err)) throw err;
      takenBy = await claimsHoldingRowsOf(this.db, id);
    }
    const now = (await this.find(id))!;
    if (takenBy === null) {
      if (now.status === 'rejected') throw new ClaimReopenError(now);
      return now;
    }
    if (takenBy.length > 0) {
      const holders = await Promise.all(takenBy.map(async (holder) => await this.find(holder)));
      throw new ClaimReopenError(claim, takenBy, holders.flatMap((h) => (h?.status === 'paid' ? [h.id] : [])));
    }
    return now;
  }

  /**
   * Takes in what another ledger of this database's line (the one a restore replaced) recorded that
   * this one does not: the claims it added, with their ids and rows, and the moves it made on claims
   * both hold (a rejection frees their donations here too). A claim is what was sent to HMRC, so a
   * restore must not forget it: the next claim would take its donations again. A row is linked to
   * the donation of its id only if that donation is the claim's charity's, of the row's day and
   * amount (after a restore of the wrong backup, an id may name another charity's donation); any
   * other row is kept without a donation, as it went into the schedule (migration 0014). In one
   * transaction, with its audit entry; claim ids go on after the largest of either ledger.
   */
  async keepFrom(given: LedgerCopy | LedgerPages): Promise<KeptClaims> {
    const copy = pagesOf(given);
    const kept: KeptClaims = { added: [], marked: [], refused: [] };
    await this.db.transaction().execute(async (trx) => {
      // In turn with claims made or reopened meanwhile (keep-replaced runs beside a server and its commands), each charity's
      // in id order: a kept row has no unique index to stop a claim made at the same moment from holding the same gift.
      for (const charityId of [...new Set(copy.claims.map((c) => c.charity_id))].sort((a, b) => a - b)) await takeTurn(trx, this.dialect, charityId);
      // Past every number either ledger gave, kept or not: a claim refused here was sent to HMRC under its number too (until
      // 2026-11-30 a PostgreSQL counter stayed behind the claims kept, and the next claim's tries failed on their numbers one by one).
      await this.numberAfter(Math.max(0, ...copy.claims.map((c) => c.id)), trx);
      const here = new Map((await trx.selectFrom('giftaid_claims').selectAll().execute()).map((c) => [Number(c.id), c]));
      const charities = new Map((await trx.selectFrom('charities').select(['id', 'username']).execute()).map((c) => [Number(c.id), c.username]));
      const theirs = copy.charities && new Map(copy.charities.map((c) => [c.id, c.username]));
      // The claim's own charity, here: by its id, and by its username where the copy names it (a charity that signed up
      // after the backup takes the next id here, and a claim of the one the restore lost went under it; a review, 2026-11-29).
      const ownCharityHere = (id: number) => charities.has(id) && (theirs === undefined || theirs.get(id) === charities.get(id));
      // A claim here given the other ledger's status, its times and how many times it moved.
      const takeStatus = async (claim: (typeof copy.claims)[number]) => {
        const { status, submitted_at, paid_at, rejected_at } = claim;
        await trx.updateTable('giftaid_claims').set({ status, submitted_at, paid_at, rejected_at, moves: movesOf(claim) }).where('id', '=', claim.id).execute();
      };
      /** Of a page of a claim's rows, the donation ids that name the very donation the row was made from (madeFrom), here. */
      const madeHere = async (part: readonly LedgerRow[], charityId: number): Promise<Set<number>> => {
        const found = new Map(
          (
            await trx
              .selectFrom('donations')
              .select(['id', 'charity_id', 'donation_date', 'amount_minor', 'donor_first_name', 'donor_last_name', 'donor_postcode'])
              .where('id', 'in', part.map((r) => r.donation_id))
              .execute()
          ).map((d) => [Number(d.id), d]),
        );
        return new Set(
          part
            .filter((r) => {
              const d = found.get(r.donation_id);
              return d !== undefined && madeFrom(r, { ...d, charity_id: Number(d.charity_id), amount_minor: Number(d.amount_minor) }, charityId);
            })
            .map((r) => r.donation_id),
        );
      };
      // In id order: a claim rejected frees its donations before a later claim that took them is added.
      const reopened: Array<(typeof copy.claims)[number]> = [];
      for (const claim of [...copy.claims].sort((a, b) => a.id - b.id)) {
        const mine = here.get(claim.id);
        if (mine) {
          // Whichever moved more is the later (reopen moves a claim back); a paid claim is settled in any history.
          const later = movesOf(claim) > movesOf(mine);
          if (Number(mine.charity_id) !== claim.charity_id || mine.prepared_at !== claim.prepared_at) kept.refused.push({ id: claim.id, why: 'another claim' });
          else if (later && mine.status === 'rejected' && claim.status !== 'rejected') reopened.push(claim);
          else if (later && mine.status !== 'paid') {
            const { status, submitted_at, paid_at, rejected_at } = claim;
            await takeStatus(claim);
            if (status === 'rejected') await trx.updateTable('giftaid_claim_donations').set({ live: null }).where('claim_id', '=', claim.id).execute();
            // Moved and moved back (rejected by mistake, reopened): as it was, and not said to be marked (a review, 2026-11-30).
            const asItWas = status === mine.status && submitted_at === mine.submitted_at && paid_at === mine.paid_at && rejected_at === mine.rejected_at;
            if (!asItWas) kept.marked.push({ id: claim.id, status });
          } else if (claim.status !== mine.status && (later || movesOf(claim) === movesOf(mine))) kept.refused.push({ id: claim.id, why: 'status' });
          continue;
        }
        if (!ownCharityHere(claim.charity_id)) {
          kept.refused.push({ id: claim.id, why: 'charity' });
          continue;
        }
        const live = claim.status === 'rejected' ? null : 1;
        const { id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, submitted_at, paid_at, rejected_at } = claim;
        const values = { id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, submitted_at, paid_at, rejected_at, moves: movesOf(claim) };
        // Its rows read a page at a time (LedgerPages) and written as they are read, after a savepoint: should one of the donations
        // they were made from be in another live claim here, the claim is left out, and what was written of it undone.
        await sql`savepoint keep_claim`.execute(trx);
        await insertWithId(trx, this.dialect, 'giftaid_claims', values);
        // The columns by name: the replaced database may be of another version.
        const row = ({ claim_id, donation_id, position, first_name, last_name, house, postcode, donation_day, amount_minor }: LedgerRow) =>
          ({ claim_id, donation_id, position, first_name, last_name, house, postcode, donation_day, amount_minor });
        let withoutDonation = 0;
        let taken = false; // a donation of it is in another live claim here
        for await (const part of copy.rowsOf(claim.id)) {
          const made = await madeHere(part, claim.charity_id);
          if (live && made.size > 0) {
            const other = trx.selectFrom('giftaid_claim_donations').select('donation_id').where('live', '=', 1).where('claim_id', '<>', claim.id).where('donation_id', 'in', [...made]);
            taken = (await other.executeTakeFirst()) !== undefined;
            if (taken) break;
          }
          const linked = part.filter((r) => made.has(r.donation_id));
          const without = part.filter((r) => !made.has(r.donation_id));
          if (linked.length > 0) await trx.insertInto('giftaid_claim_donations').values(linked.map((r) => ({ ...row(r), live }))).execute();
          if (without.length > 0) await trx.insertInto('giftaid_claim_rows_without_donation').values(without.map((r) => ({ ...row(r), donor: r.donor ?? null }))).execute();
          withoutDonation += without.length;
        }
        if (taken) {
          await sql`rollback to savepoint keep_claim`.execute(trx);
          await sql`release savepoint keep_claim`.execute(trx);
          kept.refused.push({ id: claim.id, why: 'taken' });
          continue;
        }
        await sql`release savepoint keep_claim`.execute(trx);
        kept.added.push({ id, status, withoutDonation });
      }
      // A claim the other ledger reopened takes its donations back last, once every claim that took them meanwhile is rejected or added.
      for (const claim of reopened) {
        if ((await claimsHoldingRowsOf(trx, claim.id)).length > 0) {
          kept.refused.push({ id: claim.id, why: 'reopened' });
          continue;
        }
        await takeStatus(claim);
        await trx.updateTable('giftaid_claim_donations').set({ live: 1 }).where('claim_id', '=', claim.id).execute();
        kept.marked.push({ id: claim.id, status: claim.status, reopened: true });
      }
      if (kept.added.length + kept.marked.length + kept.refused.length > 0) {
        await appendAudit(trx, {
          action: 'giftaid claims kept',
          target: 'the replaced database',
          summary: { added: kept.added.map((c) => c.id).join(' ') || null, marked: kept.marked.map((c) => `${c.id} ${c.status}${c.reopened ? ' reopened' : ''}`).join(', ') || null, refused: kept.refused.map((c) => `${c.id} ${c.why}`).join(', ') || null },
        });
      }
    });
    return kept;
  }

  /**
   * The next claim is numbered after `largest` at least: no claim here may take a number another
   * database of this line gave a claim sent to HMRC (its files bear it). Also run alone when keeping
   * a ledger's claims failed (cli/backup.ts).
   */
  async numberAfter(largest: number, db: Kysely<Database> = this.db): Promise<void> {
    await idsAfter(db, this.dialect, 'giftaid_claims', largest);
  }

  private claims() {
    return this.db
      .selectFrom('giftaid_claims')
      .innerJoin('charities', 'charities.id', 'giftaid_claims.charity_id')
      .selectAll('giftaid_claims')
      .select('charities.username as charity');
  }
}

function toClaim({ charity_id: _, ...row }: Selectable<GiftaidClaimsTable> & { charity: string }): Claim {
  // int8 columns may come back as strings from some drivers; every value here fits a number.
  return { ...row, id: Number(row.id), donation_count: Number(row.donation_count), total_minor: Number(row.total_minor) };
}

/** PostgreSQL's unique_violation, or SQLite's UNIQUE constraint failure. */
function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** A ledger row as the schedule's row it went into HMRC as. */
function scheduleRow(r: Omit<Selectable<GiftaidClaimDonationsTable>, 'live' | 'claim_id'>): ScheduleRow {
  return {
    donationId: Number(r.donation_id),
    firstName: r.first_name,
    lastName: r.last_name,
    houseNameOrNumber: r.house,
    postcode: r.postcode,
    donationDay: r.donation_day,
    amountMinor: Number(r.amount_minor),
  };
}

/**
 * Whether a claim's row was made from donation `d`: the claim's charity's, of the row's day and
 * amount, and of its donor's names and postcode as the schedule writes them (after a restore of the
 * wrong backup, an id may name another donor's donation of the same day and amount: a couple giving
 * alike, say). Not the house: how it is read from donor_address has changed between versions (a
 * floor, "Flat 2 of 12", on 2026-11-29), and a row written before would no longer match its own
 * donation, which would then be claimed again; for the same reason the first name and the postcode
 * are compared as read today (matchableFirstName: "Mr John" is "John"; matchablePostcode: O and 0). A
 * row whose details were erased (a donor's erasure since) is matched on the rest.
 */
function madeFrom(
  r: Pick<LedgerCopy['rows'][number], 'donation_day' | 'amount_minor' | 'first_name' | 'last_name' | 'postcode'>,
  d: { charity_id: number; donation_date: string; amount_minor: number; donor_first_name: string | null; donor_last_name: string | null; donor_postcode: string | null },
  charityId: number,
): boolean {
  if (d.charity_id !== charityId || d.amount_minor !== r.amount_minor || donationDay(d.donation_date) !== r.donation_day) return false;
  if (r.first_name === ERASED_IN_CLAIM) return true;
  return (
    matchableFirstName(d.donor_first_name, d.donor_last_name) === matchableFirstName(r.first_name, r.last_name) &&
    hmrcLastName(d.donor_last_name) === r.last_name &&
    matchablePostcode(hmrcPostcode(d.donor_postcode).value) === matchablePostcode(r.postcode)
  );
}

/** A claim's rows as they went into its files, in order: those made from a donation, and those a restore kept without it (keepFrom). */
async function claimRows(db: Kysely<Database>, claimId: number): Promise<ScheduleRow[]> {
  const rows = [];
  for (const table of CLAIM_ROW_TABLES) rows.push(...(await db.selectFrom(table).select(CLAIM_ROW_COLUMNS).where('claim_id', '=', claimId).execute()));
  return rows.sort((a, b) => Number(a.position) - Number(b.position)).map(scheduleRow);
}

/** The rows of the charity's live claims that a restore kept without their donation (keepFrom), with their claim. */
async function keptRowsOfLiveClaims(db: Kysely<Database>, charityId: number): Promise<Array<ScheduleRow & { claimId: number }>> {
  const rows = await db
    .selectFrom('giftaid_claim_rows_without_donation as r')
    .innerJoin('giftaid_claims as c', 'c.id', 'r.claim_id')
    .selectAll('r')
    .where('c.charity_id', '=', charityId)
    .where('c.status', '<>', 'rejected')
    .execute();
  return rows.map((r) => ({ ...scheduleRow(r), claimId: Number(r.claim_id) }));
}

/**
 * Within `trx`, waits for any other transaction making or reopening a claim of the charity (prepare,
 * reopen) to end: each looks at the claims live before it writes one, and a row kept without its
 * donation has no unique index to stop two claims holding the same gift. SQLite's write
 * transactions take turns already (BEGIN IMMEDIATE, open.ts); on PostgreSQL, a lock for the transaction.
 */
async function takeTurn(trx: Kysely<Database>, dialect: DatabaseLocation['dialect'], charityId: number): Promise<void> {
  // The charity's id hashed too, as any id fits an int4 then: two charities that share a hash only wait for each other.
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext('almoner:claims'), hashtext(${String(charityId)}))`.execute(trx);
}

/**
 * The live claims that hold another record of one of claim `id`'s gifts (one gift recorded twice,
 * sent again without a key), as `giftaid claim` tells the same gift (twinsAmong): on PostgreSQL a
 * record held up after taking its id commits after its retry, so a claim may hold the retry, be
 * rejected, and the next claim take the original; reopened, the first claim sent the gift to HMRC
 * a second time (a review of 2026-11-30).
 */
async function claimsHoldingTwinsOf(db: Kysely<Database>, id: number, charityId: number): Promise<number[]> {
  const ofClaim = db.selectFrom('giftaid_claim_donations').select('donation_id').where('claim_id', '=', id);
  // Its days first, from SQL (Math.min(...times) over its donations overflowed the stack past about 125,000).
  const days = await db
    .selectFrom('donations')
    .select((eb) => [eb.fn.min('donation_date').as('earliest'), eb.fn.max('donation_date').as('latest')])
    .where('id', 'in', ofClaim)
    .executeTakeFirst();
  if (!days?.earliest || !days.latest) return [];
  // A day either side, and the time a gift sent again without a date may take to cross a UK midnight.
  const widen = 24 * 3_600_000 + RETRY_ACROSS_MIDNIGHT_MS;
  const range = { from: formatMicros((Date.parse(days.earliest) - widen) * 1000), to: formatMicros((Date.parse(days.latest) + widen) * 1000) };
  // The records in a live claim of those days, each with its claim.
  const claimed = await db
    .selectFrom('giftaid_claim_donations as c')
    .innerJoin('donations', 'donations.id', 'c.donation_id')
    .select(GIFT_FACTS.map((column) => `donations.${column}` as const))
    .select('c.claim_id')
    .where('c.live', '=', 1)
    .where('c.claim_id', '<>', id)
    .where('donations.charity_id', '=', charityId)
    .where('donations.donation_date', '>=', range.from)
    .where('donations.donation_date', '<=', range.to)
    .execute();
  if (claimed.length === 0) return [];
  const own = (await db.selectFrom('donations').select(GIFT_FACTS).where('id', 'in', ofClaim).execute()).map(giftFacts);
  const claimOf = new Map(claimed.map((r) => [Number(r.id), Number(r.claim_id)]));
  const records = claimed.map((r) => ({ ...giftFacts(r), claimed: true }));
  // Only the claim's donations of a gift (day, amount, last name) one of those records has are told further: reading
  // every donor's house, for a claim of 100,000, took 12 s, with SQLite's write lock held (creates answered 503).
  const gifts = new Set(records.flatMap((r) => giftKeys(r)));
  const candidates = own.filter((d) => giftKeys(d).some((key) => gifts.has(key)));
  const twinOf = await twinsAmong(candidates, records);
  const holding = new Set(candidates.flatMap((d) => claimOf.get(twinOf(d)?.id ?? NaN) ?? []));
  return [...holding];
}

/**
 * The live claims other than `id` that hold one of its gifts, in id order: a row of the same
 * donation, or, where either row was kept without its donation by a restore (keepFrom), a row of
 * the charity's of the same gift as a claim tells it (sameGiftKey: a donation sent again after the
 * restore, or two claims kept so). Until a review of 2026-11-30, only the claim's own kept rows were
 * looked for, and by exact last name and postcode: a claim holding a donation sent again, or a kept
 * row of the same gift in another live claim, was reopened beside it.
 */
async function claimsHoldingRowsOf(db: Kysely<Database>, id: number): Promise<number[]> {
  const holding = new Set<number>();
  const byDonation = await db
    .selectFrom('giftaid_claim_donations as other')
    .select('other.claim_id')
    .distinct()
    .where('other.live', '=', 1)
    .where('other.claim_id', '<>', id)
    .where('other.donation_id', 'in', db.selectFrom('giftaid_claim_donations').select('donation_id').where('claim_id', '=', id))
    .execute();
  for (const r of byDonation) holding.add(Number(r.claim_id));
  // Its rows kept without their donation, against the charity's live rows of their day and amount.
  const byFacts = await db
    .selectFrom('giftaid_claim_rows_without_donation as kept')
    .innerJoin('giftaid_claims as mine', 'mine.id', 'kept.claim_id')
    .innerJoin('giftaid_claim_donations as other', (j) => j.onRef('other.donation_day', '=', 'kept.donation_day').onRef('other.amount_minor', '=', 'kept.amount_minor'))
    .innerJoin('giftaid_claims as theirs', 'theirs.id', 'other.claim_id')
    .select(['other.claim_id', 'kept.first_name as kept_first_name', 'kept.last_name as kept_last_name', 'kept.postcode as kept_postcode'])
    .select(['other.first_name', 'other.last_name', 'other.postcode', 'other.donation_day', 'other.amount_minor'])
    .where('kept.claim_id', '=', id)
    .where('other.live', '=', 1)
    .where('other.claim_id', '<>', id)
    .whereRef('theirs.charity_id', '=', 'mine.charity_id')
    .execute();
  for (const r of byFacts) {
    const gift = { donationDay: r.donation_day, amountMinor: Number(r.amount_minor) };
    const kept = sameGiftKey({ ...gift, firstName: r.kept_first_name, lastName: r.kept_last_name, postcode: r.kept_postcode });
    if (kept === sameGiftKey({ ...gift, firstName: r.first_name, lastName: r.last_name, postcode: r.postcode })) holding.add(Number(r.claim_id));
  }
  // Every row of it, against the rows the charity's other live claims kept without their donation.
  const mine = await db.selectFrom('giftaid_claims').select('charity_id').where('id', '=', id).executeTakeFirst();
  const keptElsewhere = mine ? (await keptRowsOfLiveClaims(db, Number(mine.charity_id))).filter((r) => r.claimId !== id) : [];
  if (keptElsewhere.length > 0) {
    const claimsOf = new Map<string, number[]>();
    for (const r of keptElsewhere) claimsOf.set(sameGiftKey(r), [...(claimsOf.get(sameGiftKey(r)) ?? []), r.claimId]);
    for (const r of await claimRows(db, id)) for (const c of claimsOf.get(sameGiftKey(r)) ?? []) holding.add(c);
  }
  if (mine) for (const c of await claimsHoldingTwinsOf(db, id, Number(mine.charity_id))) holding.add(c);
  return [...holding].sort((a, b) => a - b);
}
