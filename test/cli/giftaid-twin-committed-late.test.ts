// One gift recorded twice, the first record committed after the second: on PostgreSQL a create takes
// its donation's id before its commit, so an integration's original request, held up after taking
// its id (a lock, a slow instance), commits after the retry it sent meanwhile under no key. A claim
// prepared in between took the retry; the next took the original, the lower id, as "the first record"
// of the gift: one gift in two claims at HMRC, until a review of 2026-11-30.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import { startTestApp } from '../support/app.js';
import { BACKENDS, tempDir, waitingFor } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

describe('a gift recorded twice whose first record commits after a claim took the second', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  test('the next claim leaves the first record out as the same gift, rather than claiming the gift again; the first claim, rejected, is not reopened beside the claim of the original', async () => {
    assertBuilt();
    const ctx = await startTestApp(postgres);
    const locker = new pg.Client({ connectionString: ctx.databaseUrl });
    try {
      const base = await ctx.baseUrl();
      const gift = {
        donor_first_name: 'Rita', donor_last_name: 'Retry', donor_email: 'rita@example.com', donor_address: '7 Elm Road', donor_city: 'Leeds',
        donor_postcode: 'LS1 4AP', gift_aid: 'yes', amount: '50.00', donation_type: 'one-time', donation_date: '20-11-2026',
      };
      const create = (key?: string) =>
        fetch(`${base}/api/v1/donation/create`, {
          method: 'POST',
          headers: { authorization: ctx.charity.authorization, 'content-type': 'application/json', accept: 'application/json', ...(key && { 'idempotency-key': key }) },
          body: JSON.stringify(gift),
        }).then(async (r) => ({ status: r.status, id: ((await r.json()) as { data: { id: number } }).data?.id }));

      // The original, keyed, held up at its commit (after taking its id) by a lock on the keys' table.
      await locker.connect();
      await locker.query('begin');
      await locker.query('lock table idempotency_keys in exclusive mode');
      const original = create('original-1');
      await waitingFor(ctx.databaseUrl, '', 3000); // the original, at its commit
      // The integration's retry, sent without a key, is stored at once, and claimed.
      const retry = await create();
      assert.equal(retry.status, 200);
      const cli = async (args: string[]) => {
        const run = await almoner(ctx.databaseUrl, args);
        assert.equal(run.code, 0, run.stderr);
        return JSON.parse(run.stdout) as { claim: number | null; donations: number; needs_attention: string | null };
      };
      const first = await cli(['giftaid', 'claim', '--charity', ctx.charity.username, '--out', tempDir(), '--to', '2026-11-29', '--json']);
      assert.deepEqual([first.claim, first.donations], [1, 1]);

      await locker.query('rollback');
      const stored = await original;
      assert.equal(stored.status, 200);
      assert.ok(stored.id! < retry.id!, `the original (${stored.id}) has the lower id, the retry ${retry.id}`);

      const out = tempDir();
      const second = await cli(['giftaid', 'claim', '--charity', ctx.charity.username, '--out', out, '--to', '2026-11-29', '--json']);
      assert.deepEqual([second.claim, second.donations], [null, 0], 'the gift is in claim 1 already');
      const attention = readFileSync(join(out, `needs-attention-${ctx.charity.username}.csv`), 'utf8');
      assert.match(attention, new RegExp(`\\n${stored.id},Rita,Retry,.*the same donor \\(names, house and postcode\\), day and amount as donation ${retry.id}\\b`));

      // Claim 1 rejected (by mistake, say): the next claim takes the original, and sets the retry aside.
      assert.equal((await almoner(ctx.databaseUrl, ['giftaid', 'mark', '1', 'rejected'])).code, 0);
      const third = await cli(['giftaid', 'claim', '--charity', ctx.charity.username, '--out', tempDir(), '--to', '2026-11-29', '--json']);
      assert.deepEqual([third.claim, third.donations], [2, 1]);
      // Reopened, claim 1 would send the gift to HMRC a second time, beside claim 2: refused, nothing changed.
      const reopen = await almoner(ctx.databaseUrl, ['giftaid', 'reopen', '1']);
      assert.equal(reopen.code, 2, reopen.stdout + reopen.stderr);
      assert.match(reopen.stderr, /claim 1 cannot be reopened: its donations, or other records of the same gifts, are in claim 2 now/);
      const claims = await almoner(ctx.databaseUrl, ['giftaid', 'claims', '--charity', ctx.charity.username, '--json']);
      assert.deepEqual((JSON.parse(claims.stdout) as Array<{ id: number; status: string }>).map((c) => [c.id, c.status]).sort(), [[1, 'rejected'], [2, 'prepared']]);
    } finally {
      await locker.end().catch(() => {});
      await ctx.close();
    }
  });
});
