// An id column's counter, moved on: what a restore does so that no id another database of this line
// gave out (a claim's number on its files at HMRC, a donation's id a charity stored) is given again.
import { sql, type Kysely } from 'kysely';
import type { DatabaseLocation } from '../config.js';
import type { Database } from './schema.js';

/** The tables whose rows a restore takes in from another database with their ids. */
type KeptIdTable = 'giftaid_claims' | 'donations' | 'charities';

/**
 * The next id of `table` is after `largest` at least: moved on if it would come before, never back
 * (a PostgreSQL sequence may be ahead of every id stored: DonationIds takes ids ahead). Whether it moved.
 */
export async function idsAfter(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], table: KeptIdTable, largest: number): Promise<boolean> {
  if (!(largest > 0)) return false;
  if (dialect === 'postgres') {
    const { rows } = await sql<{ sequence: string; last: string | null; top: string | null }>`
      select q.sequence, pg_sequence_last_value(q.sequence::regclass) as last, (select max(id) from ${sql.table(table)}) as top
      from (select pg_get_serial_sequence(${table}, 'id') as sequence) q`.execute(db);
    const { sequence, last, top } = rows[0]!;
    // Past the ids stored too: a claim a restore kept is stored with its own id (OVERRIDING SYSTEM VALUE), which moves
    // no sequence. Until a review of 2026-11-30 the next claim was given a kept claim's id and refused, taken for a race
    // and tried again by giftaid claim, which gave up after 10 ("another claim took some of these donations").
    const after = Math.max(largest, Number(top ?? 0));
    if (after <= Number(last ?? 0)) return false;
    await sql`select setval(${sequence}::regclass, ${after})`.execute(db);
    return true;
  }
  // SQLite's AUTOINCREMENT keeps its counter in sqlite_sequence, which has no row for a table until its first id.
  const moved = await sql`update sqlite_sequence set seq = ${largest} where name = ${table} and seq < ${largest}`.execute(db);
  if (Number(moved.numAffectedRows ?? 0n) > 0) return true;
  const known = await sql<{ n: number }>`select count(*) as n from sqlite_sequence where name = ${table}`.execute(db);
  if (Number(known.rows[0]?.n ?? 0) > 0) return false;
  await sql`insert into sqlite_sequence (name, seq) values (${table}, ${largest})`.execute(db);
  return true;
}

/** Inserts a row with the id it brings from another database: PostgreSQL's ids are GENERATED ALWAYS, and take one only when the statement says so. */
export async function insertWithId(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], table: 'giftaid_claims' | 'charities', values: Record<string, unknown>): Promise<void> {
  const columns = sql.join(Object.keys(values).map((k) => sql.ref(k)));
  await sql`insert into ${sql.table(table)} (${columns}) ${dialect === 'postgres' ? sql`overriding system value` : sql``} values (${sql.join(Object.values(values))})`.execute(db);
}
