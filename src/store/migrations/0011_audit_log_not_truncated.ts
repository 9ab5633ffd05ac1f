import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

/**
 * PostgreSQL: TRUNCATE empties a table without deleting its rows one by one, so 0007's row
 * triggers never saw it, and `truncate audit_log` emptied the trail. A statement trigger refuses it
 * too. SQLite has no TRUNCATE: a DELETE without WHERE meets 0007's trigger.
 */
export function auditLogNotTruncated(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') {
        await sql`create trigger audit_log_not_truncated before truncate on audit_log for each statement execute function audit_log_append_only()`.execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') await sql`drop trigger audit_log_not_truncated on audit_log`.execute(db);
    },
  };
}
