import type { Kysely, Migration } from 'kysely';
import { giftAidKeptUntil, retentionDay } from '../../donations/erasure.js';
import { houseNameOrNumber } from '../../giftaid/schedule.js';

/**
 * What a donor's erasure kept for Gift Aid, as 2026-11-29's rules keep it: a house name kept run on
 * into its street with no comma cut before the street (the reading before kept "Hillview Farm Long
 * Road Ambridge" whole, street and village, seven years), and the day it is kept until
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
        // Only cut, never rewritten: a kept value is what an older reading left of the address, and
        // read again as an address it could lose its building ("Flat 3, Ivy Court 5 Elm Road" would be
        // "Flat 3") or its name ("Lord Nelson House"): a review of the first version found both.
        const shorter = d.donor_address === null || d.donor_address.includes(',') ? '' : houseNameOrNumber(d.donor_address);
        const house = shorter !== '' && d.donor_address!.startsWith(shorter) ? shorter : d.donor_address;
        const until = giftAidKeptUntil(retentionDay(d));
        const set = { ...(house !== d.donor_address && { donor_address: house }), ...(until < d.erase_after && { erase_after: until }) };
        if (Object.keys(set).length > 0) await db.updateTable('donations').set(set).where('id', '=', d.id).execute();
      }
    },
    async down(): Promise<void> {},
  };
}
