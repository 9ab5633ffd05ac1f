// A PostgreSQL connection opened while a restore is making its mark (refuseMarkedConnection): the
// restore creates the mark's table, then writes the mark into it, so a server connecting between the
// two found the table empty ("the mark cannot be read"), an error that was not the restore's code,
// and its request got a 500 ("request failed", logged as an error) instead of the 503 it gets a
// moment later. Whatever the mark says, or fails to, a request is told the database is unavailable.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exampleDonation, startTestApp } from '../support/app.js';
import { BACKENDS, queryPostgres } from '../support/backends.js';
import { RESTORING_TABLE } from '../../src/store/restoring.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');

test("PostgreSQL: a server reconnecting while a restore makes its mark (the mark's table made, the mark not yet in it) answers 503, not 500; once the mark is gone, 200", { skip: !POSTGRES && 'needs TEST_DATABASE_URL' }, async () => {
  const t = await startTestApp(POSTGRES!);
  try {
    const create = () =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization: t.charity.authorization, 'content-type': 'application/json' },
        payload: JSON.stringify(exampleDonation()),
      });
    assert.equal((await create()).statusCode, 200);
    // The restore's first step (restoring.ts, mark), then the server's sessions dropped: it must connect again.
    await queryPostgres(t.databaseUrl, `create table ${RESTORING_TABLE} (what text not null)`);
    await queryPostgres(t.databaseUrl, 'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
    for (let i = 0; i < 3; i++) {
      const during = await create();
      assert.equal(during.statusCode, 503, during.body);
    }
    assert.equal((await t.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 503);
    await queryPostgres(t.databaseUrl, `drop table ${RESTORING_TABLE}`);
    const after = await create();
    assert.equal(after.statusCode, 200, after.body);
    assert.equal((await t.donations()).length, 2, 'the one before and the one after: none while marked');
  } finally {
    await t.close();
  }
});
