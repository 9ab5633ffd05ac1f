import { sql, type Kysely, type Migration } from 'kysely';

/**
 * How many times a claim's status has moved (`giftaid mark`, `giftaid reopen`): which of two
 * ledgers of one database's line holds a claim's later status, where a restore keeps the replaced
 * database's claims (ClaimLedger.keepFrom). Before `reopen`, a status could only move forward, so
 * the order of statuses said it; a reopened claim goes back. A claim marked before this migration
 * moved once for each of its times: submitted, paid, rejected.
 */
export function claimMoves(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('giftaid_claims').addColumn('moves', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await sql`update giftaid_claims set moves = ${movesFromTimes(sql.ref('submitted_at'), sql.ref('paid_at'), sql.ref('rejected_at'))}`.execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('giftaid_claims').dropColumn('moves').execute();
    },
  };
}

const movesFromTimes = (...times: ReturnType<typeof sql.ref>[]) => sql.join(times.map((t) => sql`(case when ${t} is null then 0 else 1 end)`), sql` + `);
