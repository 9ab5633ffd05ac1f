// A PostgreSQL restore whose own session is terminated (pg_terminate_backend, the database
// restarted) as pg_restore runs: its mark is removed through a new session, so the database is not
// left refused. Before 2026-12-02 (a review) the restore said only node-postgres's `Client has
// encountered a connection error and is not queryable` (exit 1) and left its mark, whether
// pg_restore had rolled back (nothing replaced: every command then refused until keep-replaced) or
// committed (the restore done but for the mark). Without the new session (unmarkFrom in
// src/cli/backup.ts), both tests fail on the mark left.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

/** Every other client session of the database the restore works on (the restore's own among them), ended as pg_terminate_backend ends them. */
const TERMINATE = `psql -Atqc "select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'" >/dev/null`;

/**
 * A pg_restore in front of the real one: its restore (--single-transaction) ends the restore's session, then fails without
 * restoring (`before`) or restores (`after`). Its reading of the archive (--list) is the real one's. It reaches the database
 * by the environment the restore gives pg_restore (PGHOST, PGDATABASE, …), as psql reads it too.
 */
function terminatingPgRestore(when: 'before' | 'after'): string {
  const shim = tempDir();
  const real = execFileSync('sh', ['-c', 'command -v pg_restore'], { encoding: 'utf8' }).trim();
  const restore = when === 'before' ? `${TERMINATE}; echo 'pg_restore: error: connection to server lost' >&2; exit 1` : `"${real}" "$@" || exit $?; ${TERMINATE}; exit 0`;
  writeFileSync(join(shim, 'pg_restore'), `#!/bin/sh\ncase " $* " in *" --single-transaction "*) ${restore};; esac\nexec "${real}" "$@"\n`, { mode: 0o755 });
  return `${shim}:${process.env.PATH}`;
}

async function marked(database: TestDatabase): Promise<boolean> {
  return (await queryPostgres<{ t: string | null }>(database.url, "select to_regclass('almoner_restoring')::text as t"))[0]!.t !== null;
}

describe('a PostgreSQL restore whose own session is terminated', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  for (const when of ['before', 'after'] as const) {
    test(when === 'before' ? 'as pg_restore fails, replacing nothing: exit 1, the database unmarked and as it was' : 'once pg_restore has put the backup in place: the restore finishes, exit 0, the database unmarked', async () => {
      assertBuilt();
      const database = await postgres!.createDatabase();
      try {
        assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'In The Backup', '--email', 'b@example.org'])).code, 0);
        const file = join(tempDir(), 'backup.dump');
        execFileSync('pg_dump', ['--format=custom', `--file=${file}`, database.url]);
        assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'After The Backup', '--email', 'a@example.org'])).code, 0);

        const restore = await almoner(database.url, ['restore', file, '--replace'], { PATH: terminatingPgRestore(when) });
        assert.equal(restore.code, when === 'before' ? 1 : 0, restore.stderr + restore.stdout);
        if (when === 'after') assert.match(restore.stdout, /^restored /m);
        assert.doesNotMatch(restore.stderr, /not queryable/);
        assert.equal(await marked(database), false, `the database is left marked: ${restore.stderr}`);
        const audit = await almoner(database.url, ['audit', '--json']);
        assert.equal(audit.code, 0, audit.stderr); // not refused: no mark
        // The restore recorded in the trail if it replaced the database (its own trail then the backup's), and not if it did not.
        const actions = audit.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
        assert.equal(actions.includes('restore'), when === 'after', actions.join(', '));
      } finally {
        await database.drop();
      }
    });
  }
});
