import type { Kysely, Migration } from 'kysely';
import { giftAidKeptUntil } from '../../donations/erasure.js';
import { donationDay } from '../../giftaid/schedule.js';

/**
 * Gift Aid data kept after an erasure is kept seven years from the donation's day, where it was
 * six years from the end of the tax year: for a charity whose accounting period ends after 5 April,
 * that ended before HMRC's six years after the period (donations/erasure.ts). Every donation still
 * keeping data gets the new, later day; none is brought forward. Down leaves the later days: keeping
 * longer than the old rule breaks nothing, and erasing earlier could break the law.
 */
export function giftAidKeptSevenYears(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      const kept: Array<{ id: number | string; donation_date: string; erase_after: string }> = await db
        .selectFrom('donations')
        .select(['id', 'donation_date', 'erase_after'])
        .where('erase_after', 'is not', null)
        .execute();
      for (const d of kept) {
        const until = giftAidKeptUntil(donationDay(d.donation_date));
        if (until > d.erase_after) await db.updateTable('donations').set({ erase_after: until }).where('id', '=', d.id).execute();
      }
    },
    async down(): Promise<void> {},
  };
}
