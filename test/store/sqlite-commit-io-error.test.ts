// A commit on SQLite that fails on an I/O error may be stored all the same. When the disk refuses
// to confirm the WAL's write (fsync fails with EIO: a failing disk, a thin volume out of space, a
// network block device), SQLite answers the COMMIT SQLITE_IOERR_FSYNC, but the transaction's frames,
// its commit mark among them, are in the WAL already. The running server does not see them, and its
// next commit writes over them; but if it stops first (a crash, a restart, or even a clean SIGTERM
// while the disk still fails, whose checkpoint then fails and leaves the WAL), the next process to
// open the database reads them back, and the donation is stored. Its create was answered "The
// database is unavailable. Please try again shortly.", which promises that nothing was stored: an
// integration without an Idempotency-Key that retried it as told recorded it twice (a faults review,
// 2026-11-30). Such a 503 must say that the outcome is unknown, as a PostgreSQL commit whose answer
// was lost does.
//
// The fault is made by a small library loaded into a real `bin/almoner serve` with LD_PRELOAD
// (test/support/fsync-fails.c), compiled here: skipped, with the reason, where no C compiler is found.
// Run with WORKERS=1 and 2 (the primary writes the workers' creates).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { parseDatabaseUrl } from '../../src/config.js';
import { UNAVAILABLE_MESSAGES } from '../../src/http/errors.js';
import { basic, exampleDonation, tempDir } from '../support/app.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { storedDonations } from '../support/load.js';
import { ServerProcess } from '../support/server.js';

const SOURCE = fileURLToPath(new URL('../support/fsync-fails.c', import.meta.url));

/** The library, compiled into `dir`; or why it cannot be. */
function compileShim(dir: string): { path: string } | { skip: string } {
  // LD_PRELOAD and /proc/self/fd, which the library reads, are Linux's (macOS ignores LD_PRELOAD: the test would fail, not skip).
  if (process.platform !== 'linux') return { skip: `LD_PRELOAD is Linux's, and this is ${process.platform}` };
  const path = join(dir, 'fsync-fails.so');
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', path, SOURCE, '-ldl'], { stdio: 'pipe' });
    return { path };
  } catch (err) {
    return { skip: `no C compiler to build test/support/fsync-fails.c (${(err as Error).message.split('\n')[0]})` };
  }
}

const dir = tempDir();
const shim = compileShim(dir);
// The library, the databases and their WALs: nothing is left in the temporary folder.
after(() => rmSync(dir, { recursive: true, force: true }));

for (const workers of ['1', '2']) {
  describe(`SQLite, WORKERS=${workers}: a commit whose fsync fails is of unknown outcome, as it may be stored`, { skip: 'skip' in shim ? shim.skip : false }, () => {
    const url = `sqlite:${join(dir, `w${workers}.db`)}`;
    const flag = join(dir, `fsync-fails-w${workers}`);
    const env = { LD_PRELOAD: 'path' in shim ? shim.path : '', FSYNC_FAILS_WHILE: flag, WORKERS: workers, CREATE_RATE_LIMIT: '0' };
    let server: ServerProcess | undefined;
    let authorization = '';

    before(async () => {
      assertBuilt();
      server = await new ServerProcess(url, env).listening();
      const created = await almoner(url, ['charity', 'create', '--name', 'Disk', '--email', 'disk@example.org', '--json']);
      assert.equal(created.code, 0, created.stderr);
      const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
      authorization = basic(username, password);
    });

    after(async () => {
      rmSync(flag, { force: true });
      server?.kill();
      await server?.exited;
    });

    const create = async (base: string, email: string, key?: string) => {
      const res = await fetch(`${base}/api/v1/donation/create`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json', accept: 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
        body: JSON.stringify(exampleDonation({ donor_email: email })),
      });
      return { status: res.status, body: (await res.json()) as { message?: string; data?: { id: number } }, replayed: res.headers.get('idempotent-replayed') === 'true' };
    };

    test('answered as of unknown outcome, with a key and without; stored after a stop; a retry with the key is never doubled', async () => {
      assert.ok(server);
      const before = await create(server.url, `before-w${workers}@example.org`);
      assert.equal(before.status, 200, JSON.stringify(before.body));

      writeFileSync(flag, '');
      // The keyed one first: each failed commit is written where the one before it was, so the last is the one read back.
      const keyed = await create(server.url, `keyed-w${workers}@example.org`, `disk-key-w${workers}`);
      const unkeyed = await create(server.url, `unkeyed-w${workers}@example.org`);
      assert.equal(keyed.status, 503, JSON.stringify(keyed.body));
      assert.equal(unkeyed.status, 503, JSON.stringify(unkeyed.body));

      // Stopped cleanly while the disk still fails, as an operator restarting the service would.
      const { code } = await server.stop('SIGTERM', 15_000);
      rmSync(flag);
      const stored = new Map((await storedDonations(parseDatabaseUrl(url))).map((d) => [d.record.donor_email, d.record.id]));
      assert.ok(stored.has(`before-w${workers}@example.org`), 'the donation acknowledged before the fault is stored');
      // What makes the fix needed: a create answered 503 while the disk failed is stored once the database is opened again.
      assert.ok(stored.has(`unkeyed-w${workers}@example.org`), `the last create of the fault is read back from the WAL (stop: ${code})`);
      assert.equal(unkeyed.body.message, UNAVAILABLE_MESSAGES.outcomeUnknown, 'a create stored after its 503 was told that it may have been stored');
      assert.equal(keyed.body.message, UNAVAILABLE_MESSAGES.outcomeUnknownKeyed);
      // The log line of each says what the disk did, for the operator who settles whether it was stored.
      const unknownLines = server.logLines().filter((l) => l.includes('"database unavailable"') && l.includes('ALMONER_COMMIT_UNKNOWN'));
      assert.equal(unknownLines.length, 2, server.stdout);
      for (const line of unknownLines) assert.match(line, /SQLITE_IOERR_FSYNC/);

      // Its retry with the key, on a server started again: one donation, whichever way the first went.
      server = await new ServerProcess(url, env).listening();
      const retried = await create(server.url, `keyed-w${workers}@example.org`, `disk-key-w${workers}`);
      assert.equal(retried.status, 200, JSON.stringify(retried.body));
      const after = await storedDonations(parseDatabaseUrl(url));
      assert.equal(after.filter((d) => d.record.donor_email === `keyed-w${workers}@example.org`).length, 1);
      assert.equal(retried.replayed, stored.has(`keyed-w${workers}@example.org`));
    });
  });
}

test("a command whose write the disk would not confirm says it may have been made, and to look before running it again", { skip: 'skip' in shim ? shim.skip : false }, async () => {
  assertBuilt();
  const url = `sqlite:${join(dir, 'cli.db')}`;
  const flag = join(dir, 'fsync-fails-cli');
  const env = { LD_PRELOAD: 'path' in shim ? shim.path : '', FSYNC_FAILS_WHILE: flag };
  assert.equal((await almoner(url, ['charity', 'create', '--name', 'First', '--email', 'first@example.org'], env)).code, 0);
  writeFileSync(flag, '');
  try {
    const run = await almoner(url, ['charity', 'create', '--name', 'Second', '--email', 'second@example.org'], env);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stderr, /almoner: disk I\/O error \(SQLITE_IOERR_FSYNC\): the disk did not confirm the write, which may have been made all the same\. See to the disk first; then look \(charity list, giftaid claims, audit\) before running the command again\n$/);
  } finally {
    rmSync(flag, { force: true });
  }
});

for (const workers of ['1', '2']) {
  test(`SQLite, WORKERS=${workers}: each create of unknown outcome is counted in almoner_creates_outcome_unknown_total, apart from the plain 503s`, { skip: 'skip' in shim ? shim.skip : false }, async () => {
    assertBuilt();
    const url = `sqlite:${join(dir, `metrics-w${workers}.db`)}`;
    const flag = join(dir, `fsync-fails-metrics-w${workers}`);
    const server = await new ServerProcess(url, { LD_PRELOAD: 'path' in shim ? shim.path : '', FSYNC_FAILS_WHILE: flag, WORKERS: workers, CREATE_RATE_LIMIT: '0' }).listening();
    try {
      const created = await almoner(url, ['charity', 'create', '--name', 'Count', '--email', 'count@example.org', '--json']);
      assert.equal(created.code, 0, created.stderr);
      const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
      const create = async (i: number) =>
        (
          await fetch(`${server.url}/api/v1/donation/create`, {
            method: 'POST',
            headers: { authorization: basic(username, password), 'content-type': 'application/json', accept: 'application/json' },
            body: JSON.stringify(exampleDonation({ donor_email: `count-${i}@example.org` })),
          })
        ).status;
      assert.equal(await create(0), 200);
      writeFileSync(flag, '');
      const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i + 1)));
      rmSync(flag);
      assert.deepEqual(statuses, Array(12).fill(503));
      const unknownLines = server.logLines().filter((l) => l.includes('"database unavailable"') && l.includes('ALMONER_COMMIT_UNKNOWN'));
      assert.equal(unknownLines.length, 12, server.stdout);
      // Under WORKERS a scrape is a 503 when a worker does not give its metrics within 5 s ("Try again"), as a
      // CI run on busy cores once met: scraped again then, as Prometheus would at its next scrape.
      const scrape = async (): Promise<string> => {
        for (let attempt = 1; ; attempt++) {
          const r = await fetch(`${server.url}/metrics`);
          if (r.status !== 503 || attempt === 4) return await r.text();
          await r.arrayBuffer();
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      };
      const metrics = await scrape();
      assert.match(metrics, /^almoner_http_requests_total\{route="\/api\/v1\/donation\/create",method="POST",status="503"\} 12$/m);
      // The operator's signal that some of those 503s may be stored, and must be settled: one each.
      assert.match(metrics, /^almoner_creates_outcome_unknown_total 12$/m, metrics.split('\n').filter((l) => l.startsWith('almoner_')).join('\n'));
    } finally {
      rmSync(flag, { force: true });
      server.kill();
      await server.exited;
    }
  });
}
