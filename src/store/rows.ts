// A donation as a row and back, by the field table: yes/no and flags are 0 or 1 in the database
// and booleans everywhere else. Ids and minor units are numbers from both drivers (open.ts has
// PostgreSQL's int8 parsed as one).
import type { Insertable, Selectable } from 'kysely';
import { compiledObject, DONATION_FIELDS, minorUnitsOf, read, type Entry, type NewDonation, type StoredDonation } from '../donations/fields.js';
import type { DonationsTable } from './schema.js';

type Row = Selectable<DonationsTable> | Insertable<DonationsTable>;

/** The row to insert: a donation without a date is dated the moment it is recorded. */
export const toDonationRow = compiledObject<[charityId: number, d: NewDonation, recordedAt: string], Insertable<DonationsTable>>(
  ['charityId', 'd', 'recordedAt'],
  [
    ['charity_id', 'charityId'],
    ...DONATION_FIELDS.flatMap((f): Entry[] => {
      const value = read('d', f.name);
      if (f.kind === 'yes_no' || f.kind === 'flag') return [[f.name, `${value} ? 1 : 0`]];
      if (f.kind === 'date') return [[f.name, `${value} ?? recordedAt`]];
      if (f.kind === 'amount') return [[f.name, value], [minorUnitsOf(f.name), read('d', minorUnitsOf(f.name))]];
      return [[f.name, value]];
    }),
    ['recorded_at', 'recordedAt'],
  ],
);

const storedOf = compiledObject<[row: Row, id: unknown], StoredDonation>(
  ['row', 'id'],
  [
    ['id', 'Number(id)'],
    ['charity_id', `Number(${read('row', 'charity_id')})`],
    ...DONATION_FIELDS.flatMap((f): Entry[] => {
      const value = read('row', f.name);
      if (f.kind === 'yes_no' || f.kind === 'flag') return [[f.name, `Boolean(${value})`]];
      if (f.kind === 'amount') return [[f.name, value], [minorUnitsOf(f.name), `Number(${read('row', minorUnitsOf(f.name))})`]];
      return [[f.name, value]];
    }),
    ['recorded_at', read('row', 'recorded_at')],
  ],
);

/** A stored donation from its row; `id` for a row just inserted, whose id came back on its own. */
export function toStoredDonation(row: Row, id = row.id): StoredDonation {
  return storedOf(row, id);
}
