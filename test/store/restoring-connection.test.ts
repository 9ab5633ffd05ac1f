// A PostgreSQL connection opened while a restore is making its mark (refuseMarkedConnection): the
// restore creates the mark's table, then writes the mark into it, so a server connecting between the
// two found the table empty ("the mark cannot be read"), an error that was not the restore's code,
// and its request got a 500 ("request failed", logged as an error) instead of the 503 it gets a
// moment later. Whatever the mark says, or fails to, a request is told the database is unavailable.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { refuseMarkedConnection, RESTORING_CODE, RESTORING_TABLE } from '../../src/store/restoring.js';
import { isDatabaseUnavailable } from '../../src/store/unavailable.js';

/** A connection to a database whose mark's table holds `rows`. */
const marked = (rows: Array<Record<string, unknown>>) => ({
  query: async (text: string) => ({ rows: text.startsWith('select to_regclass') ? [{ t: RESTORING_TABLE }] : rows }),
});

test('a connection to a database whose mark is there but empty (its table made, the mark not yet written) is refused as one being restored: 503', async () => {
  await assert.rejects(refuseMarkedConnection(marked([])), (err: unknown) => {
    assert.ok(err instanceof ConfigError, String(err)); // at start-up: exit 2, with what it says
    assert.match((err as Error).message, /cannot be read/);
    assert.equal((err as NodeJS.ErrnoException).code, RESTORING_CODE);
    assert.ok(isDatabaseUnavailable(err));
    return true;
  });
});

test('a connection to a database with a readable mark is refused as before', async () => {
  const what = { host: 'h', pid: 1, began: '2026-11-29T00:00:00.000Z', from: 'x.dump', left: [], replacing: true };
  await assert.rejects(refuseMarkedConnection(marked([{ what: JSON.stringify(what) }])), (err: unknown) => (err as NodeJS.ErrnoException).code === RESTORING_CODE && isDatabaseUnavailable(err));
});
