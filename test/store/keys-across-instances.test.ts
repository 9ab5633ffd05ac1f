// Idempotency keys when two instances share one PostgreSQL database: a batch's keys are inserted by
// the statement that commits it, with no transaction around the look-up before it (donation-writes.ts), so
// what another instance does between the two must never store a request twice or hold a batch up.
// PostgreSQL only (a SQLite file has one writer, and its batches are transactions).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { signUpCharity } from '../../src/charities/signup.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { KeyTakenError, type Store } from '../../src/store/store.js';
import { recordKeyed } from '../support/app.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';
import { proxyFor, type TcpProxy } from '../support/proxy.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

describe('idempotency keys across instances [postgres]', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let a: Store; // straight to the database
  let b: Store; // through a proxy the test can slow down
  let charityId: number;

  before(async () => {
    database = await postgres!.createDatabase();
    // PostgreSQL's deadlock check put off past the requests' time for the database: a deadlock
    // would leave both batches waiting until their 503s (the last test). Before any connection.
    await queryPostgres(database.url, `alter database "${new URL(database.url).pathname.slice(1)}" set deadlock_timeout = '60s'`);
    let url: string;
    ({ proxy, url } = await proxyFor(database.url));
    a = await openStore(parseDatabaseUrl(database.url, 1));
    b = await openStore(parseDatabaseUrl(url, 1));
    charityId = (await signUpCharity(a, { name: 'Two Instances', email: 'two@example.org' })).charity.id;
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await proxy?.close();
    await database?.drop();
  });

  const keyed = (store: Store, key: string, email: string, ttlMicros?: number) => recordKeyed(store, charityId, key, email, { ttlMicros });
  const outcome = (p: ReturnType<typeof keyed>) => p.then((o) => o.outcome, (err: unknown) => (err instanceof KeyTakenError ? 'taken (409)' : `failed: ${String(err)}`));

  test('an expired key forgotten by two instances at once: the retried request is stored once', async () => {
    // Instance B finds the key expired; before B forgets it, A forgets it too and stores the
    // request afresh. B must then forget nothing of A's, and answer with A's donation (not a 409:
    // A's key is committed by the time B tries again). B's first try meets the expired key at once
    // (it takes its key to be new); its retry's look-up finds the key expired and is answered 300 ms late.
    await keyed(a, 'expired', 'first@example.org', -1);
    await keyed(b, 'warm-up', 'warm-up@example.org'); // B's connection open
    proxy.slowAnswersTo('from idempotency_keys where', 300);
    try {
      const onB = outcome(keyed(b, 'expired', 'retried@example.org'));
      await new Promise((resolve) => setTimeout(resolve, 150)); // B has its look-up's answer at about 300 ms, and then forgets
      const onA = await outcome(keyed(a, 'expired', 'retried@example.org'));
      assert.deepEqual([onA, await onB].sort(), ['created', 'replay']);
    } finally {
      proxy.slowAnswersTo(undefined);
    }
    const stored = await queryPostgres(database.url, `select id from donations where donor_email = 'retried@example.org'`);
    assert.equal(stored.length, 1, 'one request, sent to both instances under one key, is stored once');
    const [kept] = await queryPostgres<{ donation_id: string }>(database.url, `select donation_id from idempotency_keys where key = 'expired'`);
    assert.equal(Number(kept!.donation_id), Number(stored[0]!.id));
  });

  test('two batches of the same keys in opposite orders wait for each other and never deadlock', async () => {
    const held = new pg.Client({ connectionString: database.url });
    await held.connect();
    await held.query('begin');
    await held.query('lock table donations in share mode'); // both batches' statements wait here, then go at once
    const c = await openStore(parseDatabaseUrl(database.url, 1)); // a third instance, straight to the database like A
    const keys = Array.from({ length: 50 }, (_, i) => `both-${i}`);
    const outcomes = Promise.all([
      ...keys.map((key) => outcome(keyed(a, key, `${key}@example.org`))),
      ...[...keys].reverse().map((key) => outcome(keyed(c, key, `${key}@example.org`))),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await held.query('commit');
    await held.end();
    await outcomes;
    await c.close();
    const tally = new Map<string, number>();
    for (const o of await outcomes) tally.set(o, (tally.get(o) ?? 0) + 1);
    assert.deepEqual([...tally.keys()].filter((o) => !['created', 'replay', 'taken (409)'].includes(o)), [], JSON.stringify([...tally]));
    assert.equal(tally.get('created'), keys.length, JSON.stringify([...tally]));
    const [{ n }] = (await queryPostgres<{ n: number }>(database.url, `select count(*)::int as n from donations where donor_email like 'both-%'`)) as [{ n: number }];
    assert.equal(n, keys.length, 'each key stored once');
  });
});
