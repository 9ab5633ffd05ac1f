import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

/**
 * SQLite: a number of the database's own in its header (its application_id, which VACUUM INTO
 * copies), so that its backups (and a database restored from them) bear it too, and
 * `backup --prune-older-than` deletes only the backups of the database it backs up. Until
 * 2026-12-01 it deleted those of every Almoner database in the folder, all bearing the same mark
 * (store/open.ts's BACKUP_MARK). Random, never 0, which a backup from before this migration bears.
 * PostgreSQL's backups are told by the database's own audit trail instead (cli/backup-prune.ts).
 */
export function databaseIdentity(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'sqlite') return;
      const { rows } = await sql<{ application_id: number }>`pragma application_id`.execute(db);
      if (rows[0]?.application_id !== 0) return; // one already: a database restored from a backup that bears it
      let id = 0;
      while (id === 0) id = randomBytes(4).readInt32BE(0);
      await sql.raw(`pragma application_id = ${id}`).execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'sqlite') await sql`pragma application_id = 0`.execute(db);
    },
  };
}
