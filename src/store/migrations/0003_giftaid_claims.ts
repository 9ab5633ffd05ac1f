import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';
import { identityColumn } from './columns.js';

/**
 * The Gift Aid claim ledger. A claim and, for each donation in it, the row exactly as it went into
 * HMRC's schedule, so its files can be written again unchanged. A donation is in at most one live
 * claim: while its claim is not rejected, its row has live = 1, and a unique index over the live
 * rows' donation ids makes the database refuse a second one, whichever process or instance tries.
 * Rejecting a claim sets live to null on its rows, which frees their donations and keeps the record.
 */
export function giftaidClaims(dialect: DatabaseLocation['dialect']): Migration {
  const { type: idType, define: identity } = identityColumn(dialect);

  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('giftaid_claims')
        .addColumn('id', idType, identity)
        .addColumn('charity_id', idType, (c) => c.notNull().references('charities.id'))
        .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('prepared', 'submitted', 'paid', 'rejected')`))
        .addColumn('up_to', 'text', (c) => c.notNull())
        .addColumn('claim_date', 'text', (c) => c.notNull())
        .addColumn('donation_count', 'integer', (c) => c.notNull().check(sql`donation_count >= 1`))
        .addColumn('total_minor', 'bigint', (c) => c.notNull().check(sql`total_minor >= 1`))
        .addColumn('prepared_at', 'text', (c) => c.notNull())
        .addColumn('submitted_at', 'text')
        .addColumn('paid_at', 'text')
        .addColumn('rejected_at', 'text')
        .execute();
      await db.schema.createIndex('giftaid_claims_charity').on('giftaid_claims').column('charity_id').execute();

      await db.schema
        .createTable('giftaid_claim_donations')
        .addColumn('claim_id', idType, (c) => c.notNull().references('giftaid_claims.id'))
        .addColumn('donation_id', idType, (c) => c.notNull().references('donations.id'))
        .addColumn('position', 'integer', (c) => c.notNull().check(sql`position >= 1`))
        .addColumn('live', 'integer', (c) => c.check(sql`live = 1`))
        .addColumn('first_name', 'text', (c) => c.notNull())
        .addColumn('last_name', 'text', (c) => c.notNull())
        .addColumn('house', 'text', (c) => c.notNull())
        .addColumn('postcode', 'text', (c) => c.notNull())
        .addColumn('donation_day', 'text', (c) => c.notNull())
        .addColumn('amount_minor', 'bigint', (c) => c.notNull().check(sql`amount_minor >= 1`))
        .addPrimaryKeyConstraint('giftaid_claim_donations_pk', ['claim_id', 'donation_id'])
        .addUniqueConstraint('giftaid_claim_donations_position', ['claim_id', 'position'])
        .execute();
      await db.schema
        .createIndex('giftaid_claim_donations_live')
        .on('giftaid_claim_donations')
        .column('donation_id')
        .unique()
        .where(sql.ref('live'), '=', 1)
        .execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('giftaid_claim_donations').execute();
      await db.schema.dropTable('giftaid_claims').execute();
    },
  };
}
