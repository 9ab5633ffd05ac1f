// `giftaid reopen`: a rejection marked by mistake (the wrong claim's number, say) freed a claim's
// donations for the next claim, which would send them to HMRC a second time; until 2026-11-30 it
// could not be taken back. Reopened, the claim is what it was and its donations its own again,
// refused while another live claim holds any of them; and a restore carries a reopen over from the
// database it replaces, after the rejection that let it happen.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { ClaimConflictError } from '../../src/store/claims.js';
import { openStore } from '../../src/store/open.js';
import { ukDay } from '../../src/time.js';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, startAlmoner, until } from '../support/cli.js';

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
  const backup = async () => {
    const file = join(tempDir(), database.url.startsWith('sqlite:') ? 'before.db' : 'before.dump');
    if (database.url.startsWith('sqlite:')) await cli(['backup', '--out', file]);
    else execFileSync('pg_dump', ['--format=custom', `--file=${file}`, database.url]);
    return file;
  };
  return { charityId, username, cli, record, claim, claims, stderr, backup };
}

/**
 * Claim 1 submitted with One Doe's donation, which a restore of a backup from before it lost (claim
 * 1 keeps its row without it); the charity sends it again, its last name in capitals this time;
 * claim 1 is rejected by mistake, and claim 2 takes the donation sent again: the same gift.
 */
async function giftSentAgainAfterRestore(database: TestDatabase) {
  const operator = await charityWithCli(database);
  const { cli, claim, backup } = operator;
  const before = await backup();
  await recordGiftAided(database.url, operator.charityId, [{ donor_email: 'one@example.org', donor_first_name: 'One', donor_last_name: 'Doe' }]);
  assert.equal((await claim()).claim, 1);
  await cli(['giftaid', 'mark', '1', 'submitted']);
  assert.match((await cli(['restore', before, '--replace'])).stdout, /claim 1 \(submitted\) added; 1 of its donations is not in the backup/);
  await recordGiftAided(database.url, operator.charityId, [{ donor_email: 'one@example.org', donor_first_name: 'One', donor_last_name: 'DOE' }]);
  await cli(['giftaid', 'mark', '1', 'rejected']); // the mistake
  return operator;
}

/** What `giftaid reopen CLAIM` says, exit 2, while claim `holder` holds its donations. */
const refusal = (claim: number, holder: number) =>
  `almoner: claim ${claim} cannot be reopened: its donations, or other records of the same gifts, are in claim ${holder} now, and reopened it would claim them twice. Nothing was changed. ` +
  `If claim ${holder} was never sent to HMRC, mark it rejected (bin/almoner giftaid mark ${holder} rejected), then reopen claim ${claim}.\n`;

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
        assert.equal(stderr(refused), refusal(1, 2));
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'prepared'], [1, 'rejected']]);

        await cli(['giftaid', 'mark', '2', 'rejected']);
        await cli(['giftaid', 'reopen', '1']);
        const third = await claim();
        assert.deepEqual([third.claim, third.donations], [3, 1], 'the next claim takes only the donation claim 1 does not hold');
      } finally {
        await database.drop();
      }
    });

    test('refused while a paid claim holds its donations, without the advice to mark the paid claim rejected, which giftaid mark refuses (given until 2026-12-02: a review)', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, stderr } = await charityWithCli(database);
        await record('one@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'rejected']);
        assert.equal((await claim()).claim, 2);
        await cli(['giftaid', 'mark', '2', 'submitted']);
        await cli(['giftaid', 'mark', '2', 'paid']);
        assert.equal(
          stderr(await cli(['giftaid', 'reopen', '1'], 2)),
          'almoner: claim 1 cannot be reopened: its donations, or other records of the same gifts, are in claim 2 now, and reopened it would claim them twice. Nothing was changed. ' +
            'Claim 2 is paid, which is final: HMRC has paid for those gifts there, so claim 1 stays rejected.\n',
        );
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

    test('a backup from before the mistake, restored after the reopen: the claim is as it was, with its donations, and no restore says it was marked', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, claims, backup } = await charityWithCli(database);
        await record('one@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'submitted']);
        const before = await backup();
        await cli(['giftaid', 'mark', '1', 'rejected']); // the mistake
        await cli(['giftaid', 'reopen', '1']);
        // Until a review of 2026-11-30 each restore of it said "claim 1 marked submitted", and recorded so, of a claim submitted in the backup.
        for (const time of ['first', 'second']) {
          const restored = await cli(['restore', before, '--replace']);
          assert.doesNotMatch(restored.stdout, /claim 1|kept the Gift Aid claims/, `${time} restore: ${restored.stdout}`);
        }
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[1, 'submitted']]);
        assert.equal((await claim()).claim, null);
        const trail = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string });
        assert.equal(trail.filter((e) => e.action === 'giftaid claims kept').length, 0);
        // It moved three times (submitted, rejected, reopened): a later rejection is still the later status.
        await cli(['giftaid', 'mark', '1', 'rejected']);
        const again = await cli(['restore', before, '--replace']);
        assert.match(again.stdout, /claim 1 marked rejected/);
      } finally {
        await database.drop();
      }
    });

    test('a claim with a row kept without its donation is refused while a live claim holds the same gift sent again (its last name in capitals), and a claim holding a donation sent again while a live claim keeps its row', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, claim, claims, stderr } = await giftSentAgainAfterRestore(database);
        assert.equal((await claim()).claim, 2, 'claim 2 took the donation sent again');
        // Until a review of 2026-11-30, names were compared exactly: DOE was not Doe, and claim 1 was reopened beside claim 2.
        assert.equal(stderr(await cli(['giftaid', 'reopen', '1'], 2)), refusal(1, 2));
        await cli(['giftaid', 'mark', '2', 'rejected']);
        await cli(['giftaid', 'reopen', '1']);
        // Claim 2's donation is claim 1's kept row: until the same review, only a claim's own kept rows were looked for.
        assert.equal(stderr(await cli(['giftaid', 'reopen', '2'], 2)), refusal(2, 1));
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'rejected'], [1, 'submitted']]);
      } finally {
        await database.drop();
      }
    });

    test('two claims a restore kept with the same gift without its donation: the rejected one is not reopened beside the live one', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, record, claim, claims, stderr, backup } = await charityWithCli(database);
        const before = await backup();
        await record('one@example.org');
        assert.equal((await claim()).claim, 1);
        await cli(['giftaid', 'mark', '1', 'submitted']);
        await cli(['giftaid', 'mark', '1', 'rejected']); // the mistake
        assert.equal((await claim()).claim, 2);
        await cli(['giftaid', 'mark', '2', 'submitted']);
        // Restored from before the donation: both claims are kept, each with its row and no donation.
        const restored = await cli(['restore', before, '--replace']);
        assert.match(restored.stdout, /claim 1 \(rejected\) added/);
        assert.match(restored.stdout, /claim 2 \(submitted\) added/);
        assert.equal(stderr(await cli(['giftaid', 'reopen', '1'], 2)), refusal(1, 2));
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[2, 'submitted'], [1, 'rejected']]);
      } finally {
        await database.drop();
      }
    });

    test('a claim recorded from rows chosen before a reopen made a kept row of the same gift live again is refused, and the next claim lists the donation as needing attention', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { charityId, username, cli, claims } = await giftSentAgainAfterRestore(database);
        const store = await openStore(database.location);
        try {
          // The rows a `giftaid claim` chose while claim 1 was rejected: the donation sent again, as claim 1's kept row.
          const db = (store as unknown as { db: Kysely<any> }).db;
          const { id: sentAgain } = (await db.selectFrom('donations').select('id').orderBy('id', 'desc').executeTakeFirstOrThrow()) as { id: number };
          const [kept] = await store.claims.rows(1);
          const rows = [{ ...kept!, donationId: Number(sentAgain), lastName: 'DOE' }];
          await cli(['giftaid', 'reopen', '1']); // meanwhile
          const today = ukDay(new Date());
          await assert.rejects(store.claims.prepare({ charityId, upTo: today, claimDate: today, rows, needsAttention: 0 }), ClaimConflictError);
        } finally {
          await store.close();
        }
        assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[1, 'submitted']]);
        const out = tempDir();
        const next = JSON.parse((await cli(['giftaid', 'claim', '--charity', username, '--out', out, '--json'])).stdout) as { claim: number | null };
        assert.equal(next.claim, null);
        assert.match(readFileSync(join(out, `needs-attention-${username}.csv`), 'utf8'), /a donation in claim 1 that a restore could not bring back/);
      } finally {
        await database.drop();
      }
    });

    if (backend.name === 'postgres') {
      test('a reopen and a claim, or two reopens, at the same moment: the gift is in one live claim', async () => {
        assertBuilt();
        const database = await backend.createDatabase();
        try {
          const { username, cli, claims } = await giftSentAgainAfterRestore(database);
          // Each held at its audit entry, after its checks, until both are running.
          const together = async (...runs: string[][]) => {
            const client = new pg.Client({ connectionString: database.url });
            await client.connect();
            try {
              await client.query('begin');
              await client.query('lock table audit_log in share mode');
              const waiting = async () =>
                Number(
                  (
                    await client.query(
                      `select count(*) as n from pg_locks where not granted and ((locktype = 'relation' and relation = 'audit_log'::regclass) ` +
                        `or (locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())))`,
                    )
                  ).rows[0].n,
                );
              const started = [];
              for (const args of runs) {
                started.push(startAlmoner(database.url, args).done);
                await until(`${args.join(' ')} waiting`, 15_000, async () => (await waiting()) >= started.length);
              }
              await client.query('commit');
              return await Promise.all(started);
            } finally {
              await client.end();
            }
          };
          const out = tempDir();
          const [reopened, claimed] = await together(['giftaid', 'reopen', '1'], ['giftaid', 'claim', '--charity', username, '--out', out, '--json']);
          assert.ok(reopened && claimed);
          assert.equal(reopened.code, 0, reopened.stderr);
          assert.equal(claimed.code, 0, claimed.stderr);
          assert.equal((JSON.parse(claimed.stdout) as { claim: number | null }).claim, null, "the donation sent again is claim 1's kept row: it needs attention");
          assert.deepEqual((await claims()).map((c) => [c.id, c.status]), [[1, 'submitted']]);

          // Claim 2 takes it once claim 1 is rejected again, and is rejected; then both are reopened at once.
          await cli(['giftaid', 'mark', '1', 'rejected']);
          assert.equal((JSON.parse((await cli(['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--json'])).stdout) as { claim: number }).claim, 2);
          await cli(['giftaid', 'mark', '2', 'rejected']);
          const both = await together(['giftaid', 'reopen', '1'], ['giftaid', 'reopen', '2']);
          assert.deepEqual(both.map((r) => r.code).sort(), [0, 2], both.map((r) => r.stderr).join(''));
          assert.deepEqual((await claims()).map((c) => c.status).sort(), ['rejected', 'submitted']);
        } finally {
          await database.drop();
        }
      });
    }
  });
}
