// PostgreSQL refusing a create's writes for a moment, with an error of its own rather than a lost
// connection: a read-only database (a hot standby after a failover, or default_transaction_read_only
// during maintenance: 25006), and a statement cancelled by the role's or database's statement_timeout
// while it waits for a lock (57014). Nothing was stored, and the database may take the same write a
// moment later: a 503 with Retry-After, as SQLite's read-only storage and a lock held past the deadline
// are, never a 500 that tells the client the fault is Almoner's. PostgreSQL only.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { UNAVAILABLE_LOGGED_EVERY_MS } from '../../src/http/errors.js';
import { Throttle } from '../../src/http/throttle.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { basic, exampleDonation } from '../support/app.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

describe('PostgreSQL refusing writes for a moment [postgres]', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let name: string;
  let store: Store;
  let app: FastifyInstance;
  let authorization: string;
  let n = 0;

  before(async () => {
    database = await postgres!.createDatabase();
    name = new URL(database.url).pathname.slice(1);
    store = await openStore(database.location);
    app = await buildApp({ store, throttle: new Throttle({ createsPerSecond: 0 }) });
    const { charity, password } = await signUpCharity(store, { name: 'Refusals', email: 'r@example.org' });
    authorization = basic(charity.username, password);
  });
  after(async () => {
    await app?.close();
    await store?.close();
    await database?.drop();
  });

  const create = (key?: string) =>
    app.inject({
      method: 'POST',
      url: '/api/v1/donation/create',
      headers: { authorization, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      payload: JSON.stringify(exampleDonation({ donor_email: `refused-${++n}@example.org` })),
    });

  /** A database setting, seen by the app's connections from their next session on: its sessions are ended, and the pool opens new ones. */
  async function setForNewSessions(setting: string): Promise<void> {
    // From another database: a session on this one would be read-only itself.
    const server = new URL(database.url);
    server.pathname = '/postgres';
    await queryPostgres(server.href, `alter database "${name}" ${setting}`);
    await queryPostgres(server.href, `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [name]);
    // The pool finds its ended sessions as it uses them (each a 503 of its own): a few reads clear them out.
    for (let i = 0; i < 12; i++) await app.inject({ method: 'GET', url: '/health/ready' });
  }

  const stored = async () => Number((await queryPostgres<{ n: string }>(database.url, `select count(*) as n from donations`))[0]!.n);

  function assert503(res: { statusCode: number; headers: Record<string, unknown>; body: string }) {
    assert.equal(res.statusCode, 503, res.body);
    assert.equal(res.headers['retry-after'], '1');
    assert.deepEqual(JSON.parse(res.body), { message: 'The database is unavailable. Please try again shortly.' });
  }

  test('a read-only database (25006): every create, keyed or not, is a 503, nothing is stored, and /health/ready says not ready', async () => {
    const before = await stored();
    await setForNewSessions('set default_transaction_read_only = on');
    try {
      const answers = await Promise.all([create(), create(), create('read-only-1'), create('read-only-2')]);
      for (const res of answers) assert503(res);
      assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 503, 'not ready while writes are refused');
      assert.equal(await stored(), before);
    } finally {
      await setForNewSessions('reset default_transaction_read_only');
    }
    // A pooled session the reset ended may yet answer one 503 of its own (seen once on Node 24): the same create is
    // sent again with its key, as a client does after a 503, and is stored once.
    const body = JSON.stringify(exampleDonation({ donor_email: 'read-only-again@example.org' }));
    const again = () => app.inject({ method: 'POST', url: '/api/v1/donation/create', headers: { authorization, 'content-type': 'application/json', 'idempotency-key': 'read-only-1' }, payload: body });
    let res = await again();
    for (let tries = 1; res.statusCode === 503 && tries < 5; tries++) res = await again();
    assert.equal(res.statusCode, 200, 'the key of a 503 is not used up');
    assert.equal(await stored(), before + 1);
  });

  test('a privilege revoked from the server\'s database user while it runs (42501): every create is a 503, nothing is stored, /health/ready says not ready, and the grant back puts it right', async () => {
    // The test's own user is a superuser, whom no privilege binds: a server of its own, as a user of the usual kind.
    const role = `almoner_test_server_${process.pid}`;
    await queryPostgres(database.url, `create role ${role} login`);
    await queryPostgres(database.url, `grant select, insert, delete on donations, idempotency_keys, commit_tokens to ${role}`);
    await queryPostgres(database.url, `grant select on charities, kysely_migration to ${role}`);
    await queryPostgres(database.url, `grant select, insert, update, delete on almoner_instances to ${role}`); // its row (instances.ts)
    await queryPostgres(database.url, `grant usage on sequence donations_id_seq to ${role}`);
    const url = new URL(database.url);
    url.username = role;
    const limited = await openStore({ dialect: 'postgres', url: url.href, poolMax: 2 }, { mustWrite: true });
    const server = await buildApp({ store: limited, throttle: new Throttle({ createsPerSecond: 0 }) });
    const createThere = (key?: string) =>
      server.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
        payload: JSON.stringify(exampleDonation({ donor_email: `revoked-${++n}@example.org` })),
      });
    try {
      assert.equal((await createThere()).statusCode, 200, 'the grants are enough');
      const before = await stored();
      await queryPostgres(database.url, `revoke insert on donations from ${role}`);
      // Until 2026-11-30 a 500 each, and ready all along (an operator's review).
      for (const res of await Promise.all([createThere(), createThere('revoked-1')])) assert503(res);
      assert.equal((await server.inject({ method: 'GET', url: '/health/ready' })).statusCode, 503, 'not ready while writes are refused');
      assert.equal(await stored(), before);
      await queryPostgres(database.url, `grant insert on donations to ${role}`);
      assert.equal((await createThere('revoked-1')).statusCode, 200, 'the key of a 503 is not used up');
    } finally {
      await server.close();
      await limited.close();
      await queryPostgres(database.url, `drop owned by ${role}`);
      await queryPostgres(database.url, `drop role ${role}`);
    }
  });

  test('an outage\'s 503s are logged in full once a second (each was a warning with its stack: 1.3 MB of log a second)', async () => {
    let now = 0;
    const lines: Record<string, unknown>[] = [];
    const stream = new PassThrough();
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)));
    const logged = await buildApp({ store, throttle: new Throttle({ createsPerSecond: 0 }), clock: () => now, logger: { level: 'warn', stream } });
    const createThere = () =>
      logged.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization, 'content-type': 'application/json' },
        payload: JSON.stringify(exampleDonation({ donor_email: `logged-${++n}@example.org` })),
      });
    const said = () => lines.filter((l) => l.msg === 'database unavailable');
    await setForNewSessions('set default_transaction_read_only = on');
    try {
      for (const res of await Promise.all(Array.from({ length: 5 }, createThere))) assert503(res);
      assert.equal(said().length, 1, JSON.stringify(said()));
      assert.match(JSON.stringify(said()[0]!.err), /25006/);
      assert.ok(said()[0]!.reqId, "the request's id");
      now += UNAVAILABLE_LOGGED_EVERY_MS - 1;
      assert503(await createThere());
      assert.equal(said().length, 1, 'not again within the second');
      now += 1;
      assert503(await createThere());
      assert.equal(said().length, 2, 'again once it is over');
    } finally {
      await setForNewSessions('reset default_transaction_read_only');
      await logged.close();
    }
  });

  test('a statement cancelled by statement_timeout while a lock holds it (57014) is a 503, and nothing is stored', async () => {
    const before = await stored();
    await setForNewSessions(`set statement_timeout = '300ms'`);
    const held = new pg.Client({ connectionString: database.url });
    await held.connect();
    try {
      await held.query(`set statement_timeout = 0`);
      await held.query('begin');
      await held.query('lock table donations in exclusive mode'); // as a CREATE INDEX or an ALTER TABLE by hand would
      assert503(await create());
      assert503(await create('cancelled-1'));
      await held.query('rollback');
      assert.equal(await stored(), before);
    } finally {
      await held.end();
      await setForNewSessions('reset statement_timeout');
    }
    assert.equal((await create('cancelled-1')).statusCode, 200);
  });
});
