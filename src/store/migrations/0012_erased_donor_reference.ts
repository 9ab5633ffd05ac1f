import type { Kysely, Migration } from 'kysely';

/**
 * An erased donation whose donor's details are kept for Gift Aid keeps, while it keeps them, the
 * donor's reference (donation-query.ts's donorReference, a hash of the address): the address itself is
 * erased, and without it a later access request found nothing of what was still held.
 */
export function erasedDonorReference(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('donations').addColumn('erased_donor', 'text').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('donations').dropColumn('erased_donor').execute();
    },
  };
}
