// What a donation is once validated, once stored, and as the API returns it.

export type DonationType = 'one-time' | 'recurring' | 'renewal';

/** A donation that passed validation, normalised and ready to store. */
export interface NewDonation {
  donor_first_name: string | null;
  donor_last_name: string | null;
  donor_email: string;
  donor_phone: string | null;
  donor_address: string | null;
  donor_city: string | null;
  donor_postcode: string | null;
  donor_ip: string | null;
  gift_aid: boolean;
  /** Exactly as the charity sent it (a JSON number becomes its shortest decimal string). */
  amount: string;
  /** The same amount in pence (minor units): exact, never a float. */
  amount_minor: number;
  payment_method: string | null;
  payment_confirmation_number: string | null;
  donation_type: DonationType;
  /** Midnight UTC of the given day, or null for "the moment it is recorded". */
  donation_date: string | null;
  zakat_donation: boolean;
}

export interface StoredDonation extends Omit<NewDonation, 'donation_date'> {
  id: number;
  charity_id: number;
  donation_date: string;
  recorded_at: string;
}

/** The donation record of the interface: 16 fields, in the interface's order. */
export interface DonationRecord {
  id: number;
  donor_first_name: string | null;
  donor_last_name: string | null;
  donor_email: string;
  donor_phone: string | null;
  donor_address: string | null;
  donor_city: string | null;
  donor_postcode: string | null;
  donor_ip: string | null;
  gift_aid: 'yes' | 'no';
  amount: string;
  payment_method: string | null;
  payment_confirmation_number: string | null;
  donation_type: DonationType;
  donation_date: string;
  zakat_donation: boolean;
}

/** The one place where a stored donation becomes the JSON record. */
export function toDonationRecord(d: StoredDonation): DonationRecord {
  return {
    id: d.id,
    donor_first_name: d.donor_first_name,
    donor_last_name: d.donor_last_name,
    donor_email: d.donor_email,
    donor_phone: d.donor_phone,
    donor_address: d.donor_address,
    donor_city: d.donor_city,
    donor_postcode: d.donor_postcode,
    donor_ip: d.donor_ip,
    gift_aid: d.gift_aid ? 'yes' : 'no',
    amount: d.amount,
    payment_method: d.payment_method,
    payment_confirmation_number: d.payment_confirmation_number,
    donation_type: d.donation_type,
    donation_date: d.donation_date,
    zakat_donation: d.zakat_donation,
  };
}
