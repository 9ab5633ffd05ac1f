// Scale-out: two `bin/almoner serve` processes on one PostgreSQL database. They start together
// on an empty database (both migrate), share hundreds of concurrent creates without losing or
// doubling any, and both honour CLI credential changes within 5 seconds. PostgreSQL only: SQLite
// serves one machine.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openStore } from '../src/store/open.js';
import { basic, exampleDonation } from './support/app.js';
import { BACKENDS, type TestDatabase } from './support/backends.js';
import { almoner, until } from './support/cli.js';
import { ServerProcess } from './support/server.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');
const CREATES = 400;
/** Neither the create rate nor the creates in flight at once (CREATE_CONCURRENCY_LIMIT, 100) limited: the 400 are sent together, for one charity. */
const UNLIMITED = { CREATE_RATE_LIMIT: '0', CREATE_CONCURRENCY_LIMIT: '0' };
/** Which instance gets a key's third copy: the keys alternate. */
const i = (key: string) => Number(key.split('-')[1]) % 2;

describe('two instances on one PostgreSQL database', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let servers: ServerProcess[] = [];
  let username: string;
  let password: string;

  before(async () => {
    database = await postgres!.createDatabase();
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGTERM', 10_000).catch(() => s.kill())));
    await database?.drop();
  });

  const me = (server: ServerProcess, user = username, pass = password) =>
    fetch(`${server.url}/api/v1/me`, { method: 'POST', headers: { authorization: basic(user, pass), accept: 'application/json' } });

  test('both start at the same moment on an empty database; migrations do not race', async () => {
    // The per-charity create limit is not what this test is about.
    servers = [new ServerProcess(database.url, UNLIMITED), new ServerProcess(database.url, UNLIMITED)];
    await Promise.all(servers.map((s) => s.listening()));
    const created = await almoner(database.url, ['charity', 'create', '--name', 'Scale Out', '--email', 'scale@example.org', '--json']);
    assert.equal(created.code, 0, created.stderr);
    ({ username, password } = JSON.parse(created.stdout));
    for (const server of servers) assert.equal((await me(server)).status, 200);
  });

  test(`${CREATES} concurrent creates over both: each acknowledged donation stored exactly once`, async () => {
    const acknowledged = new Map<number, string>();
    const statuses = await Promise.all(
      Array.from({ length: CREATES }, async (_, i) => {
        const email = `donor-${i}@example.org`;
        const res = await fetch(`${servers[i % 2]!.url}/api/v1/donation/create`, {
          method: 'POST',
          headers: { authorization: basic(username, password), 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify(exampleDonation({ donor_email: email, amount: `${(i % 50) + 1}.00` })),
        });
        if (res.status === 200) {
          const { data } = (await res.json()) as { data: { id: number; donor_email: string } };
          assert.equal(data.donor_email, email);
          assert.ok(!acknowledged.has(data.id), `id ${data.id} was handed out twice`);
          acknowledged.set(data.id, email);
        }
        return res.status;
      }),
    );
    assert.deepEqual(statuses.filter((s) => s !== 200), [], 'every create succeeded');
    assert.equal(acknowledged.size, CREATES);

    const store = await openStore(database.location);
    try {
      const stored = new Map<number, string>();
      for await (const d of store.exportDonations({})) {
        assert.ok(!stored.has(d.id));
        stored.set(d.id, d.donor_email);
      }
      assert.equal(stored.size, CREATES, 'the database holds exactly the acknowledged donations');
      for (const [id, email] of acknowledged) assert.equal(stored.get(id), email);
      assert.equal(new Set(stored.values()).size, CREATES, 'no donation is stored twice');
    } finally {
      await store.close();
    }
  });

  test('the same Idempotency-Key sent to both instances at once: one donation per key, every 200 the same one', async () => {
    const KEYS = 60;
    const send = (server: ServerProcess, key: string) =>
      fetch(`${server.url}/api/v1/donation/create`, {
        method: 'POST',
        headers: { authorization: basic(username, password), 'content-type': 'application/json', accept: 'application/json', 'idempotency-key': key },
        body: JSON.stringify(exampleDonation({ donor_email: `${key}@example.org` })),
      }).then(async (res) => ({ status: res.status, id: res.status === 200 ? ((await res.json()) as { data: { id: number } }).data.id : undefined }));
    const keys = Array.from({ length: KEYS }, (_, i) => `both-${i}`);
    const answers = await Promise.all(keys.map((key) => Promise.all([send(servers[0]!, key), send(servers[1]!, key), send(servers[i(key)]!, key)])));
    const store = await openStore(database.location);
    try {
      const stored = new Map<string, number[]>();
      for await (const d of store.exportDonations({})) {
        if (d.donor_email.startsWith('both-')) stored.set(d.donor_email, [...(stored.get(d.donor_email) ?? []), d.id]);
      }
      for (const [n, key] of keys.entries()) {
        const ids = stored.get(`${key}@example.org`) ?? [];
        assert.equal(ids.length, 1, `${key}: stored ${ids.length} times`);
        for (const answer of answers[n]!) {
          assert.ok(answer.status === 200 || answer.status === 409, `${key}: status ${answer.status}`);
          if (answer.status === 200) assert.equal(answer.id, ids[0], `${key}: a 200 with another donation`);
        }
      }
    } finally {
      await store.close();
    }
  });

  test('charity rotate through the CLI takes effect on both instances within 5 s', async () => {
    const rotated = await almoner(database.url, ['charity', 'rotate', username, '--json']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const fresh = JSON.parse(rotated.stdout).password as string;
    for (const server of servers) {
      await until('the old password is refused', 5000, async () => (await me(server, username, password)).status === 401);
      await until('the new password works', 5000, async () => (await me(server, username, fresh)).status === 200);
    }
    password = fresh;
  });

  test('charity disable and enable through the CLI take effect on both instances within 5 s', async () => {
    assert.equal((await almoner(database.url, ['charity', 'disable', username])).code, 0);
    for (const server of servers) await until('disabled', 5000, async () => (await me(server)).status === 401);
    assert.equal((await almoner(database.url, ['charity', 'enable', username])).code, 0);
    for (const server of servers) await until('enabled', 5000, async () => (await me(server)).status === 200);
  });

  test('both stop cleanly on SIGTERM', async () => {
    for (const server of servers) assert.deepEqual(await server.stop('SIGTERM', 10_000), { code: 0, signal: null });
    servers = [];
  });
});
