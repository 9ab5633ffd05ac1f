// Migrations on a database that has data: 0005 keeps every idempotency key that has its donation
// (it still replays) and frees the keys a dead request left claimed without one; 0010 moves the
// day until which an erased donation keeps its Gift Aid data to the seven-year rule; 0013 gives
// the donations a donor's erasure kept before 0012 their donor's reference, read from the trail;
// 0016 reads the house an erasure kept again, and brings forward a far-future-dated donation's day.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Kysely, sql } from 'kysely';
import pg from 'pg';
import { validateDonation } from '../../src/donations/validate.js';
import { donorReference } from '../../src/store/donation-query.js';
import { migrations } from '../../src/store/migrations/index.js';
import { openServerStore, openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { BACKENDS, migratedTo, rawSql, type TestDatabase } from '../support/backends.js';


/** A charity and the donations a donor's erasure left, as an old schema's tables hold them: each row's extra columns over an erased Gift Aid donation recorded `now`. */
async function erasedDonations(old: Kysely<any>, now: string, rows: Record<string, Record<string, unknown>>): Promise<Record<string, number>> {
  const { id: charityId } = await old
    .insertInto('charities')
    .values({ name: 'Old', email: 'old@example.org', username: 'old-charity', password_hash: 'x', active: 1, created_at: now, updated_at: now })
    .returning('id')
    .executeTakeFirstOrThrow();
  const ids: Record<string, number> = {};
  for (const [name, columns] of Object.entries(rows)) {
    const erased = { charity_id: charityId, donor_email: 'erased@erased.invalid', gift_aid: 1, amount: '25.00', amount_minor: 2500, donation_type: 'one-time', zakat_donation: 0, recorded_at: now, erased_at: now };
    ids[name] = Number((await old.insertInto('donations').values({ ...erased, ...columns }).returning('id').executeTakeFirstOrThrow()).id);
  }
  return ids;
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
        let ids: Record<string, number>;
        try {
          // Rows as 0009's table had them, each kept until the old rule's day, and one fully erased.
          ids = await erasedDonations(old, '2026-11-23T12:00:00.000000Z', {
            dated: { donation_date: '2026-01-02T00:00:00.000000Z', erase_after: '2032-04-05' },
            lastOfTaxYear: { donation_date: '2025-04-05T00:00:00.000000Z', erase_after: '2031-04-05' },
            summerNight: { donation_date: '2025-06-30T23:30:00.000001Z', erase_after: '2032-04-05' }, // recorded without a date at 00:30 BST on 1 July
            erased: { donation_date: '2026-01-02T00:00:00.000000Z', erase_after: null },
          });
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

    test("0013: donations a donor's erasure kept for Gift Aid before 0012 get that donor's reference from the audit trail, where the trail leaves no doubt", async () => {
      const database = await backend.createDatabase();
      try {
        const old = await migratedTo(database, '0011_audit_log_not_truncated');
        const ids: Record<string, number> = {};
        try {
          const now = '2026-11-20T09:00:00.000000Z';
          const { id: charityId } = await old
            .insertInto('charities')
            .values({ name: 'Old', email: 'old@example.org', username: 'old-charity', password_hash: 'x', active: 1, created_at: now, updated_at: now })
            .returning('id')
            .executeTakeFirstOrThrow();
          const donation = async (name: string, erasedAt: string | null, keptUntil: string | null, email = 'erased@erased.invalid') => {
            const { id } = await old
              .insertInto('donations')
              .values({ charity_id: charityId, donor_email: email, gift_aid: 1, amount: '25.00', amount_minor: 2500, donation_type: 'one-time', zakat_donation: 0, donation_date: '2026-01-02T00:00:00.000000Z', recorded_at: now, erased_at: erasedAt, erase_after: keptUntil })
              .returning('id')
              .executeTakeFirstOrThrow();
            ids[name] = Number(id);
          };
          const entry = (at: string, action: string, target: string, summary: object) =>
            old.insertInto('audit_log').values({ at, action, target, os_user: 'op', host: 'h', summary: JSON.stringify(summary) }).execute();
          // As 0011's code erased: every row of one erasure given the time its transaction took, then its entry.
          await donation('annKept1', '2026-11-21T10:00:00.000100Z', '2033-01-02');
          await donation('annKept2', '2026-11-21T10:00:00.000100Z', '2033-01-02');
          await donation('annGone', '2026-11-21T10:00:00.000100Z', null);
          await entry('2026-11-21T10:00:00.004000Z', 'donor erase', donorReference('ann@example.org'), { charity: null, donations: 3, kept_for_gift_aid: 2 });
          // Retention keeping Gift Aid details of a donation nobody asked about: no donor to name.
          await donation('retained', '2026-11-21T11:00:00.000100Z', '2033-01-02');
          await entry('2026-11-21T11:00:00.002000Z', 'retention apply', 'before 2026-11-21', { retention_years: 6, donations: 1 });
          await donation('bobKept', '2026-11-21T12:00:00.000100Z', '2033-01-02');
          await entry('2026-11-21T12:00:00.003000Z', 'donor erase', donorReference('bob@example.org'), { charity: null, donations: 1, kept_for_gift_aid: 1 });
          // Two erasures at once on PostgreSQL: Cy's rows took their time before Di's, but Cy's entry came after Di's
          // rows, so Di's window holds two times and Cy's none: both left alone, neither given the other's reference.
          await donation('cyKept', '2026-11-21T13:00:00.000100Z', '2033-01-02');
          await donation('diKept', '2026-11-21T13:00:00.000200Z', '2033-01-02');
          await entry('2026-11-21T13:00:00.003000Z', 'donor erase', donorReference('cy@example.org'), { charity: null, donations: 1, kept_for_gift_aid: 1 });
          await entry('2026-11-21T13:00:00.004000Z', 'donor erase', donorReference('di@example.org'), { charity: null, donations: 1, kept_for_gift_aid: 1 });
          await donation('untouched', null, null, 'eve@example.org');
        } finally {
          await old.destroy();
        }

        const store = await openStore(database.location); // applies 0012 and 0013
        try {
          const db = (store as unknown as { db: Kysely<any> }).db;
          const rows = await db.selectFrom('donations').select(['id', 'erased_donor']).execute();
          const reference = new Map(rows.map((r) => [Number(r.id), r.erased_donor]));
          assert.deepEqual(
            Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, reference.get(id)])),
            { annKept1: donorReference('ann@example.org'), annKept2: donorReference('ann@example.org'), annGone: null, retained: null, bobKept: donorReference('bob@example.org'), cyKept: null, diKept: null, untouched: null },
          );
          // And Ann's later access request finds what is still kept of hers.
          const found: number[] = [];
          for await (const d of store.exportDonations({ donorEmail: 'ANN@example.org' })) found.push(d.id);
          assert.deepEqual(found.sort((a, b) => a - b), [ids.annKept1, ids.annKept2]);
        } finally {
          await store.close();
        }
      } finally {
        await database.drop();
      }
    });

    test("0016: what a donor's erasure kept is as today's rules keep it: the house read again, and a year typed far ahead counted from a year after its recording", async () => {
      const database = await backend.createDatabase();
      try {
        const old = await migratedTo(database, '0015_audit_log_not_replaced');
        let ids: Record<string, number>;
        try {
          // Kept by 0015's rules: the whole first line of an address without commas, and 31-12-9999's day.
          const kept = (donation_date: string, donor_address: string | null, erase_after: string) => ({ donation_date, donor_address, donor_first_name: 'Ann', erase_after });
          ids = await erasedDonations(old, '2026-11-23T12:00:00.000000Z', {
            runOn: kept('2026-01-02T00:00:00.000000Z', 'Hillview Farm Long Road Ambridge', '2033-01-02'),
            flat: kept('2026-01-02T00:00:00.000000Z', 'Flat 3, 12', '2033-01-02'),
            // Left as they are: read again as an address, they lost their building or their name (a review of the first version).
            flatAndBuilding: kept('2026-01-02T00:00:00.000000Z', 'Flat 3, Ivy Court 5 Elm Road', '2033-01-02'),
            titled: kept('2026-01-02T00:00:00.000000Z', 'Lord Nelson House', '2033-01-02'),
            farAhead: kept('9999-12-31T00:00:00.000000Z', '12', '9999-12-31'),
            noAddress: kept('2026-01-02T00:00:00.000000Z', null, '2033-01-02'),
          });
        } finally {
          await old.destroy();
        }
        const store = await openStore(database.location); // applies 0016
        try {
          const db = (store as unknown as { db: Kysely<any> }).db;
          const after = await db.selectFrom('donations').select(['id', 'donor_address', 'erase_after']).orderBy('id').execute();
          assert.deepEqual(
            after.map((r) => [Number(r.id), r.donor_address, r.erase_after]),
            [
              [ids.runOn, 'Hillview Farm', '2033-01-02'],
              [ids.flat, 'Flat 3, 12', '2033-01-02'],
              [ids.flatAndBuilding, 'Flat 3, Ivy Court 5 Elm Road', '2033-01-02'],
              [ids.titled, 'Lord Nelson House', '2033-01-02'],
              [ids.farAhead, '12', '2034-11-23'], // seven years from 2027-11-23, a year after it was recorded
              [ids.noAddress, null, '2033-01-02'],
            ],
          );
        } finally {
          await store.close();
        }
      } finally {
        await database.drop();
      }
    });

    test('0019: each claim has moved once for each of its times (submitted, paid, rejected), so a restore still tells which ledger is later', async () => {
      const database = await backend.createDatabase();
      try {
        const old = await migratedTo(database, '0018_old_password_kept');
        try {
          const now = '2026-11-23T12:00:00.000000Z';
          const { id: charityId } = await old
            .insertInto('charities')
            .values({ name: 'Old', email: 'old@example.org', username: 'old-charity', password_hash: 'x', active: 1, created_at: now, updated_at: now })
            .returning('id')
            .executeTakeFirstOrThrow();
          const claim = (status: string, times: Record<string, string>) =>
            ({ charity_id: charityId, status, up_to: '2026-11-23', claim_date: '2026-11-23', donation_count: 1, total_minor: 2500, prepared_at: now, ...times });
          await old
            .insertInto('giftaid_claims')
            .values([
              claim('prepared', {}),
              claim('submitted', { submitted_at: now }),
              claim('paid', { submitted_at: now, paid_at: now }),
              claim('rejected', { rejected_at: now }),
              claim('rejected', { submitted_at: now, rejected_at: now }),
            ])
            .execute();
        } finally {
          await old.destroy();
        }
        const store = await openStore(database.location); // applies 0019
        try {
          const db = (store as unknown as { db: Kysely<any> }).db;
          const after = await db.selectFrom('giftaid_claims').select(['status', 'moves']).orderBy('id').execute();
          assert.deepEqual(after.map((r) => [r.status, Number(r.moves)]), [['prepared', 0], ['submitted', 1], ['paid', 2], ['rejected', 1], ['rejected', 2]]);
        } finally {
          await store.close();
        }
      } finally {
        await database.drop();
      }
    });

    test('a migration taken back (0018_previous_password, on main from 0919866 to 2cb1e85) is undone, and the database brought up to date; it was refused as made by "a newer Almoner", exit 2, with no way forward', async () => {
      const database = await backend.createDatabase();
      try {
        const old = await migratedTo(database, '0017_claim_rows_donor');
        try {
          // What 0018_previous_password did, and its row in Kysely's bookkeeping.
          await old.schema.alterTable('charities').addColumn('previous_password_hash', 'text').execute();
          await old.schema.alterTable('charities').addColumn('previous_until', 'text').execute();
          await old.insertInto('kysely_migration').values({ name: '0018_previous_password', timestamp: '2026-11-29T21:10:00.000Z' }).execute();
        } finally {
          await old.destroy();
        }
        const store = await openStore(database.location);
        try {
          const db = (store as unknown as { db: Kysely<any> }).db;
          const applied = (await db.selectFrom('kysely_migration').select('name').orderBy('name').execute()).map((r) => r.name);
          assert.deepEqual(applied, Object.keys(migrations(backend.name === 'sqlite' ? 'sqlite' : 'postgres')));
          const columns = (await db.introspection.getTables()).find((t) => t.name === 'charities')!.columns.map((c) => c.name);
          assert.ok(columns.includes('old_password_hash') && columns.includes('old_password_until'), columns.join(', '));
          assert.ok(!columns.includes('previous_password_hash') && !columns.includes('previous_until'), columns.join(', '));
        } finally {
          await store.close();
        }
        await (await openStore(database.location)).close(); // and opened again, as it now is
      } finally {
        await database.drop();
      }
    });
  });
}

for (const backend of BACKENDS.filter((b) => b.name === 'postgres')) {
  test(`a schema named as the user, made after Almoner's tables were in public ("$user" comes first on PostgreSQL's default search_path): Almoner goes on in public, and makes nothing in it [${backend.name}]`, async () => {
    // Taking the search_path's first schema for Almoner's, a fix tried on 2026-11-29 migrated a new, empty Almoner into it, and the commands found no Almoner database.
    const database = await backend.createDatabase();
    try {
      const first = await openStore(database.location); // Almoner's tables, in public
      await first.close();
      const other = new pg.Client({ connectionString: database.url });
      await other.connect();
      const { rows } = await other.query<{ user: string }>('select current_user as user');
      await other.query(`create schema "${rows[0]!.user}"`);
      const again = await openStore(database.location, { mustExist: true });
      await again.close();
      const made = await other.query<{ n: number }>('select count(*)::int as n from pg_tables where schemaname = $1', [rows[0]!.user]);
      assert.equal(made.rows[0]!.n, 0, 'nothing made in the schema named as the user');
      await other.end();
    } finally {
      await database.drop();
    }
  });

  test(`a database user who may not read Almoner's tables: told so, and nothing changed (it said Kysely's "Database migration  failed: permission denied for table kysely_migration_lock": an operator's review) [${backend.name}]`, { skip: backend.name !== 'postgres' && 'a PostgreSQL user\'s privileges' }, async () => {
    const database = await backend.createDatabase();
    const role = `almoner_test_nobody_${process.pid}`;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await (await openStore(database.location)).close(); // Almoner's tables, its owner's
      await admin.query(`create role ${role} login`);
      const url = new URL(database.url);
      url.username = role;
      url.password = '';
      await assert.rejects(openStore({ dialect: 'postgres', url: url.toString(), poolMax: 1 }), /this database user may not read Almoner's tables \(permission denied for table kysely_migration\): connect as the user that owns them/);
    } finally {
      await admin.end();
      await database.drop();
      await rawSql(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
    }
  });

  test(`a server's database user without a privilege the server needs (here the donations' sequence, the usual slip): refused, exit 2's kind, with the grants that put it right; a command's reads go on [${backend.name}]`, { skip: backend.name !== 'postgres' && 'a PostgreSQL user\'s privileges' }, async () => {
    // Until 2026-11-30 the server started, said it was ready, and answered every create 500 (an operator's review).
    const database = await backend.createDatabase();
    const role = `almoner_test_reader_${process.pid}`;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await (await openStore(database.location)).close(); // Almoner's tables, its owner's
      await admin.query(`create role ${role} login`);
      await admin.query(`grant select, insert, update, delete on all tables in schema public to ${role}`);
      const url = new URL(database.url);
      url.username = role;
      const location = { dialect: 'postgres' as const, url: url.toString(), poolMax: 1 };
      await (await openStore(location)).close(); // a command that reads
      let grants = '';
      await assert.rejects(openServerStore(location), (err: Error) => {
        assert.equal(err.constructor.name, 'ConfigError');
        assert.match(err.message, /this database user may not do what the server does with Almoner's tables: as their owner, grant usage on sequence public\.donations_id_seq to almoner_test_reader_\d+; or connect as the user that owns them; nothing was changed/);
        grants = /as their owner, (.*); or connect/.exec(err.message)![1]!;
        return true;
      });
      for (const grant of grants.split('; ')) await admin.query(grant);
      await (await openServerStore(location)).close(); // the grants it named are enough
      await admin.query(`revoke delete on commit_tokens, idempotency_keys from ${role}`);
      await assert.rejects(openServerStore(location), /as their owner, grant delete on idempotency_keys to almoner_test_reader_\d+; grant delete on commit_tokens to almoner_test_reader_\d+; or connect/);
      await admin.query(`grant delete on commit_tokens, idempotency_keys to ${role}`);
      // What works is not refused (a review of the first version refused all three): the sequence's UPDATE, which nextval
      // takes as well as USAGE; a select granted on the columns alone; PostgreSQL's own roles for an application's data.
      await admin.query(`revoke usage on sequence donations_id_seq from ${role}`);
      await admin.query(`grant update on sequence donations_id_seq to ${role}`);
      await admin.query(`revoke select on charities from ${role}`);
      const { rows: columns } = await admin.query<{ name: string }>(`select column_name as name from information_schema.columns where table_name = 'charities'`);
      await admin.query(`grant select (${columns.map((c) => c.name).join(', ')}) on charities to ${role}`);
      await (await openServerStore(location)).close();
      await admin.query(`drop owned by ${role}`);
      await admin.query(`grant pg_read_all_data, pg_write_all_data to ${role}`);
      await (await openServerStore(location)).close();
    } finally {
      await admin.query(`drop owned by ${role}`).catch(() => {});
      await admin.end();
      await database.drop();
      await rawSql(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
    }
  });

  test(`a database user who may use Almoner's tables but not alter them, with a migration to run (an upgrade): told so, exit 2's kind, nothing changed (the database's own "must be owner of table" came through, exit 1) [${backend.name}]`, { skip: backend.name !== 'postgres' && 'a PostgreSQL user\'s privileges' }, async () => {
    const database = await backend.createDatabase();
    const role = `almoner_test_user_${process.pid}`;
    const db = await migratedTo(database, '0017_claim_rows_donor'); // as the owner: one migration behind
    try {
      await sql.raw(`create role ${role} login`).execute(db);
      await sql.raw(`grant all privileges on all tables in schema public to ${role}`).execute(db);
      await sql.raw(`grant all privileges on all sequences in schema public to ${role}`).execute(db);
      const url = new URL(database.url);
      url.username = role;
      await assert.rejects(openStore({ dialect: 'postgres', url: url.toString(), poolMax: 1 }), (err: Error) => {
        assert.equal(err.constructor.name, 'ConfigError');
        assert.match(err.message, /this database user may not bring Almoner's tables up to date \(migration 0018_old_password_kept\): must be owner of table charities\. Run bin\/almoner once as the user that owns them/);
        return true;
      });
      const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name desc limit 1`.execute(db);
      assert.equal(rows[0]!.name, '0017_claim_rows_donor', 'nothing changed');
    } finally {
      await db.destroy();
      await database.drop();
      await rawSql(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
    }
  });
}
