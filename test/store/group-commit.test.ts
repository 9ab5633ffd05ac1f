// Group commit: creates arriving together are committed together, yet each one is acknowledged only
// once committed, and one write that fails does not take its neighbours down with it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { signUpCharity } from '../../src/charities/signup.js';
import { openStore } from '../../src/store/open.js';
import { DatabaseBudget, DatabaseDeadlineError } from '../../src/store/budget.js';
import { CommitOutcomeUnknownError } from '../../src/store/group-commit.js';
import { KEYS_FOUND_MS } from '../../src/store/donation-writes.js';
import { parseDatabaseUrl } from '../../src/config.js';
import type { Store } from '../../src/store/store.js';
import { recordKeyed, validDonation as donation } from '../support/app.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';
import { proxyFor } from '../support/proxy.js';

const NO_SUCH_CHARITY = 999_999;

for (const backend of BACKENDS) {
  describe(`group commit [${backend.name}]`, () => {
    let database: TestDatabase;
    let store: Store;
    let observer: Store; // a second connection: what is committed, and nothing else, is visible to it
    let charityId: number;

    before(async () => {
      database = await backend.createDatabase();
      store = await openStore(database.location);
      observer = await openStore(database.location);
      charityId = (await signUpCharity(store, { name: 'Batch', email: 'b@example.org' })).charity.id;
    });
    after(async () => {
      await store?.close();
      await observer?.close();
      await database?.drop();
    });

    const visible = async (id: number) => (await observer.findDonation(id)) !== undefined;

    test('a burst of creates: each is committed (seen from another connection) when it resolves', async () => {
      const ids = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const stored = await store.recordDonation(charityId, donation(`burst-${i}@example.org`));
          assert.ok(await visible(stored.id), `donation ${stored.id} resolved before it was visible elsewhere`);
          return stored.id;
        }),
      );
      assert.equal(new Set(ids).size, 60);
    });

    test('a burst larger than a batch: on PostgreSQL in batches of at most 32 (the next made ready while one waits), on SQLite in one', async () => {
      const sizes: number[] = [];
      store.observeBatches((size) => sizes.push(size));
      try {
        await Promise.all(Array.from({ length: 100 }, (_, i) => store.recordDonation(charityId, donation(`big-burst-${i}@example.org`))));
      } finally {
        store.observeBatches(() => {});
      }
      assert.equal(sizes.reduce((sum, size) => sum + size, 0), 100);
      if (backend.name === 'postgres') assert.deepEqual([...sizes].sort((a, b) => b - a), [32, 32, 32, 4]);
      else assert.deepEqual(sizes, [100]);
    });

    test('one failing write in a burst fails alone; the others are stored, in halves of the batch, not one by one', async () => {
      const tokens = async () => (backend.name === 'postgres' ? Number((await queryPostgres<{ n: string }>(database.url, 'select count(*) as n from commit_tokens'))[0]!.n) : 0);
      const tokensBefore = await tokens();
      const results = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) =>
          i === 13
            ? store.recordDonation(NO_SUCH_CHARITY, donation('poison@example.org')) // refused by the foreign key
            : store.recordDonation(charityId, donation(`neighbour-${i}@example.org`)),
        ),
      );
      const failed = results.filter((r) => r.status === 'rejected');
      assert.equal(failed.length, 1);
      assert.match(String((failed[0] as PromiseRejectedResult).reason), /foreign key/i);
      for (const r of results) if (r.status === 'fulfilled') assert.ok(await visible(r.value.id));
      const emails: string[] = [];
      for await (const d of observer.exportDonations({})) emails.push(d.donor_email);
      assert.ok(!emails.includes('poison@example.org'), 'the failed write left nothing behind');
      assert.equal(emails.filter((e) => e.startsWith('neighbour-')).length, 29);
      if (backend.name === 'postgres') {
        // Each commit on PostgreSQL writes a token: the 29 went in a few halves (about log2(30) of them), not in 29 commits of one.
        const commits = (await tokens()) - tokensBefore;
        assert.ok(commits >= 2 && commits <= 10, `${commits} commits for the 29 writes beside the failing one`);
      }
    });

    test('a burst of keyed creates, new keys, replays and a reused key together: each gets its own outcome and its own donation', async () => {
      const keyed = (i: number, email = `keyed-${i}@example.org`) => recordKeyed(store, charityId, `burst-key-${i}`, email);
      const first = await Promise.all(Array.from({ length: 50 }, (_, i) => keyed(i)));
      for (const [i, outcome] of first.entries()) {
        assert.equal(outcome.outcome, 'created');
        if (outcome.outcome === 'created') assert.equal(outcome.donation.donor_email, `keyed-${i}@example.org`);
      }
      // Replays, reused keys with another body and new keys, all at once (so in shared batches).
      const again = await Promise.all(Array.from({ length: 75 }, (_, i) => (i < 50 && i % 5 === 4 ? keyed(i, `other-${i}@example.org`) : keyed(i))));
      for (const [i, outcome] of again.entries()) {
        if (i >= 50) {
          assert.equal(outcome.outcome, 'created', `key ${i}`);
        } else if (i % 5 === 4) {
          assert.equal(outcome.outcome, 'mismatch', `key ${i}`);
          continue;
        } else {
          assert.equal(outcome.outcome, 'replay', `key ${i}`);
        }
        const { donation: answered } = outcome as { donation: { id: number; donor_email: string } };
        assert.equal(answered.donor_email, `keyed-${i}@example.org`, `key ${i} answers with its own donation`);
        if (i < 50) assert.equal(answered.id, (first[i] as { donation: { id: number } }).donation.id);
        assert.ok(await visible(answered.id));
      }
      const emails: string[] = [];
      for await (const d of observer.exportDonations({})) emails.push(d.donor_email);
      assert.equal(emails.filter((e) => e.startsWith('keyed-')).length, 75, 'one donation per key');
      assert.ok(!emails.some((e) => e.startsWith('other-')), 'a reused key stored nothing');
    });

    const LATE = 27; // the writes from here on have 30 ms
    test('after a failed batch, a write whose deadline passes while it waits its turn is told and not stored (or, its commit sent, told the outcome is unknown); every write told it is stored is', async (t) => {
      await Promise.all(Array.from({ length: 10 }, (_, i) => store.recordDonation(charityId, donation(`warm-${i}@example.org`)))); // open the pool's connections
      const results = await Promise.allSettled(
        // 32, one PostgreSQL batch at most: the late ones wait behind the retry in halves, not in a batch of their own.
        Array.from({ length: 32 }, (_, i) =>
          i === 0
            ? store.recordDonation(NO_SUCH_CHARITY, donation('poison-2@example.org')) // fails the batch: the others go one by one
            : store.recordDonation(charityId, donation(`turn-${i}@example.org`), { budget: new DatabaseBudget(i >= LATE ? 30 : 10_000) }),
        ),
      );
      const stored = new Set<string>();
      for await (const d of observer.exportDonations({})) stored.add(d.donor_email);
      for (const [i, r] of results.entries()) {
        if (i === 0) continue;
        const email = `turn-${i}@example.org`;
        if (i < LATE) assert.equal(r.status, 'fulfilled', `${email} had time to spare: ${r.status === 'rejected' ? String(r.reason) : ''}`);
        if (r.status === 'fulfilled') assert.ok(stored.has(email), `${email} was acknowledged but is not stored`);
        else if (r.reason instanceof CommitOutcomeUnknownError) {
          // Its deadline passed after its commit was sent (PostgreSQL): told that nobody knows, which is true either way.
          assert.match(r.reason.message, /^the outcome of a commit is unknown: the database did not answer within the request's time/);
        } else {
          assert.ok(r.reason instanceof DatabaseDeadlineError, `${email}: ${String(r.reason)}`);
          assert.ok(!stored.has(email), `${email} was refused but is stored`);
        }
      }
      // How many of the late ones are stored depends on timing (one whose commit went out before its deadline is); what matters is that no answer is wrong.
      const unknown = results.filter((r) => r.status === 'rejected' && r.reason instanceof CommitOutcomeUnknownError).length;
      t.diagnostic(`${results.filter((r) => r.status === 'fulfilled').length} stored, ${results.filter((r) => r.status === 'rejected').length - 1 - unknown} refused, ${unknown} unknown`);
    });

    test("a write whose deadline passes while its batch waits for the database is told alone; the batch's other writes are stored", async () => {
      // The database held up from outside: SQLite's write lock held by another connection (the batch tries again and
      // again), or PostgreSQL's donations table locked against inserts (the batch's commit waits, sent).
      const hold = await holdWrites(database);
      const waiting = backend.name === 'sqlite' ? await openStore(database.location, { sqliteBusyTimeoutMs: 20 }) : store;
      try {
        const writes = Array.from({ length: 5 }, (_, i) =>
          waiting.recordDonation(charityId, donation(`held-${i}@example.org`), { budget: new DatabaseBudget(i === 2 ? 100 : 10_000) }),
        );
        const results = Promise.allSettled(writes);
        await new Promise((resolve) => setTimeout(resolve, 400));
        await hold.release();
        const [a, b, late, c, d] = await results;
        const stored = new Set<string>();
        for await (const row of observer.exportDonations({})) stored.add(row.donor_email);
        for (const [i, r] of [a, b, c, d].entries()) {
          assert.equal(r!.status, 'fulfilled', `neighbour ${i}: ${r!.status === 'rejected' ? String(r!.reason) : ''}`);
          assert.ok(stored.has((r as PromiseFulfilledResult<{ donor_email: string }>).value.donor_email));
        }
        assert.equal(late!.status, 'rejected');
        const reason = (late as PromiseRejectedResult).reason;
        if (reason instanceof CommitOutcomeUnknownError) {
          assert.equal(backend.name, 'postgres', 'only a commit sent to PostgreSQL can have an unknown outcome');
          assert.ok(stored.has('held-2@example.org'), 'its commit went through once the table was free');
        } else {
          assert.ok(reason instanceof DatabaseDeadlineError, String(reason));
          assert.ok(!stored.has('held-2@example.org'), 'told it was not stored, but it is');
        }
      } finally {
        await hold.release();
        if (waiting !== store) await waiting.close();
      }
    });

    test(
      'a batch of new keys is written with no look-up (on PostgreSQL in one statement); one that meets a stored key fails whole, storing nothing, and is tried again whole with its keys looked up; for KEYS_FOUND_MS after, keys are looked up first',
      async () => {
        // The statements sent: through a proxy to PostgreSQL; on SQLite, as better-sqlite3 runs them.
        const { statements, url, close } = backend.name === 'sqlite' ? sqliteStatements(database.url) : await proxiedStatements(database.url);
        let now = 0;
        const watchedStore = await openStore(parseDatabaseUrl(url, 4), { clock: () => now });
        try {
          const keyed = (i: number, email = `one-trip-${i}@example.org`) => recordKeyed(watchedStore, charityId, `one-trip-${i}`, email);
          let lookUps = statements('from idempotency_keys where', 'from "idempotency_keys" where');
          // PostgreSQL: the statement that writes the batch and its token. SQLite: the batch's transaction.
          let commits = statements('insert into "commit_tokens"', 'begin immediate');
          const fresh = await Promise.all(Array.from({ length: 20 }, (_, i) => keyed(i)));
          assert.deepEqual(new Set(fresh.map((o) => o.outcome)), new Set(['created']));
          assert.equal(lookUps(), 0, 'new keys were looked up');
          assert.ok(commits() >= 1 && commits() <= 2, `${commits()} statements for 20 new keys sent together`);

          // A replay and a reused key among new keys: the batch's first statement fails, and its retry looks up.
          lookUps = statements('from idempotency_keys where', 'from "idempotency_keys" where');
          commits = statements('insert into "commit_tokens"', 'begin immediate');
          const mixed = await Promise.all([keyed(3), keyed(4, 'another-body@example.org'), ...Array.from({ length: 10 }, (_, i) => keyed(100 + i))]);
          assert.equal(mixed[0]!.outcome, 'replay');
          assert.equal(mixed[0]!.outcome === 'replay' && mixed[0]!.donation.id, fresh[3]!.outcome === 'created' && fresh[3]!.donation.id);
          assert.equal(mixed[1]!.outcome, 'mismatch');
          for (const o of mixed.slice(2)) assert.equal(o.outcome, 'created');
          assert.ok(lookUps() >= 1, 'the keys of the batch tried again were not looked up');
          // The failed try and the whole retry, not a retry in halves (three: the failed try and a half each).
          assert.equal(commits(), 2, 'tries for a batch that met stored keys');

          // Keys were found stored just now: new ones are looked up on their first try too, until KEYS_FOUND_MS has passed.
          now = KEYS_FOUND_MS - 1;
          lookUps = statements('from idempotency_keys where', 'from "idempotency_keys" where');
          commits = statements('insert into "commit_tokens"', 'begin immediate');
          for (const o of await Promise.all(Array.from({ length: 5 }, (_, i) => keyed(200 + i)))) assert.equal(o.outcome, 'created');
          // PostgreSQL looks a batch's keys up in one query; SQLite each in its own statement, in the batch's transaction.
          const expected = backend.name === 'sqlite' ? 5 : commits();
          assert.ok(commits() >= 1 && lookUps() === expected, `${lookUps()} look-ups and ${commits()} commits just after keys were found`);
          now = KEYS_FOUND_MS + 1;
          lookUps = statements('from idempotency_keys where', 'from "idempotency_keys" where');
          for (const o of await Promise.all(Array.from({ length: 5 }, (_, i) => keyed(300 + i)))) assert.equal(o.outcome, 'created');
          assert.equal(lookUps(), 0, 'new keys were looked up long after keys were last found');

          const emails: string[] = [];
          for await (const d of observer.exportDonations({})) emails.push(d.donor_email);
          assert.equal(emails.filter((e) => e.startsWith('one-trip-')).length, 40, 'one donation per key');
          assert.ok(!emails.includes('another-body@example.org'), 'a reused key stored nothing');
        } finally {
          await watchedStore.close();
          await close();
        }
      },
    );

    test(
      'PostgreSQL: a keyed write whose deadline passes while its batch, tried again, looks up the keys is left out of the commit and not stored; the others are',
      { skip: backend.name === 'sqlite' ? 'the look-ups run inside the batch\'s one synchronous transaction on SQLite: no deadline passes between them' : false },
      async () => {
        // A batch's first try takes its keys to be new; a key already stored (a replay) fails it at once, and the
        // retry looks the keys up first. Through a proxy that answers that look-up 1 s late; the late write has
        // 400 ms, so that its deadline passes during the look-up even on a busy machine, not during the first try.
        const { proxy, url } = await proxyFor(database.url);
        const slowStore = await openStore(parseDatabaseUrl(url, 4));
        try {
          const keyed = (i: number, budgetMs?: number) =>
            recordKeyed(slowStore, charityId, `looked-up-${i}`, `looked-up-${i}@example.org`, { budget: budgetMs === undefined ? undefined : new DatabaseBudget(budgetMs) });
          const first = await keyed(0);
          assert.equal(first.outcome, 'created');
          proxy.slowAnswersTo('from idempotency_keys where', 1000);
          const settled = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => keyed(i, i === 2 ? 400 : 10_000)));
          proxy.slowAnswersTo(undefined);
          const stored = new Set<string>();
          for await (const row of observer.exportDonations({})) stored.add(row.donor_email);
          for (const [i, r] of settled.entries()) {
            if (i === 2) {
              assert.ok(r.status === 'rejected' && r.reason instanceof DatabaseDeadlineError, `the late one: ${JSON.stringify(r)}`);
              assert.ok(!stored.has('looked-up-2@example.org'), 'told it was not stored, but it is');
            } else {
              assert.equal(r.status, 'fulfilled', `neighbour ${i}: ${r.status === 'rejected' ? String(r.reason) : ''}`);
              assert.equal((r as PromiseFulfilledResult<{ outcome: string }>).value.outcome, i === 0 ? 'replay' : 'created', `neighbour ${i}`);
              assert.ok(stored.has(`looked-up-${i}@example.org`));
            }
          }
          // Its key was left unused: a retry is taken afresh.
          assert.equal((await keyed(2)).outcome, 'created');
        } finally {
          proxy.slowAnswersTo(undefined);
          await slowStore.close();
          await proxy.close();
        }
      },
    );

    test(
      'PostgreSQL: the write at fault told at its deadline while its half of a failed batch is committed: its neighbour in that half is committed alone, not given its error',
      { skip: backend.name === 'sqlite' ? 'a batch runs synchronously on SQLite: no deadline passes during its commit' : false },
      async () => {
        // The failing write's insert made slow from its second try on (its batch's first fails at once): the retry of
        // its half is under way when its deadline passes.
        await queryPostgres(
          database.url,
          `create sequence poison_tries;
           create function slow_poison() returns trigger language plpgsql as $$
             begin if new.charity_id = ${NO_SUCH_CHARITY} and nextval('poison_tries') > 1 then perform pg_sleep(1); end if; return new; end $$;
           create trigger slow_poison before insert on donations for each row execute function slow_poison()`,
        );
        try {
          const [poison, ...neighbours] = await Promise.allSettled([
            store.recordDonation(NO_SUCH_CHARITY, donation('slow-poison@example.org'), { budget: new DatabaseBudget(400) }),
            ...[1, 2, 3].map((i) => store.recordDonation(charityId, donation(`beside-poison-${i}@example.org`), { budget: new DatabaseBudget(10_000) })),
          ]);
          assert.equal(poison!.status, 'rejected');
          const stored = new Set<string>();
          for await (const row of observer.exportDonations({})) stored.add(row.donor_email);
          for (const [i, r] of neighbours.entries()) {
            assert.equal(r.status, 'fulfilled', `neighbour ${i + 1}: ${r.status === 'rejected' ? String(r.reason) : ''}`);
            assert.ok(stored.has(`beside-poison-${i + 1}@example.org`));
          }
        } finally {
          await queryPostgres(database.url, 'drop trigger slow_poison on donations; drop function slow_poison; drop sequence poison_tries');
        }
      },
    );
  });
}

/**
 * Holds the database's writes up from another connection until released: SQLite's write lock, or on
 * PostgreSQL a lock on the donations, whose inserts wait while reads go on.
 */
async function holdWrites(database: TestDatabase): Promise<{ release(): Promise<void> }> {
  let released = false;
  if (database.location.dialect === 'sqlite') {
    const outsider = new BetterSqlite3(database.location.path);
    outsider.exec('begin immediate');
    return {
      release: async () => {
        if (released) return;
        released = true;
        outsider.exec('commit');
        outsider.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query('begin');
  await client.query('lock table donations in exclusive mode');
  return {
    release: async () => {
      if (released) return;
      released = true;
      await client.query('commit');
      await client.end();
    },
  };
}

/** A counter of the statements sent whose SQL holds a piece: `postgres` or, on SQLite, `sqlite` (case aside). */
type StatementCounter = (postgres: string, sqlite: string) => () => number;

/** PostgreSQL: the statements sent to the database at `url`, counted through a proxy; connect to the url returned. */
async function proxiedStatements(url: string): Promise<{ statements: StatementCounter; url: string; close: () => Promise<void> }> {
  const { proxy, url: proxied } = await proxyFor(url);
  return { statements: (postgres) => proxy.countStatements(postgres), url: proxied, close: () => proxy.close() };
}

/**
 * SQLite: the statements better-sqlite3 runs in this process, counted as its prepared statements
 * run them (their own SQL text), until close(). Every connection's are counted, the test's own too.
 */
function sqliteStatements(url: string): { statements: StatementCounter; url: string; close: () => Promise<void> } {
  const statement = Object.getPrototypeOf(new BetterSqlite3(':memory:').prepare('select 1')) as Record<'all' | 'get' | 'run' | 'iterate', (...args: unknown[]) => unknown>;
  const methods = ['all', 'get', 'run', 'iterate'] as const;
  const originals = methods.map((m) => statement[m]);
  const sent: string[] = [];
  methods.forEach((m, i) => {
    statement[m] = function (this: { source: string }, ...args: unknown[]) {
      sent.push(this.source.toLowerCase());
      return originals[i]!.apply(this, args);
    };
  });
  const statements: StatementCounter = (_postgres, sqlite) => {
    const from = sent.length;
    return () => sent.slice(from).filter((sql) => sql.includes(sqlite)).length;
  };
  const close = async () => methods.forEach((m, i) => (statement[m] = originals[i]!));
  return { statements, url, close };
}
