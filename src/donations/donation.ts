// What a donation is once validated, once stored, and as the API returns it: the types are derived
// from the field table (fields.ts); this module turns a stored donation into the record.
import { compiledObject, DONATION_FIELDS, read, type DonationRecord, type Entry, type StoredDonation } from './fields.js';

export type { DonationInput, DonationRecord, NewDonation, StoredDonation } from './fields.js';
export type DonationType = StoredDonation['donation_type'];

/** The one place where a stored donation becomes the JSON record: `id`, then the fields in order. */
export const toDonationRecord = compiledObject<[d: StoredDonation], DonationRecord>(
  ['d'],
  [['id', read('d', 'id')], ...DONATION_FIELDS.map((f): Entry => [f.name, f.kind === 'yes_no' ? `${read('d', f.name)} ? "yes" : "no"` : read('d', f.name)])],
);

/**
 * An e-mail address as a person means it: Unicode's composed form (NFC: an "ë" typed as one
 * character or as "e" and a combining mark is the same), then lower case as JavaScript folds it.
 * The same on both databases: SQL's lower() follows PostgreSQL's locale (a C locale folds A to Z
 * only) and folds some letters unlike JavaScript, and neither composes.
 */
export const foldEmail = (email: string): string => email.normalize('NFC').toLowerCase();
