// Create Donation: records a donation with Almoner's typed client (almoner/client).
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... npx tsx client-create.ts
//
// Prints the stored record (the donation with its id) as JSON on stdout. Exits non-zero, with the
// server's message (and for a 422 every failing field) on stderr, when it is refused.
//
// almoner/client is not on the npm registry, and the registry's "almoner" is someone else's: never
// `npm install almoner`. Install it from a copy of Almoner your operator gives you, built with
// `npm ci`: `npm install /path/to/almoner` (it links that folder). This file uses top-level
// `await`, so your project must be an ES module: `npm pkg set type=module` (npm init -y makes a
// CommonJS one, where tsx stops: "Top-level await is currently not supported with the "cjs"
// output format"), or name the file .mts. Then `npm install -D tsx` and run it as above.
import { randomUUID } from 'node:crypto';
import { AlmonerClient, AlmonerError, ValidationError, type DonationInput } from 'almoner/client';

const { ALMONER_URL = 'http://127.0.0.1:3000', ALMONER_USERNAME, ALMONER_PASSWORD } = process.env;
if (!ALMONER_USERNAME || !ALMONER_PASSWORD) {
  console.error("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.");
  process.exit(1);
}

const almoner = new AlmonerClient({
  baseUrl: ALMONER_URL,
  username: ALMONER_USERNAME,
  password: ALMONER_PASSWORD,
  timeoutMs: 30_000,
});

// An Idempotency-Key makes a retry safe: the same key and the same donation within 24 hours get the
// first answer again instead of a second donation. Use a new key for each new donation, and the
// same one to retry it (here: run again with IDEMPOTENCY_KEY set to the key printed).
const idempotencyKey = process.env.IDEMPOTENCY_KEY || randomUUID();
console.error(`Idempotency-Key: ${idempotencyKey} (to retry this donation, run again with IDEMPOTENCY_KEY=${idempotencyKey})`);

const donation: DonationInput = {
  donor_first_name: 'Jane',
  donor_last_name: 'Doe',
  donor_email: 'jane.doe@example.com',
  donor_address: '12 High Street',
  donor_city: 'London',
  donor_postcode: 'SW1A 1AA',
  donor_ip: '',
  gift_aid: 'yes',
  amount: '25.00',
  payment_method: 'cash',
  payment_confirmation_number: '',
  donation_type: 'one-time',
  donation_date: '25-02-2021',
  zakat_donation: 'yes',
};

try {
  const { record, replayed } = await almoner.createDonation(donation, { idempotencyKey });
  if (replayed) console.error('Replayed: this key already recorded this donation; no new donation was made.');
  console.log(JSON.stringify(record)); // {"id":1,"donor_first_name":"Jane",...,"zakat_donation":true}
} catch (err) {
  if (!(err instanceof AlmonerError)) throw err;
  // A NetworkError or TimeoutError (status 0) leaves the donation unknown: retry with the same key.
  console.error(err.status ? `HTTP ${err.status}: ${err.message}` : err.message);
  // A ValidationError (422) names every failing field, e.g. donor_email: The donor email is required.
  if (err instanceof ValidationError) {
    for (const [field, messages] of Object.entries(err.errors)) {
      for (const message of messages) console.error(`  ${field}: ${message}`);
    }
  }
  process.exit(1);
}
