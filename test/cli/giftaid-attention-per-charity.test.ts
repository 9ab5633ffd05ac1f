// Several charities' Gift Aid runs into one folder (a month's folder for every charity, as the README's
// claims/2026-11): each charity's list of the donations left out is its own. Until 2026-11-30 a preview,
// or a claim that claimed nothing, wrote needs-attention.csv whoever the charity was, so the next
// charity's run replaced the list with its own donors (handed on as the first charity's), or removed it
// when it had nothing left out (a tenants review).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

for (const backend of BACKENDS) {
  describe(`needs-attention lists of several charities in one folder (${backend.name})`, () => {
    test("one charity's run neither replaces nor removes another charity's list of donations left out", async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const charities = [];
        for (const name of ['First', 'Second', 'Third']) {
          const made = await almoner(database.url, ['charity', 'create', '--name', name, '--email', `${name.toLowerCase()}@example.org`, '--json']);
          assert.equal(made.code, 0, made.stderr);
          charities.push(JSON.parse(made.stdout) as { id: number; username: string });
        }
        const [first, second, third] = charities as [(typeof charities)[0], (typeof charities)[0], (typeof charities)[0]];
        // No postcode: left out, needing attention. The third charity has nothing left out.
        await recordGiftAided(database.url, first.id, [{ donor_email: 'ann@example.org', donor_postcode: '' }]);
        await recordGiftAided(database.url, second.id, [{ donor_email: 'bob@example.org', donor_postcode: '' }]);
        const out = tempDir();
        const claimed = await almoner(database.url, ['giftaid', 'claim', '--charity', first.username, '--out', out, '--json']);
        assert.equal(claimed.code, 0, claimed.stderr);
        const firstList = (JSON.parse(claimed.stdout) as { claim: number | null; needs_attention: string }).needs_attention;
        const previewed = await almoner(database.url, ['giftaid', 'schedule', '--charity', second.username, '--from', '2000-01-01', '--to', '2099-12-31', '--out', out, '--json']);
        assert.equal(previewed.code, 0, previewed.stderr);
        const secondList = (JSON.parse(previewed.stdout) as { needs_attention: string }).needs_attention;
        const nothing = await almoner(database.url, ['giftaid', 'claim', '--charity', third.username, '--out', out, '--json']);
        assert.equal(nothing.code, 0, nothing.stderr);
        assert.equal((JSON.parse(nothing.stdout) as { needs_attention: string | null }).needs_attention, null);

        assert.ok(existsSync(firstList), `${firstList}, the first charity's list, is still there`);
        const firstText = readFileSync(firstList, 'utf8');
        assert.match(firstText, /ann@example\.org/);
        assert.doesNotMatch(firstText, /bob@example\.org/, "the first charity's list holds no donor of the second");
        const secondText = readFileSync(secondList, 'utf8');
        assert.match(secondText, /bob@example\.org/);
        assert.doesNotMatch(secondText, /ann@example\.org/);
      } finally {
        await database.drop();
      }
    });
  });
}
