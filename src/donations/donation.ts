// What a donation is once validated, once stored, and as the API returns it: the types are derived
// from the field table (fields.ts); this module turns a stored donation into the record.
import { domainToUnicode } from 'node:url';
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
 * character or as "e" and a combining mark is the same), then lower case as JavaScript folds it,
 * and a domain written in its ASCII form (`xn--bcher-kva.de`, as a browser's e-mail field sends
 * `bücher.de`) read as the name it spells. The same on both databases: SQL's lower() follows
 * PostgreSQL's locale (a C locale folds A to Z only) and folds some letters unlike JavaScript, and
 * neither composes.
 */
export function foldEmail(email: string): string {
  const folded = foldEmailCase(email);
  const at = folded.lastIndexOf('@');
  if (at < 0 || !PUNYCODE_LABEL.test(folded.slice(at + 1))) return folded;
  const unicode = domainToUnicode(folded.slice(at + 1));
  return unicode === '' ? folded : `${folded.slice(0, at + 1)}${foldEmailCase(unicode)}`;
}

/** A domain label in its ASCII form (RFC 3492's prefix). */
const PUNYCODE_LABEL = /(?:^|\.)xn--/;

/** Case and Unicode form alone: foldEmail before 2026-11-29, which references (donorReference) made then were made of. */
export const foldEmailCase = (email: string): string => email.normalize('NFC').toLowerCase();
