// An id column's counter, moved on: what a restore does so that no id another database of this line
// gave out (a claim's number on its files at HMRC, a donation's id a charity stored) is given again.
import { sql, type Kysely } from 'kysely';
import type { DatabaseLocation } from '../config.js';
import type { Database } from './schema.js';

/** The next id of `table` is after `largest` at least (and after every id the table holds). */
export async function idsAfter(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], table: 'giftaid_claims' | 'donations', largest: number): Promise<void> {
  if (!(largest > 0)) return;
  if (dialect === 'postgres') {
    await sql`select setval(pg_get_serial_sequence(${table}, 'id'), greatest(${largest}, (select coalesce(max(id), 0) from ${sql.table(table)})))`.execute(db);
    return;
  }
  // SQLite's AUTOINCREMENT keeps its counter in sqlite_sequence, which has no row for a table until its first id.
  const moved = await sql`update sqlite_sequence set seq = ${largest} where name = ${table} and seq < ${largest}`.execute(db);
  const known = await sql<{ n: number }>`select count(*) as n from sqlite_sequence where name = ${table}`.execute(db);
  if (Number(moved.numAffectedRows ?? 0n) === 0 && Number(known.rows[0]?.n ?? 0) === 0) await sql`insert into sqlite_sequence (name, seq) values (${table}, ${largest})`.execute(db);
}
