// keep-replaced given a PostgreSQL restore's files by hand: the trail and the claims file must be the
// two one restore left. The claims file holds the replaced database's charities' rows, from which
// the charities' changes the trail records are carried over: from another restore's claims file,
// rows older than those changes would be carried (until 2026-11-30 it was taken unchecked).
import assert from 'node:assert/strict';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { test } from 'node:test';
import { authenticatedCharity } from '../../src/charities/credentials.js';
import { openStore } from '../../src/store/open.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { validDonation } from '../support/app.js';
import { almoner, assertBuilt, killedBySignal, killing, operator } from '../support/cli.js';


/** A claims file as an Almoner before 2026-12-01 wrote it: one JSON object, not JSON lines (ledger-file.ts). */
function asOneObject(file: string): Record<string, unknown> {
  const [first, ...lines] = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  const { format: _, ...fields } = first!;
  const of = (kind: string) => lines.filter((line) => kind in line).map((line) => line[kind]);
  return { ...fields, rows: of('rows'), withoutDonation: of('withoutDonation') };
}

/** What a restore left beside `backup`: its trail and its claims file. */
function leftBeside(backup: string): { trail: string; claims: string | undefined } {
  const files = readdirSync(dirname(backup)).map((f) => join(dirname(backup), f));
  return { trail: files.find((f) => f.includes('.replaced-trail-'))!, claims: files.find((f) => f.includes('.replaced-claims-')) };
}

test('keep-replaced refuses a trail and a claims file two restores left, naming both, and changes nothing [postgres]', { skip: BACKENDS.length < 2 && 'no TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const backend = BACKENDS[1]!;
  const database = await backend.createDatabase();
  try {
    const { cli, charity, backup } = operator(database, backend.name);
    const alpha = await charity('Alpha');
    const rotate = async () => (JSON.parse((await cli(['charity', 'rotate', alpha.username, '--json'])).stdout) as { password: string }).password;

    // The first restore, killed once pg_restore had committed, over a database where Alpha was rotated after the backup: its claims file copied aside, then finished.
    const first = await backup('first');
    const rotated1 = await rotate();
    const later = await openStore(database.location);
    for (const email of ['after-1@example.org', 'after-2@example.org']) await later.recordDonation(alpha.id, validDonation(email));
    await later.close();
    const killed = await killedBySignal(almoner(database.url, ['restore', first, '--replace'], { PATH: killing('pg_restore', 'after') }));
    assert.equal(killed.signal, 'SIGKILL');
    const firstLeft = leftBeside(first);
    assert.ok(firstLeft.claims, 'the first restore left a claims file');
    const oldClaims = join(tempDir(), 'claims-of-the-first-restore.json');
    copyFileSync(firstLeft.claims, oldClaims);
    // As an Almoner before 2026-11-30 wrote it (no besideTrail), under the name the restore gave it.
    const { besideTrail, ...olderFormat } = asOneObject(firstLeft.claims);
    assert.ok(besideTrail, 'this version writes besideTrail');
    const olderClaims = join(tempDir(), basename(firstLeft.claims));
    writeFileSync(olderClaims, JSON.stringify(olderFormat));
    // Finished from its own files: what the restore would have said, the donations the backup lacks too (until 2026-11-30 not read from the claims file).
    const finished = await cli(['keep-replaced']);
    assert.match(finished.stdout, /the database that was there held 2 donations and the backup holds 0: the 2 recorded after the backup are not in the restored database, only in \S+\.dump/);

    // The second restore, over a database where Alpha was rotated again after its backup, killed too; its claims file lost (deleted, as it holds donors' details).
    const second = await backup('second');
    const rotated2 = await rotate();
    const killedAgain = await killedBySignal(almoner(database.url, ['restore', second, '--replace'], { PATH: killing('pg_restore', 'after') }));
    assert.equal(killedAgain.signal, 'SIGKILL');
    const secondLeft = leftBeside(second);
    rmSync(secondLeft.claims!);

    // The second restore's trail (its mark names it) with the first's claims file.
    const mixed = await almoner(database.url, ['keep-replaced', oldClaims]);
    assert.equal(mixed.code, 2, mixed.stdout + mixed.stderr);
    assert.match(mixed.stderr, new RegExp(`${oldClaims.replace(/[.]/g, '\\.')} and ${secondLeft.trail.replace(/[.]/g, '\\.')} were left by two restores, not one`));
    // A claims file an older version wrote says no trail: the times the two names end in tell the restores apart (until then taken unchecked).
    const older = await almoner(database.url, ['keep-replaced', olderClaims]);
    assert.equal(older.code, 2, older.stdout + older.stderr);
    assert.match(older.stderr, new RegExp(`${olderClaims.replace(/[.]/g, '\\.')} and ${secondLeft.trail.replace(/[.]/g, '\\.')} were left by two restores, not one: their names end in two times`));

    // The second restore's trail alone finishes it (the rotation not carried, and said).
    const own = await almoner(database.url, ['keep-replaced']);
    assert.equal(own.code, 0, own.stderr);
    assert.match(own.stdout, new RegExp(`${alpha.username} \\(rotate\\): its row is not in what the replaced database left`));
    // Alpha's password is the backup's: the rotation since is said to do again, not carried as the password it replaced.
    const store = await openStore(database.location);
    try {
      const works = async (password: string) => authenticatedCharity(await store.findCredential(alpha.username), password) !== undefined;
      assert.deepEqual([await works(rotated1), await works(rotated2)], [true, false]);
    } finally {
      await store.close();
    }
  } finally {
    await database.drop();
  }
});

test('keep-replaced refuses a claims file whose besideTrail was edited to name no entry: the refusal, not a JSON error (exit 1) [sqlite]', async () => {
  assertBuilt();
  const database = await BACKENDS[0]!.createDatabase();
  try {
    const { cli, charity } = operator(database, 'sqlite');
    await charity('Alpha');
    const dir = tempDir();
    const trail = join(dir, 'b.dump.replaced-trail-2026-11-30T10-00-00-000Z.jsonl');
    const claims = join(dir, 'b.dump.replaced-claims-2026-11-30T10-00-00-000Z.json');
    writeFileSync(trail, (await cli(['audit', '--json'])).stdout);
    writeFileSync(claims, JSON.stringify({ claims: [], rows: [], besideTrail: { entries: 5, last: 'edited' } }));
    const run = await almoner(database.url, ['keep-replaced', trail, claims]);
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(run.stderr, /were left by two restores, not one: the claims file was written beside a trail of 5 entries, and that trail holds 1\./);
  } finally {
    await database.drop();
  }
});
