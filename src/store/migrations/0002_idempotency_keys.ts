import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Idempotency keys, one row per (charity, key). The unique primary key is what makes a key hold
 * across instances. As first made, a row was claimed before the donation was recorded
 * (donation_id null, locked until a lease ran out); 0005 stores a key with its donation instead.
 */
export function idempotencyKeys(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('charity_id', 'bigint', (c) => c.notNull().references('charities.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('donation_id', 'bigint', (c) => c.references('donations.id'))
        .addColumn('locked_until', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['charity_id', 'key'])
        .addCheckConstraint('idempotency_keys_state', sql`(donation_id is null) <> (locked_until is null)`)
        .execute();
      await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').column('expires_at').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('idempotency_keys').execute();
    },
  };
}
