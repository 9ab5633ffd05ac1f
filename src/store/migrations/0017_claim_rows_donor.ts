import type { Kysely, Migration } from 'kysely';

/**
 * A claim's row kept without its donation (0014) names its donor as an erased donation does
 * (donation-query.ts's donorReference, a hash of the e-mail address): the row holds the donor's
 * names, house and postcode for HMRC, and without it a donor's request found nothing of them. Rows
 * kept before this migration have none (the address went with the replaced database).
 */
export function claimRowsDonor(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('giftaid_claim_rows_without_donation').addColumn('donor', 'text').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('giftaid_claim_rows_without_donation').dropColumn('donor').execute();
    },
  };
}
