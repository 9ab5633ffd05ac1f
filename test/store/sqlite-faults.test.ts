// SQLite's own faults, as the server meets them: another process holding the write lock, and a
// full disk. The server never freezes waiting (GET /health answers while a create waits for the
// lock), a lock held past the deadline and a full disk are 503s with Retry-After whose log line
// names the real cause, /health/ready says not ready while writes fail, and all recover by
// themselves. SQLite only.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { buildApp } from '../../src/app.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { Throttle } from '../../src/http/throttle.js';
import { openStore, SERVER_SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/open.js';
import { basic, exampleDonation, tempDir } from '../support/app.js';
import { mountTmpfs } from '../support/backends.js';

/** The app as the server builds it on SQLite, with its log lines collected. */
async function serverOn(path: string, databaseBudgetMs: number) {
  const store = await openStore(parseDatabaseUrl(`sqlite:${path}`), { sqliteBusyTimeoutMs: SERVER_SQLITE_BUSY_TIMEOUT_MS });
  const lines: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
  const app = await buildApp({ store, throttle: new Throttle({ createsPerSecond: 0 }), logger: { level: 'warn', stream }, databaseBudgetMs });
  const { charity, password } = await signUpCharity(store, { name: 'Faults', email: 'f@example.org' });
  const authorization = basic(charity.username, password);
  let n = 0;
  const create = (overrides: Record<string, unknown> = {}) =>
    app.inject({
      method: 'POST',
      url: '/api/v1/donation/create',
      headers: { authorization, 'content-type': 'application/json' },
      payload: JSON.stringify(exampleDonation({ donor_email: `fault-${++n}@example.org`, ...overrides })),
    });
  return { store, app, create, lines };
}

async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work;
  return { value, ms: performance.now() - started };
}

function assert503(res: { statusCode: number; headers: Record<string, unknown>; body: string }) {
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.headers['retry-after'], '1');
  assert.deepEqual(JSON.parse(res.body), { message: 'The database is unavailable. Please try again shortly.' });
}

describe('SQLite: another process holds the write lock', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof serverOn>>;
  let outsider: BetterSqlite3.Database;
  before(async () => {
    dir = tempDir();
    server = await serverOn(join(dir, 'almoner.db'), 1500);
    outsider = new BetterSqlite3(join(dir, 'almoner.db'));
  });
  after(async () => {
    outsider?.close();
    await server?.app.close();
    await server?.store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a create waits for the lock without freezing the server: /health answers meanwhile, and the create is stored', async () => {
    outsider.exec('begin immediate');
    const pending = server.create();
    await new Promise((r) => setTimeout(r, 100)); // the create is waiting for the lock now
    const health = await timed(server.app.inject({ method: 'GET', url: '/health' }));
    assert.equal(health.value.statusCode, 200);
    assert.ok(health.ms < 300, `GET /health answered in ${Math.round(health.ms)} ms while a create waited for the lock`);
    setTimeout(() => outsider.exec('commit'), 300);
    const res = await pending;
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(await server.store.findDonation(res.json().data.id));
  });

  test('read-only storage: 503 with Retry-After, logged as SQLITE_READONLY, not ready; then it works again', async () => {
    // SQLite's query_only makes the server's own connection refuse writes as a read-only file would
    // (remounting a disk read-only under open files is refused as busy).
    const db = (server.store as unknown as { db: Kysely<unknown> }).db;
    await sql`pragma query_only = 1`.execute(db);
    try {
      assert503(await server.create());
      assert.equal((await server.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 503);
    } finally {
      await sql`pragma query_only = 0`.execute(db);
    }
    assert.ok(server.lines.some((l) => /"database unavailable"/.test(l) && /SQLITE_READONLY/.test(l)), server.lines.join('\n'));
    // The error's own class, not pino's "Object" for the shape loggable() gives it (before 2026-11-28).
    assert.ok(server.lines.some((l) => /"database unavailable"/.test(l) && /"type":"SqliteError"/.test(l)), server.lines.join('\n'));
    assert.equal((await server.create()).statusCode, 200);
    assert.equal((await server.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);
  });

  test('held past the deadline: 503 with Retry-After, logged as SQLITE_BUSY; then it works again', async () => {
    outsider.exec('begin immediate');
    try {
      assert503(await server.create());
    } finally {
      outsider.exec('rollback');
    }
    assert.ok(server.lines.some((l) => /"database unavailable"/.test(l) && /SQLITE_BUSY/.test(l)), server.lines.join('\n'));
    assert.equal((await server.create()).statusCode, 200);
  });
});

describe('SQLite: the disk is full', () => {
  const dir = tempDir();
  const mountPoint = join(dir, 'small');
  const noMount = mountTmpfs(mountPoint, '2m');
  let server: Awaited<ReturnType<typeof serverOn>>;
  let app: FastifyInstance;
  after(async () => {
    await server?.app.close();
    await server?.store.close();
    if (!noMount) execFileSync('umount', ['-l', mountPoint]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('writes get 503s naming SQLITE_FULL in the log, never a 500; not ready while full; all well once space is freed', { skip: noMount }, async () => {
    server = await serverOn(join(mountPoint, 'almoner.db'), 1500);
    app = server.app;
    writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(1024 * 1024)); // most of the space
    const address = 'x'.repeat(1000);
    const acknowledged: number[] = [];
    let full: Awaited<ReturnType<typeof server.create>> | undefined;
    for (let i = 0; i < 2000 && !full; i++) {
      const res = await server.create({ donor_address: address });
      if (res.statusCode === 200) acknowledged.push(res.json().data.id);
      else full = res;
    }
    assert.ok(full, 'the disk filled up');
    assert503(full);
    for (let i = 0; i < 5; i++) assert503(await server.create({ donor_address: address }));
    assert.ok(server.lines.some((l) => /"database unavailable"/.test(l) && /SQLITE_FULL/.test(l)), server.lines.slice(-5).join('\n'));
    assert.ok(!server.lines.some((l) => /no transaction is active/.test(l)), 'the real cause is not hidden');
    const notReady = await app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(notReady.statusCode, 503, notReady.body);
    assert.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);

    rmSync(join(mountPoint, 'filler'));
    assert.equal((await server.create()).statusCode, 200);
    assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200, 'ready once a write has succeeded');
    for (const id of acknowledged) assert.ok(await server.store.findDonation(id), `acknowledged donation ${id} is stored`);
  });
});
