// Create Donation: records a donation (POST /api/v1/donation/create) with Node's built-in fetch.
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... node create.mjs
//
// Prints the stored record as the server returns it ({"data":{...}}) on stdout. Exits non-zero,
// with the server's message (and for a 422 every failing field) on stderr, when it is refused.
// Node 18 or later; no dependencies.
import { randomUUID } from 'node:crypto';

const baseUrl = (process.env.ALMONER_URL || 'http://127.0.0.1:3000').replace(/\/+$/, '').replace(/\/api\/v1$/, ''); // the server, with or without the API's /api/v1
const { ALMONER_USERNAME: username, ALMONER_PASSWORD: password } = process.env;
if (!username || !password) {
  console.error("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.");
  process.exit(1);
}

// An Idempotency-Key makes a retry safe: the same key and the same donation within 24 hours get the
// first answer again instead of a second donation. Use a new key for each new donation, and the
// same one to retry it (here: run again with IDEMPOTENCY_KEY set to the key printed).
const idempotencyKey = process.env.IDEMPOTENCY_KEY || randomUUID();
console.error(`Idempotency-Key: ${idempotencyKey} (to retry this donation, run again with IDEMPOTENCY_KEY=${idempotencyKey})`);

const donation = {
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

let response, body;
try {
  response = await fetch(`${baseUrl}/api/v1/donation/create`, {
    method: 'POST',
    headers: {
      Accept: 'application/json',
      Authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': idempotencyKey,
    },
    body: JSON.stringify(donation),
    signal: AbortSignal.timeout(30_000), // for the whole answer, body included
  });
  body = await response.text();
} catch (err) {
  // No answer: the donation may or may not have been recorded, so retry it with the same key.
  console.error(`Could not reach Almoner: ${err.cause?.message ?? err.message}`);
  process.exit(1);
}

if (!response.ok) {
  let answer = {};
  try {
    answer = JSON.parse(body); // Almoner's errors are JSON: {"message": ..., "errors": {...}}
  } catch {} // not Almoner's answer (a proxy's error page?)
  console.error(`HTTP ${response.status}: ${answer.message ?? body}`);
  // A 422 names every failing field, e.g. donor_email: The donor email is required.
  for (const [field, messages] of Object.entries(answer.errors ?? {})) {
    for (const message of messages) console.error(`  ${field}: ${message}`);
  }
  process.exit(1);
}

if (response.headers.get('Idempotent-Replayed') === 'true') {
  console.error('Replayed: this key already recorded this donation; no new donation was made.');
}
// JSON.parse(body).data is the donation as stored, with its id: {"data":{"id":1,"donor_first_name":"Jane",...}}
console.log(body);
