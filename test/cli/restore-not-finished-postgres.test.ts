// A PostgreSQL restore of a database's own backup that fails once pg_restore has put the backup in place (here the restore's own
// audit entry refused, by a trigger the backup carries; in life a full disk, a lost connection): the
// command says, as on SQLite, that the backup is in place, the restore did not finish, and to run
// keep-replaced, which finishes it. Until a review of 2026-11-30's changes it said only the error.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

async function sql(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

describe('a PostgreSQL restore that fails after pg_restore', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  test('says the backup is in place, the restore did not finish, and to run keep-replaced, which finishes it', async () => {
    assertBuilt();
    const target = await postgres!.createDatabase();
    const source = target; // its own backup: keep-replaced refuses another database's trail (a limit the README states)
    try {
      assert.equal((await almoner(source.url, ['charity', 'create', '--name', 'Half Way', '--email', 'hw@example.org'])).code, 0);
      await sql(
        source.url,
        `create function refuse_restore_entry() returns trigger language plpgsql as $$ begin if new.action = 'restore' then raise exception 'no restore entry today'; end if; return new; end $$;
         create trigger refuse_restore_entry before insert on audit_log for each row execute function refuse_restore_entry();`,
      );
      const file = join(tempDir(), 'source.dump');
      execFileSync('pg_dump', ['--format=custom', `--file=${file}`, source.url]);
      assert.equal((await almoner(target.url, ['charity', 'create', '--name', 'After The Backup', '--email', 'r@example.org'])).code, 0);

      const run = await almoner(target.url, ['restore', file, '--replace']);
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /no restore entry today/);
      assert.match(run.stderr, /the backup is in place at .*, and the database that was there is kept as .*\.dump, but the restore did not finish: .*finish it with bin\/almoner keep-replaced/);

      assert.equal((await almoner(target.url, ['charity', 'list'])).code, 2, 'refused until finished');
      await sql(target.url, 'drop trigger refuse_restore_entry on audit_log');
      const kept = await almoner(target.url, ['keep-replaced']);
      assert.equal(kept.code, 0, kept.stderr);
      const list = await almoner(target.url, ['charity', 'list', '--json']);
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual((JSON.parse(list.stdout) as Array<{ name: string }>).map((c) => c.name).sort(), ['After The Backup', 'Half Way'], 'the backup, and the charity keep-replaced carries over');
    } finally {
      await target.drop();
    }
  });
});
