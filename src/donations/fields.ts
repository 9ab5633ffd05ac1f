// The donation's fields as data: one table drives validation, the error messages,
// the record's JSON shape and (later) the OpenAPI document.

export type FieldKind =
  | 'text' // optional free text: null, "" or a string
  | 'email'
  | 'ip'
  | 'choice' // one of `choices`, exactly
  | 'amount'
  | 'date' // DD-MM-YYYY
  | 'flag'; // yes/no or true/false, returned as a boolean

export interface FieldSpec {
  readonly name: string;
  /** The field named in words, as Laravel's messages do: donor_email -> "donor email". */
  readonly label: string;
  readonly kind: FieldKind;
  readonly required: boolean;
  readonly maxLength?: number;
  readonly choices?: readonly string[];
  readonly description: string;
  readonly example: string;
}

export const AMOUNT_MIN = '0.01';
/** donation_date in a request: DD-MM-YYYY (and then a real calendar date). */
export const DAY_MONTH_YEAR = /^([0-9]{2})-([0-9]{2})-([0-9]{4})$/;
export const AMOUNT_MAX = '999999999.99';
const TEXT_MAX = 255;

function field<N extends string>(
  name: N,
  kind: FieldKind,
  rest: Omit<FieldSpec, 'name' | 'label' | 'kind'>,
): FieldSpec & { readonly name: N } {
  return { name, label: name.replaceAll('_', ' '), kind, ...rest };
}

export const DONATION_FIELDS = [
  field('donor_first_name', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's first name.", example: 'Jane' }),
  field('donor_last_name', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's last name.", example: 'Doe' }),
  field('donor_email', 'email', { required: true, maxLength: 254, description: "Donor's e-mail address.", example: 'jane.doe@example.com' }),
  field('donor_phone', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's phone number.", example: '07700 900123' }),
  field('donor_address', 'text', { required: false, maxLength: 1000, description: "Donor's street address, house name or number first.", example: '12 High Street' }),
  field('donor_city', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's town or city.", example: 'London' }),
  field('donor_postcode', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's postcode.", example: 'SW1A 1AA' }),
  field('donor_ip', 'ip', { required: false, maxLength: TEXT_MAX, description: "Donor's IPv4 or IPv6 address; an empty string is stored and returned as null.", example: '203.0.113.7' }),
  field('gift_aid', 'choice', { required: true, choices: ['yes', 'no'], description: 'Whether the donor made a Gift Aid declaration.', example: 'yes' }),
  field('amount', 'amount', { required: true, description: `Amount in plain decimal notation, at most two decimals, from ${AMOUNT_MIN} to ${AMOUNT_MAX}; a string is echoed exactly as sent.`, example: '25.00' }),
  field('payment_method', 'text', { required: false, maxLength: TEXT_MAX, description: 'How the donation was paid, for example `cash` or `card`.', example: 'cash' }),
  field('payment_confirmation_number', 'text', { required: false, maxLength: TEXT_MAX, description: "The payment provider's reference; returned as given.", example: 'PAY-123456' }),
  field('donation_type', 'choice', { required: true, choices: ['one-time', 'recurring', 'renewal'], description: 'Kind of donation.', example: 'one-time' }),
  field('donation_date', 'date', { required: false, description: 'Day of the donation as DD-MM-YYYY; returned as midnight UTC of that day. Omitted: the moment it was recorded.', example: '25-02-2021' }),
  field('zakat_donation', 'flag', { required: false, description: '`yes`/`no` or true/false; returned as a boolean; omitted means false.', example: 'yes' }),
] as const satisfies readonly FieldSpec[];

export type DonationFieldName = (typeof DONATION_FIELDS)[number]['name'];
