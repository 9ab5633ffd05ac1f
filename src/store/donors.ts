// A donor's personal data, erased on request and at the end of its retention period. Rows are
// never deleted: values are replaced (donations/erasure.ts says which and with what), so totals,
// exports, Gift Aid claims and idempotent replays still add up and agree with one another.
import { sql, type Kysely, type Selectable, type Transaction, type Updateable } from 'kysely';
import type { DatabaseLocation } from '../config.js';
import { erasureOf, GIFT_AID_RETENTION_YEARS, giftAidKeptUntil, retentionDay, yearsLater, type Erasure } from '../donations/erasure.js';
import { donationDay } from '../giftaid/schedule.js';
import { nowIso } from '../time.js';
import { appendAudit, retentionTarget, type AuditEntry } from './audit.js';
import { ERASED_CLAIM_DETAILS, ERASED_IN_CLAIM, keptRowsOfDonor } from './claims.js';
import { donationsWithCharity, donorReference, donorReferences, donorScan, isOneOf } from './donation-query.js';
import { toStoredDonation } from './rows.js';
import type { Database, DonationsTable } from './schema.js';

/** How long an erasure waits for readers to let it empty the WAL (SQLite): see DonorData.emptyWal. */
const WAL_EMPTIED_WITHIN_MS = 60_000;

/** How often emptyWal tries again while a reader holds the WAL. */
const WAL_TRY_EVERY_MS = 100;

/**
 * The most donations an erasure works out afresh within its write transaction (erasing): past it,
 * it lets the transaction go, works them out before it, and tries again. 1,000 take 0.06 s here.
 */
const WORKED_OUT_WITHIN = 1000;

/** How many times an erasure lets its write transaction go for that before it works them out within it all the same. */
const WORKED_OUT_TRIES = 3;

/**
 * How many donation ids a retention run reads and erases in one transaction: on SQLite the
 * server's creates wait for one batch at most (a batch of 5,000 all due: about 0.15 s here).
 */
const RETENTION_IDS_A_BATCH = 5000;

/**
 * An erasure's traces left in the SQLite file (emptyWal could not empty the WAL: a reader held it
 * for WAL_EMPTIED_WITHIN_MS): said after what was erased, never in place of it. `erasedNow`: this
 * run erased something (the command then exits 1); else only an earlier run's may be left.
 */
export interface TracesLeft {
  erasedNow: boolean;
  message: string;
}

/** One donation's erasure: which, whose, and what it changes. */
export interface DonationErasure {
  id: number;
  charity: string;
  /** YYYY-MM-DD, the donation's day. */
  day: string;
  /** YYYY-MM-DD, the day its retention counts from (retentionDay): its day, but no more than a year after it was recorded (nor, not yet erased, more than a year before). */
  retainedFrom: string;
  giftAid: boolean;
  erasure: Erasure;
}

/** A claim's row a restore kept without its donation (migration 0014), found by a donor's erasure. */
export interface ClaimRowErasure {
  claimId: number;
  position: number;
  charity: string;
  /** YYYY-MM-DD, the donation's day. */
  day: string;
  /** YYYY-MM-DD: the row is kept as sent to HMRC until then; null: its Gift Aid retention has ended, and its details are erased. */
  keptUntil: string | null;
}

/** What a donor's erasure found: their donations, and the claim rows kept under their reference without a donation. */
export interface DonorErasure {
  donations: DonationErasure[];
  claimRows: ClaimRowErasure[];
  /** Set when the file may still hold what was erased (SQLite): see TracesLeft. */
  tracesLeft?: TracesLeft;
}

/** What a retention run erased (or would), and what it could not clear from the file. */
export interface RetentionRun {
  erased: DonationErasure[];
  tracesLeft?: TracesLeft;
}

export class DonorData {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DatabaseLocation['dialect'],
    /** WAL_EMPTIED_WITHIN_MS; a test shortens it instead of waiting a minute. */
    private readonly walEmptiedWithinMs = WAL_EMPTIED_WITHIN_MS,
  ) {}

  /**
   * Erases the personal data of every donation recorded with `email` (in any case), of one charity
   * or all, as it stands on `today` (YYYY-MM-DD, UK), with its audit entry, in one transaction.
   * `dryRun`: says what it would do and changes nothing. `beforeWriting`: a test's pause once the
   * erasures are worked out, before each try of the write transaction (see erasing).
   */
  async erase({ email, charity, today, dryRun, againOf, beforeWriting }: { email: string; charity?: string; today: string; dryRun: boolean; againOf?: string; beforeWriting?: () => Promise<void> }): Promise<DonorErasure> {
    let found: DonorErasure = { donations: [], claimRows: [] };
    // Every address read before the write transaction: within it, on SQLite, the server's creates waited for the
    // whole table (4.5 s, and 503s, for 600,000 donations; a review). Inside, only what it found and what came since.
    const donorScanned = await donorScan(this.db, email);
    const theirs = (db: Kysely<Database>) => donationsWithCharity(db, this.dialect, { donorEmail: email, charity, donorScanned });
    const { tracesLeft } = await this.leavingNoTrace(dryRun, () => this.erasing(theirs, today, async (trx, donations) => {
      const reference = donorReference(email);
      // A claim's rows a restore kept without their donation, under this donor's reference (migration 0017): kept for HMRC as their donation would be.
      const kept = await keptRowsOfDonor(trx, donorReferences(email), charity).execute();
      found = {
        donations,
        claimRows: kept.map((r) => {
          const until = giftAidKeptUntil(r.donation_day);
          return { claimId: Number(r.claim_id), position: Number(r.position), charity: r.charity, day: r.donation_day, keptUntil: until >= today ? until : null };
        }),
      };
      if (!dryRun) {
        await this.apply(trx, found.donations, reference);
        await eraseKeptClaimRows(trx, found.claimRows.filter((r) => r.keptUntil === null).map((r) => ({ claim_id: r.claimId, position: r.position })));
        await appendAudit(trx, erasureEntry(reference, charity, found, againOf));
      } else {
        // A dry run changes nothing, but says which charities this person gave to and on which days: data taken
        // out, as a `donor export` is. An action of its own, so that a restore never makes it again as an erasure.
        await appendAudit(trx, { action: 'donor erase dry run', target: reference, summary: { charity: charity ?? null, donations: found.donations.length } });
      }
      return found.donations;
    }, beforeWriting), () => found.claimRows.length);
    return { ...found, ...(tracesLeft && { tracesLeft }) };
  }

  /**
   * A restore's repeat of a donor's erasure (`againOf`) when the restored database holds no donation
   * of theirs: recorded all the same, so that the trail still says they asked, and a later restore
   * of a backup that does hold their donations erases those too (audit.ts's erasuresAfter).
   */
  async recordErasureAgain({ reference, charity, againOf }: { reference: string; charity?: string; againOf: string }): Promise<void> {
    await appendAudit(this.db, erasureEntry(reference, charity, { donations: [], claimRows: [] }, againOf));
  }

  /**
   * Erases, on `today`, the personal data whose retention period has ended: a gift-aided
   * donation's seven years after its day (giftAidKeptUntil), any other donation's
   * `retentionYears` after its day. In batches of `idsABatch` donation ids, each in its own
   * transaction with its own audit entry (the last batch's also erases the claim rows kept without
   * their donation, and its entry is written even when nothing was due), so that on SQLite the
   * server's creates wait for one batch at most: one transaction over the whole table (a first run
   * over years of donations, 607,000 due among 2,500,000) held the write lock for about 16 s, every
   * create meanwhile answered 503, and the run took 2.9 GB of memory (until a review of 2026-11-30).
   * `each`: given each batch's erasures once committed (or, a dry run, read), and awaited; they
   * are then not kept in the run's `erased`, so a run's memory is one batch's.
   */
  async applyRetention({
    today,
    retentionYears,
    dryRun,
    againOf,
    each,
    idsABatch = RETENTION_IDS_A_BATCH,
  }: {
    today: string;
    retentionYears: number;
    dryRun: boolean;
    againOf?: string;
    each?: (erased: DonationErasure[]) => Promise<void> | void;
    idsABatch?: number;
  }): Promise<RetentionRun> {
    // Nothing younger than the shorter of the two periods can be due: the query reads only the older rows.
    const since = `${Number(today.slice(0, 4)) - Math.min(retentionYears, GIFT_AID_RETENTION_YEARS)}${today.slice(4)}T00:00:00.000000Z`;
    const older = (first: number, last: number) => async (db: Kysely<Database>) =>
      (await donationsWithCharity(db, this.dialect))
        .where('donations.id', '>=', first)
        .where('donations.id', '<=', last)
        .where((eb) => eb.or([eb('donations.erased_at', 'is', null), eb('donations.erase_after', 'is not', null)]))
        .where((eb) => eb.or([eb('donations.erase_after', '<', today), eb('donations.donation_date', '<', since), eb('donations.recorded_at', '<', since)]));
    // The ids there are now: a donation recorded during the run is too young to be due.
    const bounds = await this.db.selectFrom('donations').select((eb) => [eb.fn.min('id').as('first'), eb.fn.max('id').as('last')]).executeTakeFirst();
    const [first, last] = [Number(bounds?.first ?? 1), Number(bounds?.last ?? 0)];
    const erased: DonationErasure[] = [];
    let count = 0;
    let claimRows = 0; // claim rows kept without their donation whose details went too (they leave no trace either)
    const run = await this.leavingNoTrace(dryRun, async () => {
      for (let from = first; ; from += idsABatch) {
        const to = Math.min(from + idsABatch - 1, last);
        const lastBatch = to >= last;
        const due = await this.erasing(older(from, to), today, async (trx, erasures) => {
          const due = erasures.filter((d) => endOfRetention(d, retentionYears) < today);
          if (!dryRun && (due.length > 0 || lastBatch)) {
            await this.apply(trx, due);
            let rows = 0;
            if (lastBatch) {
              // A claim's rows a restore kept without their donation (migration 0014) hold the donor's details for HMRC as long as a donation would.
              const kept = await trx.selectFrom('giftaid_claim_rows_without_donation').select(['claim_id', 'position', 'donation_day']).where('first_name', '<>', ERASED_IN_CLAIM).execute();
              const ended = kept.filter((k) => giftAidKeptUntil(k.donation_day) < today);
              rows = ended.length;
              await eraseKeptClaimRows(trx, ended);
            }
            await appendAudit(trx, {
              action: 'retention apply',
              target: retentionTarget(today),
              summary: { retention_years: retentionYears, donations: due.length, ...(rows > 0 && { claim_rows_without_donation: rows }), ...(againOf && { again_of: againOf }) },
            });
            claimRows += rows;
          }
          return due;
        });
        count += due.length;
        if (each) await each(due);
        else erased.push(...due);
        if (lastBatch) break;
      }
      return erased;
    }, () => count + claimRows - erased.length);
    return run;
  }

  /**
   * An e-mail address, as stored, of each donor with one of these references (donorReference): how a donor's erasure is found again from the audit trail, which names them by
   * reference only. One address a donor is enough: erase() finds every form of it.
   */
  async emailsOf(references: ReadonlySet<string>): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const { donor_email } of await this.db.selectFrom('donations').select('donor_email').distinct().execute()) {
      for (const reference of donorReferences(donor_email)) if (references.has(reference) && !found.has(reference)) found.set(reference, donor_email);
    }
    return found;
  }

  /**
   * The donations `of` finds, each with its erasure on `today`, in id order, handed to `write` within
   * the write transaction: as one transaction would find them. Worked out within it (each house and
   * postcode read), 30,000 gift-aided donations still kept held SQLite's write lock for 1.5 to 6.6 s,
   * and the server's creates waited, past 4.5 s answered 503 (until 2026-11-30). So they are worked
   * out before it, and within it only each one's id and erased_at are read again: a donation
   * recorded, or erased, since is read and worked out afresh. A donation's row changes only when it
   * is erased, and every erasure stamps erased_at anew (apply), so the same stamp is the same row.
   * More than WORKED_OUT_WITHIN of those (another erasure of the same donations committed meanwhile:
   * the same command run twice at once, a retention run beside a donor's erasure), and they were all
   * worked out within it, holding the lock as long as before (1.4 s for 30,000, until a review of
   * 2026-11-30): the transaction is let go, they are worked out before it, and it is tried again.
   * `beforeWriting` runs before each try.
   */
  private async erasing<T>(
    of: (db: Kysely<Database>) => Promise<DonationsQuery>,
    today: string,
    write: (trx: Transaction<Database>, erasures: DonationErasure[]) => Promise<T>,
    beforeWriting?: () => Promise<void>,
  ): Promise<T> {
    const worked = new Map<number, { erasedAt: string | null; erasure: DonationErasure }>();
    const workOut = (rows: ErasableRow[]) => rows.forEach((row) => worked.set(Number(row.id), { erasedAt: row.erased_at, erasure: toErasure(row, today) }));
    const read = async (db: Kysely<Database>, ids: number[]) => workOut(await (await donationsWithCharity(db, this.dialect)).where(isOneOf(this.dialect, 'donations.id', ids)).execute());
    workOut(await (await of(this.db)).execute());
    for (let tries = 1; ; tries++) {
      await beforeWriting?.();
      const outcome = await this.db.transaction().execute(async (trx): Promise<{ since: number[] } | { written: T }> => {
        // Erasures take turns on PostgreSQL, as SQLite's write transactions do: under read committed, another committed between
        // the read below and the writes would be overwritten with values worked out from the rows before it (an erasure and a
        // retention run of another day), and two erasures' grouped updates could deadlock (a review, 2026-11-30).
        if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext('almoner:erasures'))`.execute(trx);
        const now = await (await of(trx)).clearSelect().select(['donations.id', 'donations.erased_at']).orderBy('donations.id').execute();
        const since = now.filter((r) => worked.get(Number(r.id))?.erasedAt !== r.erased_at).map((r) => Number(r.id));
        if (since.length > WORKED_OUT_WITHIN && tries < WORKED_OUT_TRIES) return { since }; // nothing written: let go
        if (since.length > 0) await read(trx, since);
        return { written: await write(trx, now.map((r) => worked.get(Number(r.id))!.erasure)) };
      });
      if ('written' in outcome) return outcome.written;
      await read(this.db, outcome.since);
    }
  }

  /**
   * Runs an erasure, then on SQLite moves what it wrote from the WAL into the database and empties
   * the WAL, whose earlier frames still held the rows as they were before it (secure_delete, set in
   * open.ts, zeroes what the erasure freed in the database itself). A connection reading at that
   * moment keeps the checkpoint from finishing, and the database file's pages still hold what was
   * erased: emptyWal waits for it, and says so if it cannot. On
   * PostgreSQL the rows' old versions stay in the table's files until VACUUM reuses their space
   * (the README says what that means for backups).
   */
  private async leavingNoTrace(dryRun: boolean, erase: () => Promise<DonationErasure[]>, alsoErased: () => number = () => 0): Promise<RetentionRun> {
    const erased = await erase();
    // Even when nothing was found: the same command run again then finishes what a reader held up.
    const tracesLeft = !dryRun && this.dialect === 'sqlite' ? await this.emptyWal(erased.length + alsoErased() > 0) : undefined;
    return { erased, ...(tracesLeft && { tracesLeft }) };
  }

  /**
   * Checkpoints the WAL into the database and empties it. A connection reading (a `donations
   * export` to a slow reader, a backup's VACUUM INTO) keeps a checkpoint from finishing: SQLite
   * says so (busy), and the database file's own pages still hold what was erased, the WAL only
   * shadowing them. Tried again every WAL_TRY_EVERY_MS until walEmptiedWithinMs have passed, then
   * said (TracesLeft): it was said nowhere, the command exited 0.
   *
   * Each try without waiting (busy_timeout 0 for it): a TRUNCATE checkpoint that waits holds the
   * database's write lock while it does, and with the connection's 5 s busy timeout, tried for a
   * minute, the server's creates waited up to 4.5 s and were answered 503 for as long as a reader
   * lasted (until 2026-11-30; an operator's review). One that does not wait copies what it can,
   * as a passive one does, and lets go.
   */
  private async emptyWal(erasedNow: boolean): Promise<TracesLeft | undefined> {
    const deadline = performance.now() + this.walEmptiedWithinMs;
    const { rows: timeout } = await sql<{ timeout: number }>`pragma busy_timeout`.execute(this.db);
    await sql`pragma busy_timeout = 0`.execute(this.db);
    try {
      for (;;) {
        const { rows } = await sql<{ busy: number }>`pragma wal_checkpoint(truncate)`.execute(this.db);
        if (Number(rows[0]?.busy ?? 0) === 0) return undefined;
        if (performance.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, WAL_TRY_EVERY_MS));
      }
    } finally {
      await sql.raw(`pragma busy_timeout = ${Number(timeout[0]?.timeout ?? 5000)}`).execute(this.db);
    }
    const held = `another connection has been reading for over ${this.walEmptiedWithinMs / 1000} s (a backup, an export) and keeps SQLite from emptying the WAL`;
    return erasedNow
      ? {
          erasedNow,
          message:
            `the erasure is done and recorded, but what was erased is still in the database file's pages: ${held}. ` +
            'Run the same command again once it has finished',
        }
      : {
          erasedNow,
          message:
            `nothing was erased now, but ${held}: if an earlier erasure or retention run exited 1, what it erased may still be in the database file's pages. ` +
            'Run the same command again once the reader has finished',
        };
  }

  /**
   * Writes each erasure. A donation that keeps some of its details keeps `donor` too, the reference
   * of the donor whose request erased it (a later request of theirs finds it: the address is gone);
   * one erased in full loses it. `donor` undefined (retention) leaves a kept donation's as it is.
   */
  private async apply(trx: Transaction<Database>, erasures: DonationErasure[], donor?: string): Promise<void> {
    const at = nowIso();
    // Donations changed alike (a donor's, mostly) in one statement: a statement each took minutes for a donor with
    // tens of thousands of donations, holding the server's creates on SQLite meanwhile (until 2026-11-30).
    const alike = new Map<string, { change: Updateable<DonationsTable>; ids: number[] }>();
    for (const { id, erasure } of erasures) {
      // erasureOf gives a required field its marker, never null.
      const set = erasure.set as Updateable<DonationsTable>;
      const erasedDonor = erasure.keptUntil === null ? { erased_donor: null } : donor === undefined ? {} : { erased_donor: donor };
      const change = { ...set, erased_at: at, erase_after: erasure.keptUntil, ...erasedDonor };
      const key = JSON.stringify(change);
      const group = alike.get(key);
      if (group) group.ids.push(id);
      else alike.set(key, { change, ids: [id] });
    }
    for (const { change, ids } of alike.values()) await trx.updateTable('donations').set(change).where(isOneOf(this.dialect, 'id', ids)).execute();
    const unkept = erasures.filter((e) => e.erasure.keptUntil === null).map((e) => e.id);
    if (unkept.length > 0) await trx.updateTable('giftaid_claim_donations').set(ERASED_CLAIM_DETAILS).where(isOneOf(this.dialect, 'donation_id', unkept)).execute();
  }
}

/** The donations an erasure reads, as donationsWithCharity makes the query: unordered and unrun. */
type DonationsQuery = Awaited<ReturnType<typeof donationsWithCharity>>;

/** A donation as an erasure reads it: its row, with its charity's username. */
type ErasableRow = Selectable<DonationsTable> & { charity: string };

function toErasure(row: ErasableRow, today: string): DonationErasure {
  const d = toStoredDonation(row);
  // Retention's run over a donation not yet erased counts from no more than a year before it was recorded; an erasure's own keeping (erase_after) from its day.
  const retainedFrom = retentionDay(d, { notLongBeforeRecorded: row.erased_at == null });
  return { id: d.id, charity: row.charity, day: donationDay(d.donation_date), retainedFrom, giftAid: d.gift_aid, erasure: erasureOf(d, today) };
}

/** The last day a donation's personal data may be kept. */
function endOfRetention(d: DonationErasure, retentionYears: number): string {
  return d.giftAid ? giftAidKeptUntil(d.retainedFrom) : yearsLater(retentionYears, d.retainedFrom);
}

/** A donor's erasure as the trail records it: whose (by reference), of which charity's donations or all, how many, and the entry a restore's repeat repeats. */
function erasureEntry(reference: string, charity: string | undefined, found: DonorErasure, againOf: string | undefined): AuditEntry {
  const kept = found.donations.filter((f) => f.erasure.keptUntil !== null).length;
  const rows = found.claimRows.length > 0 && { claim_rows_without_donation: found.claimRows.length, claim_rows_kept_for_gift_aid: found.claimRows.filter((r) => r.keptUntil !== null).length };
  return {
    action: 'donor erase',
    target: reference,
    summary: { charity: charity ?? null, donations: found.donations.length, kept_for_gift_aid: kept, ...rows, ...(againOf && { again_of: againOf }) },
  };
}

/** Replaces the donor's details in these claim rows kept without their donation, and their donor's reference with them. */
async function eraseKeptClaimRows(trx: Transaction<Database>, rows: ReadonlyArray<{ claim_id: number; position: number }>): Promise<void> {
  for (const r of rows) {
    await trx
      .updateTable('giftaid_claim_rows_without_donation')
      .set({ ...ERASED_CLAIM_DETAILS, donor: null })
      .where('claim_id', '=', r.claim_id)
      .where('position', '=', r.position)
      .execute();
  }
}
