// PostgreSQL: a create whose time for the database runs out while its batch's commit waits for a
// lock another transaction holds (a migration, a VACUUM FULL, an operator's `lock table`). It is a
// 503 that stored nothing and never will: its batch's token is claimed at the deadline, so the
// statement fails when the lock is let go. Until 2026-11-29 it was a 503 "of unknown outcome", and
// the statement committed once the lock was let go, every time (a review: 16 of 16), so a retry
// without a key doubled the donation. PostgreSQL only: SQLite's batch is one synchronous transaction
// whose commit is never left unanswered.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { buildApp } from '../../src/app.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { basic, exampleDonation } from '../support/app.js';
import { BACKENDS, waitingFor, type TestDatabase } from '../support/backends.js';
import { until } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

/** The request's time for the database, short so that the test does not wait production's 4.5 s. */
const BUDGET_MS = 1000;

describe('PostgreSQL: a lock held past a create’s deadline', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let store: Store;
  let app: FastifyInstance;
  let outsider: pg.Client;
  let authorization: string;
  const lines: string[] = [];

  before(async () => {
    database = await postgres!.createDatabase();
    store = await openStore(database.location);
    const stream = new PassThrough();
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
    app = await buildApp({ store, logger: { level: 'warn', stream }, databaseBudgetMs: BUDGET_MS });
    const { charity, password } = await signUpCharity(store, { name: 'Locked Out', email: 'l@example.org' });
    authorization = basic(charity.username, password);
    outsider = new pg.Client({ connectionString: database.url });
    await outsider.connect();
  });

  after(async () => {
    await outsider?.end();
    await app?.close();
    await store?.close();
    await database?.drop();
  });

  const create = (email: string, key?: string) =>
    app.inject({
      method: 'POST',
      url: '/api/v1/donation/create',
      headers: { authorization, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      payload: JSON.stringify(exampleDonation({ donor_email: email })),
    });

  const stored = async (email: string) =>
    Number((await outsider.query<{ n: string }>('select count(*) as n from donations where donor_email = $1', [email])).rows[0]!.n);

  test('the create is a 503 that stored nothing, so a retry stores it once, with a key or without', async () => {
    await outsider.query('begin');
    await outsider.query('lock table donations in share mode');
    let released = false;
    try {
      const [plain, keyed] = await Promise.all([create('held-plain@example.org'), create('held-keyed@example.org', 'held-key-1')]);
      assert.equal(plain.statusCode, 503, plain.body);
      assert.equal(keyed.statusCode, 503, keyed.body);
      // Answered as nothing stored, not as of unknown outcome: a deadline's 503s together are logged once (errors.ts, unavailableLog), an unknown outcome every time, so none of the two was one.
      const said = lines.filter((l) => l.includes('database unavailable'));
      assert.ok(said.length >= 1 && said.every((l) => l.includes('ALMONER_DATABASE_DEADLINE') && !l.includes('ALMONER_COMMIT_UNKNOWN')), said.join('\n'));
      await outsider.query('commit');
      released = true;
      // The statements held up by the lock now run, and fail on the tokens the claims took.
      await until('the held-up statements have ended', 5000, async () => {
        const { rows } = await outsider.query<{ n: string }>(
          "select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%commit_tokens%'",
        );
        return Number(rows[0]!.n) === 0;
      });
      assert.equal(await stored('held-plain@example.org'), 0, 'the 503 stored nothing');
      assert.equal(await stored('held-keyed@example.org'), 0, 'the keyed 503 stored nothing');
    } finally {
      if (!released) await outsider.query('rollback');
    }
    const retried = await create('held-plain@example.org');
    assert.equal(retried.statusCode, 200, retried.body);
    const keyedAgain = await create('held-keyed@example.org', 'held-key-1');
    assert.equal(keyedAgain.statusCode, 200, keyedAgain.body);
    assert.equal(keyedAgain.headers['idempotent-replayed'], undefined, 'a first recording, not a replay');
    assert.equal(await stored('held-plain@example.org'), 1);
    assert.equal(await stored('held-keyed@example.org'), 1);
  });

  test('a server too busy to read the commit’s answer before the deadline: the answer already there is taken, a 200 stored once, not a 503 of unknown outcome (a review)', async () => {
    await outsider.query('begin');
    await outsider.query('lock table donations in share mode');
    const began = performance.now();
    const answer = create('busy@example.org');
    await waitingFor(database.url, '', 5000); // the create, for the lock
    // Just before its deadline the lock goes, and from then on every turn of the event loop takes 400 ms,
    // as a flood handled in one turn makes it: the commit's answer, and any claim's, is there before the
    // loop polls, and its timers fire first.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, began + BUDGET_MS - 150 - performance.now())));
    const released = outsider.query('commit'); // written to the socket now; answered while the loop is busy
    const busyUntil = performance.now() + 2000;
    const busy = () => {
      const end = performance.now() + 400;
      while (performance.now() < end);
      if (performance.now() < busyUntil) setImmediate(busy);
    };
    // Busy from the check phase on (setImmediate's), as a turn's work is: the next turn's timers then come before its poll.
    setImmediate(busy);
    const res = await answer;
    await released;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, busyUntil - performance.now())));
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(await stored('busy@example.org'), 1);
  });
});
