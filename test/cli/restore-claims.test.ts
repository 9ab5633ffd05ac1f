// A restore must not forget the Gift Aid claims made or marked after its backup: they were sent to
// HMRC, and the next claim would take their donations again (a review found exactly that on both
// backends, 2026-11-28). The replaced database's claim ledger is read before it goes, and what it
// recorded since the backup is kept: claims added, with their ids; claims rejected or submitted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

for (const backend of BACKENDS) {
  describe(`restore keeps the claims made since the backup [${backend.name}]`, () => {
    test('a claim rejected and a claim submitted after the backup are there after the restore; nothing is claimed twice', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const made = await almoner(database.url, ['charity', 'create', '--name', 'Restore Claims', '--email', 'rc@example.org', '--json']);
        assert.equal(made.code, 0, made.stderr);
        const { id: charityId, username } = JSON.parse(made.stdout) as { id: number; username: string };
        const record = (email: string) => recordGiftAided(database.url, charityId, [{ donor_email: email }]);
        const cli = async (args: string[], code = 0) => {
          const run = await almoner(database.url, args);
          assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}${run.stdout}`);
          return run;
        };
        const claim = async () => JSON.parse((await cli(['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--json'])).stdout) as { claim: number | null; donations: number };

        await record('one@example.org');
        await record('two@example.org');
        const first = await claim();
        assert.deepEqual([first.claim, first.donations], [1, 2]);
        await record('three@example.org');
        const backup = join(tempDir(), backend.name === 'sqlite' ? 'before.db' : 'before.dump');
        if (backend.name === 'sqlite') await cli(['backup', '--out', backup]);
        else execFileSync('pg_dump', ['--format=custom', `--file=${backup}`, database.url]);

        // After the backup: claim 1 rejected at HMRC, a donation recorded, and claim 2 takes all four and is submitted.
        await cli(['giftaid', 'mark', '1', 'rejected']);
        await record('four@example.org');
        assert.equal((await claim()).claim, 2);
        await cli(['giftaid', 'mark', '2', 'submitted']);

        const restored = await cli(['restore', backup, '--replace']);
        assert.match(restored.stdout, /kept the Gift Aid claims the replaced database recorded after the backup:/);
        assert.match(restored.stdout, /claim 2 \(submitted\) added; 1 of its donations was recorded after the backup and is not in it/);
        assert.match(restored.stdout, /claim 1 marked rejected/);

        const claims = JSON.parse((await cli(['giftaid', 'claims', '--json'])).stdout) as Array<{ id: number; status: string; donations: number }>;
        assert.deepEqual(claims.map((c) => [c.id, c.status, c.donations]), [[2, 'submitted', 4], [1, 'rejected', 2]]);
        // The backup's three donations are in claim 2, live: the next claim takes none of them again.
        const next = await claim();
        assert.equal(next.claim, null, `nothing to claim: ${JSON.stringify(next)}`);
        // Claim 2's files as sent cannot be made from here (one of its donations is not); said, not written short.
        const files = await cli(['giftaid', 'files', '2', '--out', tempDir()], 2);
        assert.match(files.stderr, /claim 2 holds 4 donations, of which this database has 3/);
        // A new donation's claim takes the next number after the kept one, not 2 again.
        await record('five@example.org');
        assert.equal((await claim()).claim, 3);
        const trail = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; summary: Record<string, unknown> });
        const kept = trail.find((e) => e.action === 'giftaid claims kept');
        assert.deepEqual(kept?.summary, { added: '2', marked: '1 rejected', refused: null });
      } finally {
        await database.drop();
      }
    });
  });
}

