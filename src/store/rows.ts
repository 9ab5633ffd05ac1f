// Stored rows as the rest of Almoner sees them: flags as booleans, int8 as numbers.
import type { Selectable } from 'kysely';
import type { StoredDonation } from '../donations/donation.js';
import type { DonationsTable } from './schema.js';

export function toStoredDonation(row: Selectable<DonationsTable>): StoredDonation {
  return {
    id: Number(row.id),
    charity_id: Number(row.charity_id),
    donor_first_name: row.donor_first_name,
    donor_last_name: row.donor_last_name,
    donor_email: row.donor_email,
    donor_phone: row.donor_phone,
    donor_address: row.donor_address,
    donor_city: row.donor_city,
    donor_postcode: row.donor_postcode,
    donor_ip: row.donor_ip,
    gift_aid: Boolean(row.gift_aid),
    amount: row.amount,
    amount_minor: Number(row.amount_minor),
    payment_method: row.payment_method,
    payment_confirmation_number: row.payment_confirmation_number,
    donation_type: row.donation_type as StoredDonation['donation_type'],
    donation_date: row.donation_date,
    zakat_donation: Boolean(row.zakat_donation),
    recorded_at: row.recorded_at,
  };
}
