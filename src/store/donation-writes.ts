// A create's writes: its donation's row and its Idempotency-Key's, as write programs
// (statements.ts) that group-commit.ts runs with the others of their batch, and on PostgreSQL how a
// batch of them shares round trips and commits in one statement. Store (store.ts) hands them over.
import { sql, type CompiledQuery, type Compilable, type Insertable, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { DatabaseLocation } from '../config.js';
import type { NewDonation, StoredDonation } from '../donations/donation.js';
import { formatMicros, monotonicClock, nowIso, nowMicros, type Clock } from '../time.js';
import type { CommitJournal } from './group-commit.js';
import { toDonationRow, toStoredDonation } from './rows.js';
import type { Database, DonationsTable } from './schema.js';
import { compiled, HotStatements, type Query, type Together, type Written, type WriteProgram } from './statements.js';

/** A create's Idempotency-Key: the key, what "the same body" is (the validated donation's fingerprint), and how long it is remembered. */
export interface IdempotencyKey {
  key: string;
  fingerprint: string;
  /** Older forms of the same fingerprint, that keys stored by earlier versions may hold: made only if a stored key differs. */
  formerFingerprints?: () => readonly string[];
  ttlMicros: number;
}

/** What recording a donation under an Idempotency-Key came to. */
export type KeyedOutcome =
  | { outcome: 'created'; donation: StoredDonation }
  | { outcome: 'replay'; donation: StoredDonation } // the key was used for this donation before: answer with it again
  | { outcome: 'mismatch' }; // the key was used for a different donation

/**
 * Another instance's request stored the same key between this create's look-up and its insert,
 * and did so again on the create's last try, on its own (GroupCommit): a 409.
 */
export class KeyTakenError extends Error {}

/**
 * The batch met a key already stored, and failed whole, storing nothing (keys are inserted without
 * `on conflict`). A first try takes its keys to be new, so this is how it meets a replay; tried
 * again, the keys are looked up first, so only a key another instance's request stored meanwhile is
 * met, and a create that still meets it on its own is KeyTakenError.
 */
export const keyTaken = (err: unknown): unknown => (metStoredKey(err) ? new KeyTakenError() : err);

/** The database's error for a key already stored: a unique violation on idempotency_keys, PostgreSQL's or SQLite's. */
function metStoredKey(err: unknown): boolean {
  const { code, table, message } = (err ?? {}) as { code?: unknown; table?: unknown; message?: unknown };
  if (code === '23505') return table === 'idempotency_keys';
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' && typeof message === 'string' && message.includes(' idempotency_keys.');
}

/** A create's write programs, for GroupCommit to run; and, as its CommitJournal, the claim of a PostgreSQL batch's commit token. */
export class DonationWrites implements CommitJournal {
  /** The statements every create runs, compiled once. */
  private readonly hot = new HotStatements();
  /** PostgreSQL: how a batch's creates share round trips (sharedRoundTrips); undefined on SQLite, so it also says which one this is. */
  private readonly together: ReturnType<DonationWrites['sharedRoundTrips']> | undefined;

  /** When a key looked up was last found stored (see insertKeyedDonation). */
  private keyFoundAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly db: Kysely<Database>,
    dialect: DatabaseLocation['dialect'],
    /** The clock KEYS_FOUND_MS is counted on, and on PostgreSQL the one the ids taken ahead go stale on (DonationIds). */
    private readonly clock: Clock = monotonicClock,
  ) {
    this.together = dialect === 'postgres' ? this.sharedRoundTrips(clock) : undefined;
  }

  /**
   * Whether a batch whose first try failed with `cause` is worth trying again whole (GroupCommit's
   * againWhole): when it met a key already stored, as a first try takes its keys to be new; the
   * retry looks its keys up first.
   */
  readonly againWhole = (cause: unknown): boolean => metStoredKey(cause);

  /**
   * Claims `token` (writes it unless it is there, marked with `claim`): true if it was there, written
   * by the batch's commit, so the batch committed; false if this claim wrote it, now or on an
   * earlier try whose answer was lost, and then the batch never can commit (see CommitJournal).
   */
  async committed(token: string, claim: string): Promise<boolean> {
    // The mark follows the time, so that the hourly purge (committed_at older than a day) still reads it as one.
    const mark = ` claimed ${claim}`;
    const row = { token, committed_at: `${nowIso()}${mark}` };
    const claimed = await this.db.insertInto('commit_tokens').values(row).onConflict((oc) => oc.column('token').doNothing()).returning('token').executeTakeFirst();
    if (claimed !== undefined) return false;
    const there = await this.db.selectFrom('commit_tokens').select('committed_at').where('token', '=', token).executeTakeFirst();
    if (there === undefined) throw new Error(`the commit token ${token} was there, and is gone`);
    return !there.committed_at.endsWith(mark);
  }

  /**
   * A create under an Idempotency-Key: a replay, a mismatch, or the donation and its key recorded
   * together. A first try (not `retry`) takes the key to be new and inserts the donation and its key
   * at once: on PostgreSQL in the statement that commits the batch, so that a batch of new keys is one
   * round trip; on SQLite without a look-up (a statement fewer: 2.2 µs of a keyed create's CPU,
   * docs/performance.md). A key already stored fails the batch whole, storing nothing, and the retry
   * looks it up first (GroupCommit). While keys are being found stored (one in the last
   * KEYS_FOUND_MS: replays coming in, as after an outage), first tries look up too, so that batches
   * do not fail one after another.
   */
  *insertKeyedDonation(charityId: number, d: NewDonation, { key, fingerprint, formerFingerprints, ttlMicros }: IdempotencyKey, retry: boolean): WriteProgram<KeyedOutcome> {
    const now = nowMicros();
    const keyRow = { charity_id: charityId, key, fingerprint, created_at: formatMicros(now), expires_at: formatMicros(now + ttlMicros) };
    if (!retry && this.clock() - this.keyFoundAt > KEYS_FOUND_MS) {
      return { outcome: 'created', donation: yield* this.insertDonation(charityId, d, keyRow) };
    }
    const [known] = (yield this.hot.statement(
      'key',
      [charityId, key],
      () => this.db.selectFrom('idempotency_keys').select(['fingerprint', 'donation_id', 'expires_at']).where('charity_id', '=', charityId).where('key', '=', key),
      this.together && { with: this.together.keyLookup },
    )) as { fingerprint: string; donation_id: number; expires_at: string }[];
    if (known) this.keyFoundAt = this.clock();
    if (known && known.expires_at >= formatMicros(now)) {
      if (known.fingerprint !== fingerprint && !formerFingerprints?.().includes(known.fingerprint)) return { outcome: 'mismatch' };
      const id = Number(known.donation_id);
      const [row] = (yield this.hot.statement('donation by id', [id], () => this.db.selectFrom('donations').selectAll().where('id', '=', id))) as Selectable<DonationsTable>[];
      return { outcome: 'replay', donation: toStoredDonation(row!) };
    }
    if (known) {
      // Expired: forgotten, and the key is used afresh. The row found, not whatever holds the key by now (another
      // instance may have forgotten it first and stored it afresh), so this is right whatever becomes of the
      // create (see Together in statements.ts).
      const expired = [charityId, key, known.expires_at] as const;
      yield this.hot.statement('key delete', expired, () =>
        this.db.deleteFrom('idempotency_keys').where('charity_id', '=', expired[0]).where('key', '=', expired[1]).where('expires_at', '=', expired[2]),
      );
    }
    return { outcome: 'created', donation: yield* this.insertDonation(charityId, d, keyRow) };
  }

  /**
   * The donation as a row of its own, and its Idempotency-Key's row if it has one. On PostgreSQL
   * both go into the statement that commits the batch (sharedRoundTrips); on SQLite the key follows
   * the donation, and a key already stored fails the insert, which rolls the batch back (keyTaken).
   */
  *insertDonation(charityId: number, d: NewDonation, key?: KeyRow): WriteProgram<StoredDonation> {
    const row = toDonationRow(charityId, d, nowIso());
    // On PostgreSQL never sent as it is: donationInsert.ownCommit folds the row into the batch's commit statement,
    // and gives its id. On SQLite the id is the row's rowid, as run() tells it (runOnSqlite): without RETURNING,
    // for which SQLite builds a table of the rows returned (2 to 4 µs of CPU a create, docs/performance.md).
    const [inserted] = yield this.hot.statement(
      'donation insert',
      Object.values(row),
      () => this.db.insertInto('donations').values(row),
      this.together && { with: this.together.donationInsert, data: { row, key } satisfies DonationData },
    );
    const donation = toStoredDonation(row, Number(this.together ? inserted!.id : (inserted as Written).lastInsertRowid));
    if (key && !this.together) {
      const keyRow = { ...key, donation_id: donation.id };
      yield this.hot.statement('key insert', Object.values(keyRow), () => this.db.insertInto('idempotency_keys').values(keyRow));
    }
    return donation;
  }

  /**
   * How a batch's creates share round trips on PostgreSQL (statements.ts): their keys looked up in
   * one query; then their donations' ids taken from the sequence (so that each create knows its own
   * for certain), and one statement that inserts the donations, their keys and the commit token,
   * which PostgreSQL commits by itself (ownCommit): no transaction. A key another instance's request
   * stored meanwhile fails that statement whole (see keyTaken). PostgreSQL's SQL, and only there:
   * SQLite runs each batch in one synchronous call, with no round trips to share.
   */
  private sharedRoundTrips(clock: Clock): Record<'keyLookup' | 'donationInsert', Together> {
    // The donations' ids, from the sequence in one round trip, taken ahead of need while creates come close together.
    const ids = new DonationIds(async (count, query) => {
      const rows = await query(compiled(this.hot.statement('donation ids', [count], () => this.compilable(sql`select nextval(pg_get_serial_sequence('donations', 'id')) as id from generate_series(1, ${count})`))));
      return rows.map((row) => Number(row.id));
    }, clock);
    return {
      keyLookup: {
        run: async (statements, query) => {
          const pairs = statements.map((s) => s.parameters as [number, string]);
          // Each column against its list (an index scan with both), not a list of pairs (an OR of one scan per pair,
          // slower to plan): the extra pairs this may find are not asked for, and left out below. Each list is one
          // array parameter, so the statement is the same for any number of keys (see commitStatement).
          const charities = [...new Set(pairs.map(([c]) => c))];
          const keys = pairs.map(([, k]) => k);
          const found = await query(
            compiled(
              this.hot.statement('key lookup, batch', [charities, keys], () =>
                this.compilable(sql`select charity_id, key, fingerprint, donation_id, expires_at from idempotency_keys where charity_id = any(${charities}) and key = any(${keys})`),
              ),
            ),
          );
          const byPair = new Map(found.map((r) => [pairOf(r.charity_id, r.key), r]));
          return pairs.map(([c, k]) => {
            const known = byPair.get(pairOf(c, k));
            return known ? [known] : [];
          });
        },
      },
      donationInsert: {
        ownCommit: async (statements, query, token) => {
          // The ids are taken before the commit, not returned by it: if its answer is lost and the token says it
          // committed, each create still knows its own. Under load they are already here (DonationIds).
          const taken = await ids.take(statements.length, query);
          const donations: (Insertable<DonationsTable> & { id: number })[] = [];
          const keys: Insertable<Database['idempotency_keys']>[] = [];
          statements.forEach((s, i) => {
            const { row, key } = s.data as DonationData;
            const id = taken[i]!;
            donations.push({ ...row, id });
            if (key) keys.push({ ...key, donation_id: id });
          });
          // In one order on every instance, so that two batches inserting the same keys wait for each other, never deadlock.
          keys.sort((a, b) => a.charity_id - b.charity_id || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
          return { rows: donations.map(({ id }) => [{ id }]), commit: this.commitStatement(commitToken(token), donations, keys) };
        },
      },
    };
  }

  /**
   * PostgreSQL: the statement that commits a batch. The commit token's row, the keys and the
   * donations, each table's rows from one JSON parameter read as the table's own row type
   * (json_populate_recordset), so the column types are the table's. The statement is the same
   * whatever the number of rows, so it is compiled once (HotStatements), and short for PostgreSQL
   * to parse and plan, where a VALUES list took a parameter per column per row, each built, frozen
   * and compiled by Kysely, every batch. Each table's rows share their keys (rows.ts makes them so).
   */
  private commitStatement(token: Insertable<Database['commit_tokens']>, donations: readonly object[], keys: readonly object[]): CompiledQuery {
    const tables = keys.length > 0 ? ([['idempotency_keys', keys], ['donations', donations]] as const) : ([['donations', donations]] as const);
    const parts = tables.map(([table, rows]) => ({ table, columns: Object.keys(rows[0]!), json: JSON.stringify(rows) }));
    const name = `commit: ${parts.map((p) => `${p.table} (${p.columns.join(' ')})`).join(', ')}`;
    return compiled(
      this.hot.statement(name, [token.token, token.committed_at, ...parts.map((p) => p.json)], () => {
        const inserts = parts.map(({ table, columns, json }) => {
          const list = sql.join(columns.map((c) => sql.ref(c)));
          return sql`insert into ${sql.table(table)} (${list}) select ${list} from json_populate_recordset(null::${sql.table(table)}, ${json}::json)`;
        });
        // Nothing reads these CTEs: PostgreSQL runs a data-modifying one all the same. The keys' rows name donations
        // the main statement inserts; their foreign key is checked at the statement's end, when both are in.
        const ctes = [sql`${sql.ref('commit')} as (insert into ${sql.table('commit_tokens')} (${sql.ref('token')}, ${sql.ref('committed_at')}) values (${token.token}, ${token.committed_at}))`];
        if (inserts.length > 1) ctes.push(sql`${sql.ref('keys')} as (${inserts[0]!})`);
        return this.compilable(sql`with ${sql.join(ctes)} ${inserts[inserts.length - 1]!}`);
      }),
    );
  }

  /** Raw SQL as HotStatements takes a query: compiled for this database. */
  private compilable(raw: RawBuilder<unknown>): Compilable {
    return { compile: () => raw.compile(this.db) };
  }
}

/** An Idempotency-Key's row, but for its donation's id. */
type KeyRow = Omit<Insertable<Database['idempotency_keys']>, 'donation_id'>;

/** What a donation's insert carries on PostgreSQL: its row, and its key's. */
interface DonationData {
  row: Insertable<DonationsTable>;
  key: KeyRow | undefined;
}

/** The row that marks a batch as committed (group-commit.ts). */
const commitToken = (token: string): Insertable<Database['commit_tokens']> => ({ token, committed_at: nowIso() });

/** A charity's idempotency key, as one string. */
const pairOf = (charityId: unknown, key: unknown): string => `${Number(charityId)}\n${String(key)}`;

/** For this long after a key looked up was found stored, keyed creates look their keys up on their first try too (both backends). */
export const KEYS_FOUND_MS = 1000;

/** How long ids taken ahead are kept unused: past it they are dropped, so id order stays within about this of recording order across instances. */
export const ID_FRESH_MS = 1000;
/** Batches that need ids within this of the last taking are "close together": ids for the next ones are taken too. */
export const ID_BUSY_MS = 100;
/** The most ids taken ahead at once. */
export const MAX_ID_BLOCK = 512;

/**
 * PostgreSQL: donation ids from the sequence, taken ahead of need while creates come close together,
 * so that a batch under load needs no round trip for them (13% more creates a second on the
 * benchmark's machine: see docs/performance.md). A batch that finds too few takes what it needs; if
 * the last taking was under ID_BUSY_MS ago, also twice as many as were used since, up to
 * MAX_ID_BLOCK. At a quiet moment a batch takes just its own; what is left over when a load stops is
 * dropped after ID_FRESH_MS, a gap in the numbering like those a sequence leaves anyway (a failed
 * insert, a restart). What is waiting is handed out in rising order; batches that take from the
 * sequence at the same moment may get their answers in either order (as with nextval before). So
 * id order follows recording order to within about ID_FRESH_MS, in a process and across processes
 * (instances, or the workers of WORKERS).
 */
export class DonationIds {
  /** Ids taken and not yet handed out, in rising order. */
  private ready: number[] = [];
  private takenAt = Number.NEGATIVE_INFINITY;
  private usedSinceTaking = 0;

  constructor(
    private readonly takeFromSequence: (count: number, query: Query) => Promise<number[]>,
    private readonly clock: Clock,
  ) {}

  /** `n` ids for a batch, running `query` (the batch's own connection) only when there are too few. */
  async take(n: number, query: Query): Promise<number[]> {
    const now = this.clock();
    if (now - this.takenAt > ID_FRESH_MS) this.ready = [];
    if (this.ready.length < n) {
      const ahead = now - this.takenAt < ID_BUSY_MS ? Math.min(MAX_ID_BLOCK, 2 * this.usedSinceTaking) : 0;
      // At least n of our own: batches running at once may hand out what is ready meanwhile.
      const taken = await this.takeFromSequence(Math.max(n, ahead), query);
      const at = this.clock();
      if (at - this.takenAt > ID_FRESH_MS) this.ready = []; // gone stale while the sequence answered
      this.takenAt = at;
      this.usedSinceTaking = 0;
      this.ready = this.ready.concat(taken).sort((a, b) => a - b);
    }
    this.usedSinceTaking += n;
    return this.ready.splice(0, n);
  }
}
