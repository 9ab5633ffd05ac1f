import type { Kysely, Migration } from 'kysely';
import { giftAidKeptUntil, retentionDay } from '../../donations/erasure.js';
import { houseNameOrNumber } from '../../giftaid/schedule.js';

/**
 * What a donor's erasure kept for Gift Aid, as 2026-11-29's rules keep it: the house read again from
 * the address kept (the reading before took a house name run on into its street whole, "Hillview
 * Farm Long Road Ambridge", and kept street and village seven years), and the day it is kept until
 * counted, for a donation dated more than a year after it was recorded, from a year after (2062
 * typed for 2026 was kept until 2069, 31-12-9999 for ever). Only those days are brought forward;
 * every other is as 0010 set it. Down leaves it: what is erased cannot come back.
 */
export function keptHouseReadAgain(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      const kept: Array<{ id: number | string; donation_date: string; recorded_at: string; donor_address: string | null; erase_after: string }> = await db
        .selectFrom('donations')
        .select(['id', 'donation_date', 'recorded_at', 'donor_address', 'erase_after'])
        .where('erase_after', 'is not', null)
        .execute();
      for (const d of kept) {
        const house = d.donor_address === null ? null : houseNameOrNumber(d.donor_address) || null;
        const until = giftAidKeptUntil(retentionDay(d));
        const set = { ...(house !== d.donor_address && { donor_address: house }), ...(until < d.erase_after && { erase_after: until }) };
        if (Object.keys(set).length > 0) await db.updateTable('donations').set(set).where('id', '=', d.id).execute();
      }
    },
    async down(): Promise<void> {},
  };
}
