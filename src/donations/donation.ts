// What a donation is once validated, once stored, and as the API returns it: the types are derived
// from the field table (fields.ts); this module turns a stored donation into the record.
import { DONATION_FIELDS, objectsWithKeys, type DonationRecord, type StoredDonation } from './fields.js';

export type { DonationInput, DonationRecord, NewDonation, StoredDonation } from './fields.js';
export type DonationType = StoredDonation['donation_type'];

const newRecord = objectsWithKeys(['id', ...DONATION_FIELDS.map((f) => f.name)]);

/** The one place where a stored donation becomes the JSON record: `id`, then the fields in order. */
export function toDonationRecord(d: StoredDonation): DonationRecord {
  const record = newRecord();
  record.id = d.id;
  for (const f of DONATION_FIELDS) {
    const value = d[f.name];
    record[f.name] = f.kind === 'yes_no' ? (value ? 'yes' : 'no') : value;
  }
  return record as DonationRecord;
}
