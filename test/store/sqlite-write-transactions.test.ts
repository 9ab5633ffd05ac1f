// An operator's command that reads and then writes in one transaction (a donor's erasure, a
// retention run), beside a server committing creates on the same SQLite file: it waits for the
// write lock rather than failing with "database is locked". Before transactions began IMMEDIATE,
// a commit landing between the command's read and its first write failed it at once
// (SQLITE_BUSY_SNAPSHOT), one time in three against a server under load. SQLite only.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { signUpCharity } from '../../src/charities/signup.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { exampleDonation, tempDir } from '../support/app.js';

/** Another connection committing a row about every millisecond, as a busy server's batches do, until stopped. */
async function busyWriter(path: string): Promise<{ commits(): number; stop(): Promise<number> }> {
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const count = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { workerData: { path, stop, count } } = require('node:worker_threads');
     const db = new (require('better-sqlite3'))(path);
     db.pragma('busy_timeout = 5000');
     db.exec('create table if not exists writer_ticks (at integer)');
     const tick = db.prepare('insert into writer_ticks (at) values (?)');
     const { parentPort } = require('node:worker_threads');
     let n = 0;
     while (Atomics.load(stop, 0) === 0) {
       tick.run(Date.now());
       Atomics.add(count, 0, 1);
       if (++n === 1) parentPort.postMessage('writing');
       Atomics.wait(stop, 0, 0, 1);
     }
     db.close();
     parentPort.postMessage(n);`,
    { eval: true, workerData: { path, stop, count } },
  );
  const messages: unknown[] = [];
  const waiting: ((message: unknown) => void)[] = [];
  worker.on('message', (m) => (waiting.length ? waiting.shift()!(m) : messages.push(m)));
  const next = () => new Promise<unknown>((resolve, reject) => {
    if (messages.length) return resolve(messages.shift());
    waiting.push(resolve);
    worker.once('error', reject);
  });
  assert.equal(await next(), 'writing');
  return {
    commits: () => Atomics.load(count, 0),
    stop: async () => {
      Atomics.store(stop, 0, 1);
      Atomics.notify(stop, 0);
      return (await next()) as number;
    },
  };
}

describe('SQLite: an erasure or a retention run beside a server writing', () => {
  let store: Store;
  let path: string;
  before(async () => {
    path = join(tempDir(), 'almoner.db');
    store = await openStore(parseDatabaseUrl(`sqlite:${path}`)); // the CLI's settings
    const { charity } = await signUpCharity(store, { name: 'Busy', email: 'busy@example.org' });
    for (let i = 0; i < 20; i++) {
      const v = validateDonation(exampleDonation({ donor_email: `donor-${i}@example.org` }));
      assert.ok(v.ok);
      await store.recordDonation(charity.id, v.donation);
    }
  });
  after(() => store.close());

  test('each one waits for the lock and succeeds, however often the other connection commits', async () => {
    const writer = await busyWriter(path);
    const failures: string[] = [];
    try {
      // 20 rounds at least, and on until the other connection has committed between them (a loaded machine starves its thread).
      for (let i = 0; i < 20 || (writer.commits() < 5 && i < 2000); i++) {
        await store.donors.erase({ email: `donor-${i}@example.org`, today: '2026-11-28', dryRun: false }).then(
          (erased) => assert.equal(erased.donations.length, i < 20 ? 1 : 0),
          (err: Error) => failures.push(`erase ${i}: ${err.message}`),
        );
        await store.donors.applyRetention({ today: '2026-11-28', retentionYears: 6, dryRun: false }).catch((err: Error) => failures.push(`retention ${i}: ${err.message}`));
        await sleep(5); // the other connection's turn: each command here is a process of its own, run now and then
      }
    } finally {
      const commits = await writer.stop();
      assert.ok(commits >= 5, `the other connection committed ${commits} times meanwhile`);
    }
    assert.deepEqual(failures, []);
  });
});
