// The Store: everything Almoner keeps, behind one interface, its queries written once over Kysely
// for both dialects (chosen in open.ts). A create's writes are stated in donation-writes.ts, as
// prepared statements on the hot path (statements.ts), and batched by group-commit.ts; the schema
// is brought up to date by migrate.ts.
import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Kysely, type UpdateObject, type UpdateQueryBuilder, type UpdateResult } from 'kysely';
import { appendAudit, readAudit, type AuditEntry, type AuditRecord } from './audit.js';
import { UsernameTakenError, type Charity, type CharityCredential, type NewCharity } from '../charities/charity.js';
import type { NewDonation, StoredDonation } from '../donations/donation.js';
import { loggable } from '../loggable.js';
import { formatMicros, nowIso, nowMicros, type Clock } from '../time.js';
import type { CharityRow, Database } from './schema.js';
import { ClaimLedger } from './claims.js';
import { idsAfter, insertWithId } from './sequence.js';
import { donationsWithCharity, type DonationFilter } from './donation-query.js';
import { DonationWrites, keyTaken, type IdempotencyKey, type KeyedOutcome } from './donation-writes.js';
import { DonorData } from './donors.js';
import { toStoredDonation } from './rows.js';
import type { DatabaseLocation } from '../config.js';
import { byDeadline, type DatabaseBudget } from './budget.js';
import { GroupCommit, type BatchObserver } from './group-commit.js';

/** What carryCharities did with a charity's row: put it on this database's, added it, or left it out for another charity's here. */
export type CarriedCharity =
  | { username: string; outcome: 'updated' | 'added'; id: number; oldPasswordLeft?: true }
  | { username: string; outcome: 'clash'; other: { id: number; username: string } };

/** A column of a charity's credentials. */
export type CredentialColumn = 'password_hash' | 'old_password_hash' | 'old_password_until' | 'active';

/** The columns of a charity's credentials each of its changes sets (setPasswordHash, endGrace, setActive, createCharity): what carryCharities carries of it. */
const CARRIED_BY: Partial<Record<string, CredentialColumn[]>> = {
  'charity create': ['password_hash', 'old_password_hash', 'old_password_until', 'active'],
  'charity rotate': ['password_hash', 'old_password_hash', 'old_password_until'],
  'charity end-grace': ['old_password_hash', 'old_password_until'],
  'charity disable': ['active'],
  'charity enable': ['active'],
};

/** Why a carried rotation's old password is not: said by keep-replaced and restore, and recorded in the carried entry's `old_password`. */
export const OLD_PASSWORD_LEFT = "not carried over: the backup's history had rotated it away";

/** The columns of a charity's credentials that a change of it (its audit entry's action) sets. */
export const columnsSetBy = (action: string): CredentialColumn[] => CARRIED_BY[action] ?? [];

/** An update of one charity's row, narrowed further by changeCharity's callers. */
type CharityUpdate = UpdateQueryBuilder<Database, 'charities', 'charities', UpdateResult>;

export type { DonationFilter } from './donation-query.js';
export { KeyTakenError, type IdempotencyKey, type KeyedOutcome } from './donation-writes.js';

export interface ExportedDonation extends StoredDonation {
  charity: string;
}

/**
 * Where a create's writes go: this process's group commit, or under WORKERS on SQLite the
 * primary's (cluster/creates.ts), the one writer for every worker. `deadline` is on
 * performance.now()'s clock; past it the write fails with DatabaseDeadlineError and is not stored.
 */
export interface CreateWrites {
  insert(charityId: number, d: NewDonation, deadline: number | undefined): Promise<StoredDonation>;
  insertKeyed(charityId: number, d: NewDonation, key: IdempotencyKey, deadline: number | undefined): Promise<KeyedOutcome>;
  /** The error writes are failing with for want of the database, if they are (GroupCommit.writeFailure). */
  writeFailure(): unknown;
  /** Reports each batch's size and commit time (to metrics). */
  observeWith(observer: BatchObserver): void;
}

export class Store {
  /** A create's writes: by default this process's group commit (localCreates). */
  private creates: CreateWrites;
  /** The Gift Aid claims. */
  readonly claims: ClaimLedger;
  /** Donors' personal data: erasure and retention. */
  readonly donors: DonorData;

  constructor(
    private readonly db: Kysely<Database>,
    readonly dialect: DatabaseLocation['dialect'],
    {
      writeConcurrency = 1,
      sqlite,
      clock,
      walEmptiedWithinMs,
    }: {
      /** Batches of writes at once: SQLite has one writer; PostgreSQL, one per pooled connection but one, left for reads (open.ts). */
      writeConcurrency?: number;
      /** SQLite: the connection under `db`, on which creates are written synchronously, a batch at a time. */
      sqlite?: BetterSqlite3.Database;
      /** The clock KEYS_FOUND_MS is counted on, and on PostgreSQL the one donation ids taken ahead go stale on (DonationIds). */
      clock?: Clock;
      /** SQLite: how long an erasure waits for readers to let it empty the WAL (donors.ts's WAL_EMPTIED_WITHIN_MS); tests shorten it. */
      walEmptiedWithinMs?: number;
    } = {},
  ) {
    this.creates = localCreates(db, dialect, { concurrency: writeConcurrency, sqlite }, clock);
    this.claims = new ClaimLedger(db, dialect);
    this.donors = new DonorData(db, dialect, walEmptiedWithinMs);
  }

  /** Reports each group-commit batch's size and commit time (to metrics). */
  observeBatches(observer: BatchObserver): void {
    this.creates.observeWith(observer);
  }

  /** Creates are written by `creates` from now on (under WORKERS on SQLite, by the primary): the rest is still read and written here. */
  writeCreatesThrough(creates: CreateWrites): void {
    this.creates = creates;
  }

  /**
   * Whether the database answers and takes writes: a query, and no write failed for want of the
   * database (a full or read-only disk) in the last 5 s without one succeeding since.
   */
  async ping(budget?: DatabaseBudget): Promise<void> {
    return this.tracked(budget, async (deadline) => {
      await byDeadline(deadline, this.db.selectFrom('charities').select('id').limit(1).execute());
      const failure = this.writeFailure();
      if (failure !== undefined) throw failure;
    });
  }

  /** The error writes are failing with for want of the database (a full or read-only disk), if they are: what ping reports. */
  writeFailure(): unknown {
    return this.creates.writeFailure();
  }

  /**
   * Waits (5 s at most) for the operations still running, for example those of requests whose
   * client has gone while the server drains, then closes the database.
   */
  async close(): Promise<void> {
    const deadline = performance.now() + 5000;
    let quietTurns = 0; // a just-finished operation's caller may start the next one a moment later
    while (quietTurns < 2 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      quietTurns = this.active === 0 ? quietTurns + 1 : 0;
    }
    await this.db.destroy();
  }

  private active = 0;

  /**
   * Counts an operation as running until it settles, so close() can wait for it. With a request's
   * budget, `work` is given its deadline, and must pass it on to every wait for the database.
   */
  private async tracked<T>(budget: DatabaseBudget | undefined, work: (deadline: number | undefined) => Promise<T>): Promise<T> {
    this.active++;
    try {
      return await (budget ? budget.spend(work) : work(undefined));
    } finally {
      this.active--;
    }
  }

  // --- charities ---

  async findCredential(username: string, budget?: DatabaseBudget): Promise<CharityCredential | undefined> {
    return this.tracked(budget, async (deadline) => {
      const row = await byDeadline(
        deadline,
        this.db
          .selectFrom('charities')
          .select(['id', 'name', 'email', 'password_hash', 'active', 'old_password_hash', 'old_password_until'])
          .where('username', '=', username)
          .executeTakeFirst(),
      );
      return row && { ...row, active: Boolean(row.active) };
    });
  }

  /** Signs a charity up, with its audit entry in the same transaction. */
  async createCharity(c: NewCharity): Promise<Charity> {
    const now = nowIso();
    const taken = await this.db.selectFrom('charities').select('id').where('username', '=', c.username).executeTakeFirst();
    if (taken) throw new UsernameTakenError(c.username);
    const row = await this.db.transaction().execute(async (trx) => {
      const row = await trx
        .insertInto('charities')
        .values({ ...c, active: 1, created_at: now, updated_at: now })
        .returning(['id', 'name', 'email', 'username', 'active', 'created_at'])
        .executeTakeFirstOrThrow();
      await appendAudit(trx, { action: 'charity create', target: row.username, summary: { id: Number(row.id), name: row.name } });
      return row;
    });
    return { ...row, active: Boolean(row.active), old_password_until: null };
  }

  async listCharities(): Promise<Charity[]> {
    const rows = await this.db
      .selectFrom('charities')
      .select(['id', 'name', 'email', 'username', 'active', 'created_at', 'old_password_until'])
      .orderBy('id')
      .execute();
    const now = nowIso();
    return rows.map((r) => ({ ...r, active: Boolean(r.active), old_password_until: r.old_password_until !== null && r.old_password_until > now ? r.old_password_until : null }));
  }

  /**
   * How many rows the table holds: charities (whether to say how to sign the first one up), donations (what a restore says).
   * Tracked, so that close() waits for it: a server stopped just as it started had its database closed under the count it
   * makes once it listens (`driver has already been destroyed` on stderr, until 2026-12-02).
   */
  async count(table: 'charities' | 'donations'): Promise<number> {
    return this.tracked(undefined, async () => {
      const { n } = await this.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      return Number(n);
    });
  }

  /**
   * A new password (its hash), audited as a rotation; false when there is no such charity. With
   * `graceUntil` (stored format), the password it replaces still works until then (`rotate --grace`);
   * without, it stops at once, and so does any old one still in its grace.
   */
  async setPasswordHash(username: string, password_hash: string, graceUntil?: string, replacing?: string): Promise<boolean> {
    const old = graceUntil === undefined ? { old_password_hash: null, old_password_until: null } : { old_password_hash: sql<string>`password_hash`, old_password_until: graceUntil };
    const summary: Record<string, string> = graceUntil === undefined ? {} : { old_password_until: graceUntil };
    // `replacing`: only over that password hash (charity rotate's, read as it began), not over one another rotation set meanwhile.
    return this.changeCharity(username, { password_hash, ...old }, { action: 'charity rotate', target: username, summary }, (q) =>
      replacing === undefined ? q : q.where('password_hash', '=', replacing),
    );
  }

  /**
   * Stops the password a `rotate --grace` replaced from working before its time: 'ended', audited;
   * 'none' when no old password works; 'unknown' when there is no such charity.
   */
  async endGrace(username: string): Promise<'ended' | 'none' | 'unknown'> {
    const ended = await this.changeCharity(
      username,
      { old_password_hash: null, old_password_until: null },
      { action: 'charity end-grace', target: username },
      (q) => q.where('old_password_until', '>', nowIso()),
    );
    if (ended) return 'ended';
    return (await this.findCredential(username)) ? 'none' : 'unknown';
  }

  /**
   * Enabled or disabled, audited when it changed: 'already' when the charity was so (no change, so
   * no audit entry), 'unknown' when there is no such charity.
   */
  async setActive(username: string, active: boolean): Promise<'changed' | 'already' | 'unknown'> {
    const to = active ? 1 : 0;
    const audit: AuditEntry = { action: active ? 'charity enable' : 'charity disable', target: username };
    const changed = await this.changeCharity(username, { active: to }, audit, (q) => q.where('active', '<>', to));
    if (changed) return 'changed';
    return (await this.findCredential(username)) ? 'already' : 'unknown';
  }

  /**
   * A restore's carry of charities' credentials from the database it replaced (cli/backup.ts), in
   * one transaction: on this database's row of the same id and username, what each of `row`'s
   * `entries` set (CARRIED_BY: a rotation its password, old password and its end; an end of grace
   * the old password's end; a disable or enable whether it is enabled; a sign-up all of them); or,
   * where this database has neither, the row whole, with its id (a charity signed up after the
   * backup), the ids going on after it. Each with its `entries` in the trail. A row whose id or
   * username is another charity's here is left out ('clash', naming that one): this database gave
   * it out since, and it is not this one. The columns in `keep` (changed here since the restore) are
   * not touched. Until 2026-11-30 all four were carried whatever the entries
   * were: over a database whose history had parted from the backup's at an earlier restore (of the
   * wrong backup, into a new database), a rotation there enabled again a charity the backup held
   * disabled, and a disable there brought back a password the backup had rotated away (a review).
   */
  async carryCharities(carried: Array<{ row: CharityRow; entries: AuditEntry[]; keep: ReadonlySet<CredentialColumn> }>): Promise<CarriedCharity[]> {
    return this.db.transaction().execute(async (trx) => {
      const outcomes: CarriedCharity[] = [];
      for (const { row, entries, keep } of carried) {
        const here = await trx
          .selectFrom('charities')
          .select(['id', 'username', 'password_hash', 'old_password_hash', 'old_password_until'])
          .where((eb) => eb.or([eb('id', '=', row.id), eb('username', '=', row.username)]))
          .execute();
        const other = here.find((c) => Number(c.id) !== row.id || c.username !== row.username);
        if (other) {
          outcomes.push({ username: row.username, outcome: 'clash', other: { id: Number(other.id), username: other.username } });
          continue;
        }
        const { id, name, email, username, password_hash, old_password_hash, old_password_until, active, created_at, updated_at } = row;
        const ours = here[0];
        // An old password is one a password rotated away: the one this row has (or has in its grace), or one the changes carried
        // set. Else it is one the backup's history rotated away, which the replaced database's history, parted from it at an
        // earlier restore, never did (say because it leaked): it is not carried.
        const setByChanges = entries.filter((e) => e.action === 'charity rotate' || e.action === 'charity create').length > 1;
        const stillOurs = ours && (old_password_hash === ours.password_hash || (old_password_hash === ours.old_password_hash && (ours.old_password_until ?? '') > nowIso()));
        const columns = new Set(entries.flatMap((e) => columnsSetBy(e.action)).filter((column) => !keep.has(column)));
        const oldPasswordLeft = ours !== undefined && columns.has('old_password_hash') && old_password_hash !== null && !setByChanges && !stillOurs;
        if (ours) {
          const credentials = { password_hash, active, ...(oldPasswordLeft ? { old_password_hash: null, old_password_until: null } : { old_password_hash, old_password_until }) };
          const set = Object.fromEntries([...columns].map((column) => [column, credentials[column]]));
          await trx.updateTable('charities').set({ ...set, updated_at: nowIso() }).where('id', '=', id).execute();
        } else {
          // The counter past it: the replaced database gave this id out.
          await idsAfter(trx, this.dialect, 'charities', id);
          await insertWithId(trx, this.dialect, 'charities', { id, name, email, username, password_hash, active, old_password_hash, old_password_until, created_at, updated_at });
        }
        // Recorded as carried: a grace whose old password was left out ends with it (until 2026-11-30 its entry still named the grace's end).
        for (const entry of entries) await appendAudit(trx, oldPasswordLeft && entry.summary?.old_password_until != null ? { ...entry, summary: { ...entry.summary, old_password_until: null, old_password: OLD_PASSWORD_LEFT } } : entry);
        outcomes.push({ username, outcome: ours ? 'updated' : 'added', id, ...(oldPasswordLeft && { oldPasswordLeft }) });
      }
      return outcomes;
    });
  }

  /** Changes the charity's row and audits it, in one transaction; false when no row changed (no such charity, or none that `only` keeps). */
  private async changeCharity(username: string, change: UpdateObject<Database, 'charities'>, audit: AuditEntry, only: (q: CharityUpdate) => CharityUpdate = (q) => q): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const q = only(trx.updateTable('charities').set({ ...change, updated_at: nowIso() }).where('username', '=', username));
      const r = await q.executeTakeFirst();
      if (r.numUpdatedRows === 0n) return false;
      await appendAudit(trx, audit);
      return true;
    });
  }

  // --- the audit trail ---

  /** Records an operator action that changes nothing here (an export, a backup) or that happened elsewhere. */
  async audit(entry: AuditEntry): Promise<void> {
    await appendAudit(this.db, entry);
  }

  /** The audit trail, oldest first, from `since` (a stored timestamp) on. */
  async auditTrail(since?: string): Promise<AuditRecord[]> {
    return readAudit(this.db, since);
  }

  // --- donations ---

  /**
   * Stores one donation; when the promise resolves, the row is committed (durably, per the
   * dialect's settings), usually together with the other donations that arrived at the same moment.
   */
  async recordDonation(charityId: number, d: NewDonation, { budget }: { budget?: DatabaseBudget } = {}): Promise<StoredDonation> {
    return this.tracked(budget, (deadline) => this.creates.insert(charityId, d, deadline));
  }

  /**
   * Stores one donation under an Idempotency-Key, the key and the donation committed together (a
   * crash leaves both or neither); or, if the key is remembered, says what it was used for.
   */
  async recordKeyedDonation(charityId: number, d: NewDonation, idempotency: IdempotencyKey, budget?: DatabaseBudget): Promise<KeyedOutcome> {
    return this.tracked(budget, (deadline) => this.creates.insertKeyed(charityId, d, idempotency, deadline));
  }

  async findDonation(id: number): Promise<StoredDonation | undefined> {
    return this.tracked(undefined, async () => {
      const row = await this.db.selectFrom('donations').selectAll().where('id', '=', id).executeTakeFirst();
      return row && toStoredDonation(row);
    });
  }

  /** Donation ids go on after `largest`: a restore gives out no id again that the database it replaced gave a charity. Whether they had to be moved on. */
  async donationIdsAfter(largest: number): Promise<boolean> {
    return idsAfter(this.db, this.dialect, 'donations', largest);
  }

  /** Forgets idempotency keys past their expiry, and commit tokens a day old; returns how many of each. */
  async purgeExpired(): Promise<{ idempotencyKeys: number; commitTokens: number }> {
    return this.tracked(undefined, async () => {
      const keys = await this.db.deleteFrom('idempotency_keys').where('expires_at', '<', nowIso()).executeTakeFirst();
      const dayAgo = formatMicros(nowMicros() - 86_400_000_000);
      const tokens = await this.db.deleteFrom('commit_tokens').where('committed_at', '<', dayAgo).executeTakeFirst();
      return { idempotencyKeys: Number(keys.numDeletedRows), commitTokens: Number(tokens.numDeletedRows) };
    });
  }

  /** purgeExpired now and every hour, as long as the process runs; each failure is a warning in `log`. */
  purgeHourly(log: { warn(fields: object, message: string): void }): void {
    const purge = () =>
      this.purgeExpired().catch((err: unknown) => log.warn({ err: loggable(err) }, 'purging expired idempotency keys and commit tokens failed'));
    void purge();
    setInterval(purge, 3600_000).unref();
  }

  /** Streams donations in id order, filtered by charity, by inclusive donation_date bounds and by donor. */
  async *exportDonations(filter: DonationFilter): AsyncIterable<ExportedDonation> {
    for await (const row of (await donationsWithCharity(this.db, this.dialect, filter)).orderBy('donations.id').stream(500)) {
      yield { ...toStoredDonation(row), charity: row.charity };
    }
  }
}

/** A create's writes in this process: stated by DonationWrites, batched and committed by GroupCommit. */
function localCreates(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], options: ConstructorParameters<typeof GroupCommit>[2], clock?: Clock): CreateWrites {
  const donationWrites = new DonationWrites(db, dialect, clock);
  const writes = new GroupCommit(db, donationWrites, { ...options, againWhole: donationWrites.againWhole });
  return {
    insert: (charityId, d, deadline) => writes.run(() => donationWrites.insertDonation(charityId, d), deadline),
    insertKeyed: (charityId, d, key, deadline) =>
      writes.run((retry) => donationWrites.insertKeyedDonation(charityId, d, key, retry), deadline).catch((err: unknown) => {
        throw keyTaken(err);
      }),
    writeFailure: () => writes.writeFailure(),
    observeWith: (observer) => writes.observeWith(observer),
  };
}
