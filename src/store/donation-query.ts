// The donations with their charity's username, filtered: what an export, a donor's export and an
// erasure read. One statement of the filters, so the three always pick the same donations.
import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { domainToASCII } from 'node:url';
import { foldEmail, foldEmailCase } from '../donations/donation.js';
import type { Database } from './schema.js';

export interface DonationFilter {
  /** The charity's username. */
  charity?: string;
  /** Inclusive bounds on donation_date, in the stored timestamp format. */
  from?: string;
  to?: string;
  /** Only this donor's donations: the e-mail address as foldEmail folds it (in any case, in any Unicode form, its domain in either form). */
  donorEmail?: string;
}


/**
 * How a donor is named without their personal data (in the audit trail, and on their donations
 * erased but kept for Gift Aid): a SHA-256 of the e-mail address folded, cut short. Whoever has
 * the address can find its entries; the trail alone cannot say whose they are.
 */
export function donorReference(email: string): string {
  return referenceOf(foldEmail(email));
}

/**
 * Every reference this donor may be named by: donorReference's, and those made before 2026-11-29,
 * when a domain's ASCII form (`xn--bcher-kva.de`) was not read as its name (`bücher.de`), of the
 * address as given and with its domain in ASCII. What finds a donor's erased or kept rows.
 */
export function donorReferences(email: string): Set<string> {
  const references = new Set([donorReference(email), referenceOf(foldEmailCase(email))]);
  const at = email.lastIndexOf('@');
  const ascii = at < 0 ? '' : domainToASCII(email.slice(at + 1));
  if (ascii !== '') references.add(referenceOf(foldEmailCase(`${email.slice(0, at + 1)}${ascii}`)));
  return references;
}

const referenceOf = (folded: string): string => `donor ${createHash('sha256').update(folded).digest('hex').slice(0, 16)}`;

/**
 * The query, unordered and unrun: within `db` (a transaction, say). A donor's donations are looked
 * up first (donorDonations), as their addresses are folded here, not by the database.
 */
export async function donationsWithCharity(db: Kysely<Database>, filter: DonationFilter = {}) {
  let q = db.selectFrom('donations').innerJoin('charities', 'charities.id', 'donations.charity_id').selectAll('donations').select('charities.username as charity');
  if (filter.charity !== undefined) q = q.where('charities.username', '=', filter.charity);
  if (filter.from !== undefined) q = q.where('donations.donation_date', '>=', filter.from);
  if (filter.to !== undefined) q = q.where('donations.donation_date', '<=', filter.to);
  if (filter.donorEmail !== undefined) {
    const ids = await donorDonations(db, filter.donorEmail);
    q = ids.length > 0 ? q.where('donations.id', 'in', ids) : q.where(sql<boolean>`1 = 0`);
  }
  return q;
}

/**
 * The ids of the donations recorded with this address, folded alike (foldEmail), and of those
 * erased on its donor's request whose details are still kept for Gift Aid (their address is gone,
 * their reference kept: store/donors.ts): every address is read, as donors' requests are rare.
 */
async function donorDonations(db: Kysely<Database>, email: string): Promise<number[]> {
  const wanted = foldEmail(email);
  const references = donorReferences(email);
  const ids: number[] = [];
  for await (const row of db.selectFrom('donations').select(['id', 'donor_email', 'erased_donor']).stream(1000)) {
    if (foldEmail(row.donor_email) === wanted || (row.erased_donor !== null && references.has(row.erased_donor))) ids.push(Number(row.id));
  }
  return ids;
}
