import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';
import { identityColumn } from './columns.js';

/**
 * The audit trail: one row per operator action, appended in the same transaction as the change it
 * records. The database itself refuses to change or delete a row (triggers), so nothing in Almoner
 * can, and neither can a mistaken UPDATE by hand.
 */
export function auditLog(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      const { type: idType, define: identity } = identityColumn(dialect);
      await db.schema
        .createTable('audit_log')
        .addColumn('id', idType, identity)
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('os_user', 'text', (c) => c.notNull())
        .addColumn('host', 'text', (c) => c.notNull())
        .addColumn('summary', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute();
      if (dialect === 'sqlite') {
        for (const event of ['update', 'delete']) {
          await sql
            .raw(`create trigger audit_log_no_${event} before ${event} on audit_log begin select raise(abort, 'audit_log rows are never changed or deleted'); end`)
            .execute(db);
        }
      } else {
        await sql`create function audit_log_append_only() returns trigger language plpgsql as $$
          begin raise exception 'audit_log rows are never changed or deleted'; end $$`.execute(db);
        await sql`create trigger audit_log_append_only before update or delete on audit_log
          for each row execute function audit_log_append_only()`.execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('audit_log').execute();
      if (dialect === 'postgres') await sql`drop function audit_log_append_only()`.execute(db);
    },
  };
}
