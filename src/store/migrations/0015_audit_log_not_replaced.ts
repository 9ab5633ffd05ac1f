import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

/**
 * SQLite: INSERT OR REPLACE (or REPLACE) over an entry's id deletes that entry to make room, and
 * SQLite fires no delete trigger for a row REPLACE deletes (unless recursive triggers are on), so
 * 0007's triggers let `replace into audit_log select ...` rewrite every entry. An insert of an id
 * already there is refused before the replacing begins. PostgreSQL's INSERT ... ON CONFLICT DO
 * UPDATE meets 0007's update trigger already.
 */
export function auditLogNotReplaced(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect === 'sqlite') {
        await sql`create trigger audit_log_no_replace before insert on audit_log when exists (select 1 from audit_log where id = new.id)
          begin select raise(abort, 'audit_log rows are never changed or deleted'); end`.execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'sqlite') await sql`drop trigger audit_log_no_replace`.execute(db);
    },
  };
}
