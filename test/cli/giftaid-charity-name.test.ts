// A charity's name goes into every schedule's title and the lines above it. A character XML cannot
// hold there (a control character pasted with the name) made every claim of that charity fail after
// it was recorded: its files could never be written, by `giftaid claim` or by `giftaid files`, and
// its donations were held by a claim with no file. `charity create` refuses such a name since
// 2026-11-29 (test/cli/charity.test.ts); a charity signed up with one before is made here directly.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { hmrcProblems, readOds } from '../support/ods.js';

const SQLITE = BACKENDS.find((b) => b.name === 'sqlite')!;

function todayInUk(): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
}

for (const name of ['Helping\u000bHands', 'Helping Hands\u001b', 'Helping \uFFFE Hands']) {
  test(`a charity named ${JSON.stringify(name)} can claim: its claim's files are written, and pass HMRC's checker`, async () => {
    assertBuilt();
    const database = await SQLITE.createDatabase();
    try {
      const store = await openStore(parseDatabaseUrl(database.url));
      const { id, username } = await signUpCharity(store, { name, email: 'h@example.org' })
        .then(({ charity }) => charity)
        .finally(() => store.close());
      await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org' }], 30);
      const out = join(tempDir(), 'claims');
      const run = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out, '--json']);
      assert.equal(run.code, 0, run.stderr);
      const file = join(out, 'claim-1-1.ods');
      assert.ok(existsSync(file), run.stdout);
      assert.deepEqual(hmrcProblems(await readOds(file), todayInUk()), []);
      // Written again, byte for byte, as any claim's.
      const again = join(tempDir(), 'again');
      const files = await almoner(database.url, ['giftaid', 'files', '1', '--out', again]);
      assert.equal(files.code, 0, files.stderr);
      const preview = await almoner(database.url, ['giftaid', 'schedule', '--charity', username, '--from', '2000-01-01', '--to', todayInUk(), '--out', join(tempDir(), 'preview')]);
      assert.equal(preview.code, 0, preview.stderr);
    } finally {
      await database.drop();
    }
  });
}
