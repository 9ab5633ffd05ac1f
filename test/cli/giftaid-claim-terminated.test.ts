// A `giftaid claim` on PostgreSQL whose connection ends as it reads the donations (between two of
// its cursor's batches): exit 1 saying that the connection ended before every row was read, no claim
// recorded. Its cursor's next batch, asked for on a connection already closed, failed with `write
// EPIPE` (or `Connection terminated unexpectedly`), which the command said as its own error,
// pointing the operator at its output (a review, 2026-12-02: 8 of 8 claims whose session was
// terminated so). And nothing more is sent on a connection known to be dead: a transaction's
// ROLLBACK on it failed too, and Kysely threw that error in place of the one that said why.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, queryPostgres, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { proxyFor } from '../support/proxy.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

test('giftaid claim whose connection ends between two batches of its donations: exit 1 saying so, not "write EPIPE", and no claim [postgres]', { skip: !postgres && 'TEST_DATABASE_URL is not set' }, async () => {
  assertBuilt();
  const database = await postgres!.createDatabase();
  const { proxy, url } = await proxyFor(database.url);
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Cut Short', '--email', 'cs@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { id: charityId, username } = JSON.parse(made.stdout) as { id: number; username: string };
    await recordGiftAided(database.url, charityId, Array.from({ length: 600 }, (_, n) => ({ donor_email: `donor${n}@example.com` })));
    // The cursor's first batch (500 of 600) is answered, then its connection is reset: its next read's write fails (EPIPE), and the transaction is rolled back.
    proxy.terminateAtMessage('from "donations"', 'PortalSuspended', { reset: true });
    const claimed = await almoner(url, ['giftaid', 'claim', '--charity', username, '--out', tempDir()], {}, { timeoutMs: 15_000 });
    assert.equal(proxy.terminated, 1, "the proxy ended the claim's connection");
    assert.equal(claimed.code, 1, claimed.stderr);
    assert.match(claimed.stderr, /^almoner: the connection to the database ended before every row was read$/m);
    assert.doesNotMatch(claimed.stderr, /EPIPE|ECONNRESET|not queryable/);
    assert.deepEqual(await queryPostgres(database.url, 'select id from giftaid_claims'), [], 'no claim recorded');
  } finally {
    await proxy.close();
    await database.drop();
  }
});
