// A donation as a row and back, by the field table: yes/no and flags are 0 or 1 in the database
// and booleans everywhere else. Ids and minor units are numbers from both drivers (open.ts has
// PostgreSQL's int8 parsed as one).
import type { Insertable, Selectable } from 'kysely';
import { DONATION_FIELDS, DONATION_KEYS, minorUnitsOf, objectsWithKeys, type NewDonation, type StoredDonation } from '../donations/fields.js';
import type { DonationsTable } from './schema.js';

const newRow = objectsWithKeys(['charity_id', ...DONATION_KEYS, 'recorded_at']);
const newStored = objectsWithKeys(['id', 'charity_id', ...DONATION_KEYS, 'recorded_at']);

/** The row to insert: a donation without a date is dated the moment it is recorded. */
export function toDonationRow(charityId: number, d: NewDonation, recordedAt: string): Insertable<DonationsTable> {
  const row = newRow();
  row.charity_id = charityId;
  for (const f of DONATION_FIELDS) {
    const value = d[f.name];
    if (f.kind === 'yes_no' || f.kind === 'flag') row[f.name] = value ? 1 : 0;
    else if (f.kind === 'date') row[f.name] = value ?? recordedAt;
    else row[f.name] = value;
    if (f.kind === 'amount') row[minorUnitsOf(f.name)] = d[minorUnitsOf(f.name)];
  }
  row.recorded_at = recordedAt;
  return row as Insertable<DonationsTable>;
}

/** A stored donation from its row; `id` for a row just inserted, whose id came back on its own. */
export function toStoredDonation(row: Selectable<DonationsTable> | Insertable<DonationsTable>, id = row.id): StoredDonation {
  const stored = newStored();
  stored.id = Number(id);
  stored.charity_id = Number(row.charity_id);
  for (const f of DONATION_FIELDS) {
    const value = row[f.name];
    stored[f.name] = f.kind === 'yes_no' || f.kind === 'flag' ? Boolean(value) : value;
    if (f.kind === 'amount') stored[minorUnitsOf(f.name)] = Number(row[minorUnitsOf(f.name)]);
  }
  stored.recorded_at = row.recorded_at;
  return stored as StoredDonation;
}
