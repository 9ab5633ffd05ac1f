import type { Kysely, Migration } from 'kysely';

/**
 * The donor's reference (0012) for donations erased before it, whose kept Gift Aid details a later
 * access request by the donor's address could not find. Read back from the audit trail: each
 * `donor erase` entry names the donor by reference and counts the donations it kept, and those
 * donations' `erased_at` is the one time its transaction gave them, after the trail's entry before
 * it and no later than its own. Only a match that leaves no doubt is written: one such time among
 * the donations still kept without a reference, held by as many as the entry kept. Erasures that
 * ran at once on PostgreSQL can interleave their times; those are left as they were (README).
 */
export function erasedDonorFromAudit(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      const entries: Array<{ at: string; action: string; target: string; summary: string }> = await db
        .selectFrom('audit_log')
        .select(['at', 'action', 'target', 'summary'])
        .where('action', 'in', ['donor erase', 'retention apply'])
        .orderBy('id')
        .execute();
      let previous = '';
      for (const entry of entries) {
        const since = previous;
        previous = entry.at;
        const kept = entry.action === 'donor erase' ? Number((JSON.parse(entry.summary) as { kept_for_gift_aid?: unknown }).kept_for_gift_aid) : 0;
        if (!(kept > 0)) continue;
        const rows: Array<{ id: number | string; erased_at: string }> = await db
          .selectFrom('donations')
          .select(['id', 'erased_at'])
          .where('erase_after', 'is not', null)
          .where('erased_donor', 'is', null)
          .where('erased_at', '>', since)
          .where('erased_at', '<=', entry.at)
          .execute();
        if (rows.length !== kept || new Set(rows.map((r) => r.erased_at)).size !== 1) continue;
        await db.updateTable('donations').set({ erased_donor: entry.target }).where('id', 'in', rows.map((r) => r.id)).execute();
      }
    },
    async down(): Promise<void> {}, // 0012's down drops the column
  };
}
