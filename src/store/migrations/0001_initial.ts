import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';
import { identityColumn } from './columns.js';

type Dialect = DatabaseLocation['dialect'];

/**
 * The first schema, the same on both backends but for identity columns. Timestamps are fixed-width
 * ISO 8601 text (microseconds survive on both; pg's Date would cut them to milliseconds), flags are
 * 0/1 integers, and amounts are kept twice: the text as sent, and exact integer pence.
 */
export function initial(dialect: Dialect): Migration {
  const { type: idType, define: identity } = identityColumn(dialect);

  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('charities')
        .addColumn('id', idType, identity)
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('username', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1).check(sql`active in (0, 1)`))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('donations')
        .addColumn('id', idType, identity)
        .addColumn('charity_id', idType, (c) => c.notNull().references('charities.id'))
        .addColumn('donor_first_name', 'text')
        .addColumn('donor_last_name', 'text')
        .addColumn('donor_email', 'text', (c) => c.notNull())
        .addColumn('donor_phone', 'text')
        .addColumn('donor_address', 'text')
        .addColumn('donor_city', 'text')
        .addColumn('donor_postcode', 'text')
        .addColumn('donor_ip', 'text')
        .addColumn('gift_aid', 'integer', (c) => c.notNull().check(sql`gift_aid in (0, 1)`))
        .addColumn('amount', 'text', (c) => c.notNull())
        .addColumn('amount_minor', 'bigint', (c) => c.notNull().check(sql`amount_minor >= 1`))
        .addColumn('payment_method', 'text')
        .addColumn('payment_confirmation_number', 'text')
        .addColumn('donation_type', 'text', (c) =>
          c.notNull().check(sql`donation_type in ('one-time', 'recurring', 'renewal')`),
        )
        .addColumn('donation_date', 'text', (c) => c.notNull())
        .addColumn('zakat_donation', 'integer', (c) => c.notNull().check(sql`zakat_donation in (0, 1)`))
        .addColumn('recorded_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema.createIndex('donations_charity_date').on('donations').columns(['charity_id', 'donation_date']).execute();
      await db.schema.createIndex('donations_date').on('donations').column('donation_date').execute();
    },

    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('donations').execute();
      await db.schema.dropTable('charities').execute();
    },
  };
}
