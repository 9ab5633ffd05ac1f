import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

/**
 * PostgreSQL: what each row of almoner_instances (0020) is, `server` or the command's name
 * (`giftaid claim`): since 2026-12-01 the commands keep a row too while they run, so that a restore
 * sees one that connects through a pooler, and names it. Null in a row an older version wrote (a server's).
 */
export function instancesSayWhat(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') await sql`alter table almoner_instances add column if not exists what text`.execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') await sql`alter table almoner_instances drop column if exists what`.execute(db);
    },
  };
}
