import { sql, type Kysely, type Migration } from 'kysely';

/**
 * A donation's erasure: when its personal data was erased (erased_at), and, if some was kept for
 * Gift Aid, the last day it must be kept (erase_after, YYYY-MM-DD): retention erases it after that.
 */
export function erasure(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('donations').addColumn('erased_at', 'text').execute();
      await db.schema.alterTable('donations').addColumn('erase_after', 'text').execute();
      // Partial: only the few marked donations are in it, so a create pays nothing for it.
      await db.schema.createIndex('donations_erase_after').on('donations').column('erase_after').where(sql.ref('erase_after'), 'is not', null).execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('donations_erase_after').execute();
      await db.schema.alterTable('donations').dropColumn('erase_after').execute();
      await db.schema.alterTable('donations').dropColumn('erased_at').execute();
    },
  };
}
