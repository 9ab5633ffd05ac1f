import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';
import { identityColumn } from './columns.js';

/**
 * A claim's rows whose donation this database does not hold: a restore kept a claim the replaced
 * database had sent to HMRC, but some of its donations were recorded after the backup and are gone
 * with that database (or their ids now name other donations). Each row is kept as it went into the
 * schedule, with the id its donation had, so the claim's files can still be written in full, and a
 * donation sent again later that matches one is not claimed a second time (cli/giftaid.ts).
 */
export function claimRowsWithoutDonation(dialect: DatabaseLocation['dialect']): Migration {
  const { type: idType } = identityColumn(dialect);
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('giftaid_claim_rows_without_donation')
        .addColumn('claim_id', idType, (c) => c.notNull().references('giftaid_claims.id'))
        .addColumn('donation_id', idType, (c) => c.notNull()) // the id it had, in the database the claim was made in
        .addColumn('position', 'integer', (c) => c.notNull().check(sql`position >= 1`))
        .addColumn('first_name', 'text', (c) => c.notNull())
        .addColumn('last_name', 'text', (c) => c.notNull())
        .addColumn('house', 'text', (c) => c.notNull())
        .addColumn('postcode', 'text', (c) => c.notNull())
        .addColumn('donation_day', 'text', (c) => c.notNull())
        .addColumn('amount_minor', 'bigint', (c) => c.notNull().check(sql`amount_minor >= 1`))
        .addPrimaryKeyConstraint('giftaid_claim_rows_without_donation_pk', ['claim_id', 'position'])
        .execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('giftaid_claim_rows_without_donation').execute();
    },
  };
}
