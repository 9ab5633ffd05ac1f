// The donations with their charity's username, filtered: what an export, a donor's export and an
// erasure read. One statement of the filters, so the three always pick the same donations.
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

export interface DonationFilter {
  /** The charity's username. */
  charity?: string;
  /** Inclusive bounds on donation_date, in the stored timestamp format. */
  from?: string;
  to?: string;
  /** Only this donor's donations: the e-mail address, in any case. */
  donorEmail?: string;
}

/** The query, unordered and unrun: within `db` (a transaction, say). */
export function donationsWithCharity(db: Kysely<Database>, filter: DonationFilter = {}) {
  let q = db.selectFrom('donations').innerJoin('charities', 'charities.id', 'donations.charity_id').selectAll('donations').select('charities.username as charity');
  if (filter.charity !== undefined) q = q.where('charities.username', '=', filter.charity);
  if (filter.from !== undefined) q = q.where('donations.donation_date', '>=', filter.from);
  if (filter.to !== undefined) q = q.where('donations.donation_date', '<=', filter.to);
  // Both sides lowered by the database, so that they are folded alike whatever its rules.
  if (filter.donorEmail !== undefined) q = q.where(sql<string>`lower(donations.donor_email)`, '=', sql<string>`lower(${filter.donorEmail})`);
  return q;
}
