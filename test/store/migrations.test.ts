// Migrations on a database that has data: 0005 keeps every idempotency key that has its donation
// (it still replays) and frees the keys a dead request left claimed without one; 0010 moves the
// day until which an erased donation keeps its Gift Aid data to the seven-year rule.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { validateDonation } from '../../src/donations/validate.js';
import { migrations } from '../../src/store/migrations/index.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';

/** The database as it stood at `version`, through Kysely alone. */
async function migratedTo(database: TestDatabase, version: string): Promise<Kysely<any>> {
  const location = database.location;
  const dialect =
    location.dialect === 'sqlite'
      ? new SqliteDialect({ database: new BetterSqlite3(location.path) })
      : new PostgresDialect({ pool: new pg.Pool({ connectionString: location.url, max: 1 }) });
  const db = new Kysely<any>({ dialect });
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => migrations(location.dialect) } }).migrateTo(version);
  if (error) throw error;
  return db;
}

for (const backend of BACKENDS) {
  describe(`migrations on a database with data [${backend.name}]`, () => {
    let database: TestDatabase;
    after(() => database?.drop());

    test('0005: a key with its donation still replays; a key claimed by a request that died is free again', async () => {
      database = await backend.createDatabase();
      const old = await migratedTo(database, '0004_commit_tokens');
      const now = '2026-11-23T12:00:00.000000Z';
      const later = '2099-01-01T00:00:00.000000Z';
      let charityId: number;
      try {
        ({ id: charityId } = await old
          .insertInto('charities')
          .values({ name: 'Old', email: 'old@example.org', username: 'old-charity', password_hash: 'x', active: 1, created_at: now, updated_at: now })
          .returning('id')
          .executeTakeFirstOrThrow());
        // A row as 0004's table had it: its columns named, so that a field added since does not reach back.
        const { id: donationId } = await old
          .insertInto('donations')
          .values({
            charity_id: charityId,
            donor_email: 'kept@example.org',
            gift_aid: 1,
            amount: '25.00',
            amount_minor: 2500,
            donation_type: 'one-time',
            zakat_donation: 1,
            donation_date: now,
            recorded_at: now,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        await old
          .insertInto('idempotency_keys')
          .values([
            { charity_id: charityId, key: 'done', fingerprint: 'fp-done', donation_id: donationId, locked_until: null, created_at: now, expires_at: later },
            { charity_id: charityId, key: 'died', fingerprint: 'fp-died', donation_id: null, locked_until: later, created_at: now, expires_at: later },
          ])
          .execute();
      } finally {
        await old.destroy();
      }

      const store = await openStore(database.location); // applies 0005
      try {
        const d = validateDonation(exampleDonation());
        if (!d.ok) assert.fail(JSON.stringify(d.errors));
        const replay = await store.recordKeyedDonation(charityId, d.donation, { key: 'done', fingerprint: 'fp-done', ttlMicros: 1e9 });
        assert.equal(replay.outcome, 'replay');
        assert.equal(replay.outcome === 'replay' && replay.donation.donor_email, 'kept@example.org');
        const freed = await store.recordKeyedDonation(charityId, d.donation, { key: 'died', fingerprint: 'fp-other', ttlMicros: 1e9 });
        assert.equal(freed.outcome, 'created');
        const db = (store as unknown as { db: Kysely<any> }).db;
        const columns = await sql<{ n: number }>`select count(*) as n from idempotency_keys where donation_id is null`.execute(db);
        assert.equal(Number(columns.rows[0]!.n), 0);
      } finally {
        await store.close();
      }
    });

    test('0010: Gift Aid data kept after an erasure is kept seven years from the donation\'s day, no longer until 5 April six tax years on', async () => {
      const database = await backend.createDatabase();
      try {
        const old = await migratedTo(database, '0009_donations_by_charity');
        const now = '2026-11-23T12:00:00.000000Z';
        const ids: Record<string, number> = {};
        try {
          const { id: charityId } = await old
            .insertInto('charities')
            .values({ name: 'Old', email: 'old@example.org', username: 'old-charity', password_hash: 'x', active: 1, created_at: now, updated_at: now })
            .returning('id')
            .executeTakeFirstOrThrow();
          // Rows as 0009's table had them, each kept until the old rule's day, and one fully erased.
          const rows: Array<[string, string, string | null]> = [
            ['dated', '2026-01-02T00:00:00.000000Z', '2032-04-05'],
            ['lastOfTaxYear', '2025-04-05T00:00:00.000000Z', '2031-04-05'],
            ['summerNight', '2025-06-30T23:30:00.000001Z', '2032-04-05'], // recorded without a date at 00:30 BST on 1 July
            ['erased', '2026-01-02T00:00:00.000000Z', null],
          ];
          for (const [name, day, until] of rows) {
            const { id } = await old
              .insertInto('donations')
              .values({
                charity_id: charityId,
                donor_email: 'erased@erased.invalid',
                gift_aid: 1,
                amount: '25.00',
                amount_minor: 2500,
                donation_type: 'one-time',
                zakat_donation: 0,
                donation_date: day,
                recorded_at: now,
                erased_at: now,
                erase_after: until,
              })
              .returning('id')
              .executeTakeFirstOrThrow();
            ids[name] = Number(id);
          }
        } finally {
          await old.destroy();
        }

        const store = await openStore(database.location); // applies 0010
        try {
          const db = (store as unknown as { db: Kysely<any> }).db;
          const after = await db.selectFrom('donations').select(['id', 'erase_after']).orderBy('id').execute();
          assert.deepEqual(
            after.map((r) => [Number(r.id), r.erase_after]),
            [
              [ids.dated, '2033-01-02'],
              [ids.lastOfTaxYear, '2032-04-05'],
              [ids.summerNight, '2032-07-01'],
              [ids.erased, null],
            ],
          );
        } finally {
          await store.close();
        }
      } finally {
        await database.drop();
      }
    });
  });
}
