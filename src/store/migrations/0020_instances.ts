import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

/**
 * PostgreSQL: a row for each server process that runs on the database, refreshed while it runs
 * (store/instances.ts), which a restore reads to refuse while servers run. Its sessions cannot tell
 * it so behind a transaction pooler. `if not exists`: a restore of a backup from before this
 * migration leaves the table in place (backup.ts), and the migration runs again as the restored
 * database is opened. SQLite has none: a restore sees its servers by the file's lock.
 */
export function instances(dialect: DatabaseLocation['dialect']): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'postgres') return;
      await sql`create table if not exists almoner_instances (
        id text primary key,
        host text not null,
        pid integer not null,
        started_at timestamptz not null default now(),
        seen_at timestamptz not null default now(),
        every_ms integer not null
      )`.execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') await sql`drop table if exists almoner_instances`.execute(db);
    },
  };
}
