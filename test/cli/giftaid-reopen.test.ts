// `giftaid reopen`: a rejection marked by mistake (the wrong claim's number, say) freed a claim's
// donations for the next claim, which would send them to HMRC a second time; until 2026-11-30 it
// could not be taken back. Reopened, the claim is what it was and its donations its own again,
// refused while another live claim holds any of them; and a restore carries a reopen over from the
// database it replaces, after the rejection that let it happen.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

interface ClaimJson {
  id: number;
  status: string;
  donations: number;
  submitted_at: string | null;
  rejected_at: string | null;
}

/** A charity with its CLI, on a new database: `cli` asserts the exit code it is given. */
async function charityWithCli(database: TestDatabase) {
  const made = await almoner(database.url, ['charity', 'create', '--name', 'Reopen Claims', '--email', 'rc@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  const { id: charityId, username } = JSON.parse(made.stdout) as { id: number; username: string };
  const cli = async (args: string[], code = 0) => {
    const run = await almoner(database.url, args);
    assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}${run.stdout}`);
    return run;
  };
  // Each donor their own first name: the same names, house, postcode, day and amount are one gift recorded twice (twins.ts).
  const record = (email: string) => recordGiftAided(database.url, charityId, [{ donor_email: email, donor_first_name: email.split('@')[0] }]);
  const claim = async () => JSON.parse((await cli(['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--json'])).stdout) as { claim: number | null; donations: number };
  const claims = async () => JSON.parse((await cli(['giftaid', 'claims', '--json'])).stdout) as ClaimJson[];
  const stderr = (run: { stderr: string }) => run.stderr.replace(/^almoner: database \S+\n/, '');
  return { cli, record, claim, claims, stderr };
}

for (const backend of BACKENDS) {
  describe(`giftaid reopen [${backend.name}]`, () => {
    test('a claim rejected by mistake is submitted again with its donations, and the next claim takes none of them; a claim never submitted is prepared again', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, claims, stderr } = await charityWithCli(database);
        await record('one@example.org');
        await record('two@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'submitted']);
        await cli(['giftaid', 'mark', '1', 'rejected']);

        // Marked again as it was: refused, naming the way back.
        const marked = await cli(['giftaid', 'mark', '1', 'submitted'], 2);
        assert.equal(stderr(marked), 'almoner: claim 1 is rejected, so it cannot be marked submitted (if it was marked rejected by mistake, bin/almoner giftaid reopen 1 makes it submitted again).\n');

        const reopened = await cli(['giftaid', 'reopen', '1']);
        assert.equal(
          reopened.stdout,
          'Claim 1 reopened: submitted again, with its 2 donations; the next claim will not take them. bin/almoner giftaid files 1 --out DIR writes its files again.\n',
        );
        const [one] = await claims();
        assert.deepEqual([one!.id, one!.status, one!.donations, one!.rejected_at], [1, 'submitted', 2, null]);
        assert.notEqual(one!.submitted_at, null, 'when it was submitted is kept');
        assert.equal((await claim()).claim, null, 'its donations are its own again: nothing to claim');
        // It moves on as a submitted claim does.
        await cli(['giftaid', 'mark', '1', 'paid']);

        // Not rejected: refused, nothing changed; an unknown claim too.
        assert.equal(stderr(await cli(['giftaid', 'reopen', '1'], 2)), 'almoner: claim 1 is paid, not rejected: only a rejected claim can be reopened.\n');
        assert.match(stderr(await cli(['giftaid', 'reopen', '99'], 2)), /no claim has the id 99/);

        // Rejected before it was ever submitted: prepared again (its files are still to be uploaded once).
        await record('three@example.org');
        assert.equal((await claim()).claim, 2);
        await cli(['giftaid', 'mark', '2', 'rejected']);
        const json = JSON.parse((await cli(['giftaid', 'reopen', '2', '--json'])).stdout) as ClaimJson;
        assert.deepEqual([json.id, json.status, json.submitted_at, json.rejected_at], [2, 'prepared', null, null]);

        const trail = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; target: string; summary: Record<string, unknown> });
        const entries = trail.filter((e) => e.action === 'giftaid reopen');
        assert.deepEqual(entries.map((e) => [e.target, e.summary.status]), [['claim 1', 'submitted'], ['claim 2', 'prepared']]);
      } finally {
        await database.drop();
      }
    });

    test('refused, with nothing changed, while a later claim holds its donations; reopened once that claim is rejected', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, claims, stderr } = await charityWithCli(database);
        await record('one@example.org');
        await record('two@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'rejected']);
        await record('three@example.org');
        const second = await claim();
        assert.deepEqual([second.claim, second.donations], [2, 3], 'claim 2 took the rejected claim\'s two and the new one');

        const refused = await cli(['giftaid', 'reopen', '1'], 2);
        assert.equal(stderr(refused), 'almoner: claim 1 cannot be reopened: its donations are in claim 2 now, and reopened it would claim them twice. Nothing was changed.\n');
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'prepared'], [1, 'rejected']]);

        await cli(['giftaid', 'mark', '2', 'rejected']);
        await cli(['giftaid', 'reopen', '1']);
        const third = await claim();
        assert.deepEqual([third.claim, third.donations], [3, 1], 'the next claim takes only the donation claim 1 does not hold');
      } finally {
        await database.drop();
      }
    });

    test('a restore carries over a reopen made after its backup, after the rejection of the claim that held its donations meanwhile', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, claims } = await charityWithCli(database);
        await record('one@example.org');
        await record('two@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'submitted']);
        await cli(['giftaid', 'mark', '1', 'rejected']); // the mistake
        assert.equal((await claim()).claim, 2); // and the next claim took claim 1's donations
        const backup = join(tempDir(), backend.name === 'sqlite' ? 'before.db' : 'before.dump');
        if (backend.name === 'sqlite') await cli(['backup', '--out', backup]);
        else execFileSync('pg_dump', ['--format=custom', `--file=${backup}`, database.url]);

        // After the backup: claim 2 rejected (never sent), claim 1 reopened (it was at HMRC all along).
        await cli(['giftaid', 'mark', '2', 'rejected']);
        await cli(['giftaid', 'reopen', '1']);

        const restored = await cli(['restore', backup, '--replace']);
        assert.match(restored.stdout, /claim 2 marked rejected/);
        assert.match(restored.stdout, /claim 1 reopened: submitted again, its donations its own again/);
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'rejected'], [1, 'submitted']]);
        assert.equal((await claim()).claim, null, 'claim 1 holds its donations: the next claim takes none of them again');
        const trail = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; summary: Record<string, unknown> });
        assert.deepEqual(trail.find((e) => e.action === 'giftaid claims kept')?.summary, { added: null, marked: '2 rejected, 1 submitted reopened', refused: null });

        // Restored again over the reopened ledger: it is the later one, so nothing moves back.
        const again = await cli(['restore', backup, '--replace']);
        assert.match(again.stdout, /claim 1 reopened/);
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'rejected'], [1, 'submitted']]);
      } finally {
        await database.drop();
      }
    });
  });
}
