// A batch's commit that reached PostgreSQL but whose answer was lost: the batch is stored, and the
// service must not store its donations again. A batch commits with the one statement that writes
// its donations, their keys and its token (donation-writes.ts). A TCP proxy the test controls lets those
// statements through and drops the connection as their answers come back; thousands of creates go
// through the real HTTP app, and the database, read directly, must hold each donation at most once
// and every acknowledged one exactly once. Creates without a key first, then keyed ones, then keyed
// ones whose keys had expired (each forgotten by a statement of its own before the batch's
// commit). PostgreSQL only (SQLite has no connection to lose).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { buildApp } from '../../src/app.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { Throttle } from '../../src/http/throttle.js';
import { DonationWrites } from '../../src/store/donation-writes.js';
import { openStore } from '../../src/store/open.js';
import type { Database } from '../../src/store/schema.js';
import { isDatabaseUnavailable } from '../../src/store/unavailable.js';
import type { Store } from '../../src/store/store.js';
import { basic, exampleDonation, recordKeyed, validDonation } from '../support/app.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';
import { proxyFor, type TcpProxy } from '../support/proxy.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

const CREATES = 3600;
const CONCURRENCY = 48;
const DROP_EVERY = 3; // every 3rd commit's answer is lost

describe("a lost commit's answer never doubles a donation", { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let store: Store;
  let app: FastifyInstance;
  let authorization: string;
  let url: string; // through the proxy

  before(async () => {
    database = await postgres!.createDatabase();
    ({ proxy, url } = await proxyFor(database.url));
    store = await openStore(parseDatabaseUrl(url, 4));
    app = await buildApp({ store, throttle: new Throttle({ createsPerSecond: 0 }) });
    const { charity, password } = await signUpCharity(store, { name: 'Commit Test', email: 'c@example.org' });
    authorization = basic(charity.username, password);
  });

  after(async () => {
    await app?.close();
    await store?.close();
    await proxy?.close();
    await database?.drop();
  });

  test(`${CREATES} creates, every ${DROP_EVERY}th commit's answer lost: no donation stored twice, every 200 stored once`, async () => {
    proxy.dropCommitAnswers(DROP_EVERY);
    const acknowledged = new Map<string, number>(); // donor_email -> id
    const statuses = new Map<number, number>();
    let next = 0;
    /** Creates `lost-commit-<n>`, up to n = until; keyed ones with the key `key(n)`. */
    const load = async (until: number, key?: (n: number) => string) => {
      const before = proxy.droppedCommitAnswers;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < until) {
            const n = next++;
            const email = `lost-commit-${n}@example.org`;
            const res = await app.inject({
              method: 'POST',
              url: '/api/v1/donation/create',
              headers: { authorization, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key(n) } : {}) },
              payload: exampleDonation({ donor_email: email }),
            });
            statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
            if (res.statusCode === 200) acknowledged.set(email, res.json<{ data: { id: number } }>().data.id);
            else assert.equal(res.statusCode, 503, res.body);
          }
        }),
      );
      return proxy.droppedCommitAnswers - before;
    };
    const third = CREATES / 3;
    const unkeyed = await load(third);
    const keyed = await load(2 * third, (n) => `key-${n}`);
    // The keyed creates' keys, expired: each create now forgets one, then records a new donation under it.
    await queryPostgres(database.url, `update idempotency_keys set expires_at = '2000-01-01T00:00:00.000000Z'`);
    const expired = await load(CREATES, (n) => `key-${n - third}`);
    proxy.dropCommitAnswers(0);
    for (const [kind, dropped] of Object.entries({ unkeyed, keyed, expired })) {
      assert.ok(dropped >= 5, `the proxy dropped ${dropped} answers to the commits of ${kind} creates`);
    }

    const direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ donor_email: string; ids: string[] }>(
        `select donor_email, array_agg(id::text order by id) as ids from donations where donor_email like 'lost-commit-%' group by donor_email`,
      );
      const stored = new Map(rows.map((r) => [r.donor_email, r.ids.map(Number)]));
      const doubled = [...stored].filter(([, ids]) => ids.length > 1);
      assert.equal(doubled.length, 0, `${doubled.length} donations stored more than once, e.g. ${JSON.stringify(doubled.slice(0, 3))} (answers: ${JSON.stringify([...statuses])})`);
      for (const [email, id] of acknowledged) assert.deepEqual(stored.get(email), [id], `acknowledged ${email} (id ${id}) is stored once, with that id`);
      // A 503 is allowed only where the database could not say; with it answering, a lost
      // commit's answer is settled by its token and acknowledged.
      assert.ok((statuses.get(200) ?? 0) >= CREATES * 0.9, `most creates acknowledged: ${JSON.stringify([...statuses])}`);
    } finally {
      await direct.end();
    }
  });

  test("a batch's first try that meets a stored key, its answer lost: nothing stored, each create told so, and each retried gets its own outcome", async () => {
    // A first try takes its keys to be new (donation-writes.ts): a replay among them fails the statement, storing
    // nothing. Its answer lost, the token says nothing was committed, and the batch's creates are told the database
    // was lost (503s), not answered. A store of its own, whose keys no look-up has found yet, so it takes them to be new.
    const fresh = await openStore(parseDatabaseUrl(url, 2));
    try {
      const { charity } = await signUpCharity(fresh, { name: 'Lost Failure', email: 'lf@example.org' });
      const keyed = (i: number) => recordKeyed(fresh, charity.id, `lost-failure-${i}`, `lost-failure-${i}@example.org`);
      const first = await keyed(0);
      assert.equal(first.outcome, 'created');
      proxy.dropCommitAnswers(1, { failuresToo: true });
      const lost = await Promise.allSettled([0, 1, 2, 3].map(keyed));
      proxy.dropCommitAnswers(0);
      for (const r of lost) assert.ok(r.status === 'rejected' && isDatabaseUnavailable(r.reason), `told the database was lost: ${JSON.stringify(r)}`);
      const stored = await queryPostgres<{ donor_email: string }>(database.url, `select donor_email from donations where donor_email like 'lost-failure-%'`);
      assert.deepEqual(stored.map((r) => r.donor_email), ['lost-failure-0@example.org'], 'nothing of the failed batch was stored');
      const again = await Promise.all([0, 1, 2, 3].map(keyed));
      assert.deepEqual(again.map((o) => o.outcome), ['replay', 'created', 'created', 'created']);
      assert.equal(again[0]!.outcome === 'replay' && again[0]!.donation.id, first.outcome === 'created' && first.donation.id);
    } finally {
      proxy.dropCommitAnswers(0);
      await fresh.close();
    }
  });

  // The pool still hands out its idle connections that died in the same cut, until each has failed
  // once: asked once, the token's check met one and the stored creates got 503s; asked 12 times at
  // once, a pool of 16 still did, and so did a database away a moment (every try refused).
  for (const { name, pool, idle, creates, drop } of [
    { name: "whose cut took the pool's other connections too", pool: 4, idle: 4, creates: 6, drop: { everyConnection: true } },
    { name: 'whose cut took a pool of 16 with it', pool: 16, idle: 16, creates: 3, drop: { everyConnection: true } },
    { name: 'then the database away for 0.6 s', pool: 4, idle: 0, creates: 3, drop: { thenAwayMs: 600 } },
  ]) {
    test(`a lost commit's answer ${name}: the token is asked again until it can be, and the creates get their 200s`, async () => {
      const pooled = await openStore(parseDatabaseUrl(url, pool));
      const tag = name.replace(/\W+/g, '-');
      try {
        const { charity } = await signUpCharity(pooled, { name: `Cut ${tag}`.slice(0, 60), email: 'cut@example.org' });
        // Connections open and idle in the pool first: reads at once, each answer held back a moment.
        proxy.slow(100);
        await Promise.all(Array.from({ length: idle }, () => pooled.auditTrail()));
        proxy.slow(0);
        proxy.dropCommitAnswers(1, drop);
        const before = proxy.droppedCommitAnswers;
        const outcomes = await Promise.allSettled(Array.from({ length: creates }, (_, i) => pooled.recordDonation(charity.id, validDonation(`cut-${tag}-${i}@example.org`))));
        proxy.dropCommitAnswers(0);
        assert.ok(proxy.droppedCommitAnswers > before, 'a commit answer was dropped');
        const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason));
        assert.deepEqual(failed, [], 'every create stored is answered as stored');
        const stored = await queryPostgres<{ n: number }>(database.url, `select count(*)::int as n from donations where donor_email like $1`, [`cut-${tag}-%`]);
        assert.equal(stored[0]!.n, creates);
      } finally {
        proxy.dropCommitAnswers(0);
        proxy.restore();
        await pooled.close();
      }
    });
  }

  test("a claim asked again after its own answer was lost is not taken for the batch's commit; the commit's own token is", async () => {
    // A try whose claim reached PostgreSQL but whose answer was lost leaves the token written; the
    // next try, with the same claim, must say "not committed" (a second plain claim said "committed":
    // a 200 for a donation never stored). Straight against the database, each try as it would land.
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 1 }) }) });
    try {
      const writes = new DonationWrites(db, 'postgres');
      const lost = 'token-whose-claim-answer-was-lost';
      assert.equal(await writes.committed(lost, 'claim-a'), false, 'the first try claims it');
      assert.equal(await writes.committed(lost, 'claim-a'), false, 'the same claim, tried again: still not committed');
      // The batch's own commit wrote its token (as commitStatement does, with the time alone): a claim finds it committed.
      await db.insertInto('commit_tokens').values({ token: 'token-the-batch-committed', committed_at: '2026-11-28T05:00:00.000000Z' }).execute();
      assert.equal(await writes.committed('token-the-batch-committed', 'claim-b'), true);
      // And the hourly purge still reads a claimed token's time: it goes a day on.
      const purged = await db.deleteFrom('commit_tokens').where('committed_at', '<', '9999-01-01').where('token', '=', lost).executeTakeFirst();
      assert.equal(Number(purged.numDeletedRows), 1);
    } finally {
      await db.destroy();
    }
  });

  test('a connection lost while the statement that commits waits for a lock: its 503 means never stored', async () => {
    // PostgreSQL runs a statement on after its client has gone. Holding a lock on donations keeps
    // it waiting past the loss; were the token only looked up, it would be missing (a 503) and the
    // statement would commit later, storing a donation its request was told was not.
    const email = 'cut-mid-statement@example.org';
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table donations in share mode'); // inserts wait
      proxy.cutAfterCommit(300);
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization, 'content-type': 'application/json' },
        payload: exampleDonation({ donor_email: email }),
      });
      assert.equal(res.statusCode, 503, res.body);
      await locker.query('commit');
      // The cut-off statement goes on once the lock is free: wait until it has ended.
      const running = async () =>
        (await locker.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%commit_tokens%'`)).rows[0]!.n;
      for (let waited = 0; (await running()) > 0; waited += 50) {
        assert.ok(waited < 10_000, 'the cut-off statement is still running after 10 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      const { rows } = await locker.query<{ n: number }>('select count(*)::int as n from donations where donor_email = $1', [email]);
      assert.equal(rows[0]!.n, 0, 'the donation was stored after its request was answered 503');
    } finally {
      await locker.end();
    }
  });
});
