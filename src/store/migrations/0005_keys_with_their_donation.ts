import { sql, type Kysely, type Migration } from 'kysely';

/**
 * An idempotency key is now stored in the same transaction as its donation, so a key always has
 * one: donation_id is required, and the lease that guarded an unfinished claim (locked_until)
 * goes. The table is rebuilt, as SQLite cannot drop a column a CHECK names; keys still claimed
 * without a donation (their requests died) are dropped, which frees them.
 */
export function keysWithTheirDonation(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      // PostgreSQL runs each migration in a transaction already; SQLite's migrations need their own,
      // so that a crash half-way cannot leave the table renamed.
      if (!db.isTransaction) return db.transaction().execute((trx) => rebuild(trx));
      return rebuild(db);
    },
    async down(): Promise<void> {
      throw new Error('0005_keys_with_their_donation cannot be undone: the leases it dropped are gone.');
    },
  };
}

async function rebuild(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').renameTo('idempotency_keys_0002').execute();
  await db.schema.dropIndex('idempotency_keys_expires').execute();
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('charity_id', 'bigint', (c) => c.notNull().references('charities.id'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('donation_id', 'bigint', (c) => c.notNull().references('donations.id'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_charity_key', ['charity_id', 'key'])
    .execute();
  await sql`insert into idempotency_keys (charity_id, key, fingerprint, donation_id, created_at, expires_at)
    select charity_id, key, fingerprint, donation_id, created_at, expires_at from idempotency_keys_0002 where donation_id is not null`.execute(db);
  await db.schema.dropTable('idempotency_keys_0002').execute();
  await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').column('expires_at').execute();
}
