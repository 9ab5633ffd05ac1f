// One autocannon load, in its own process so that the harness does nothing else meanwhile.
// argv[2]: JSON {url, scenario: "me" | "create", connections, seconds, auth, marker, keyed, quantiles}.
// Prints one JSON line: what load.ts turns into a LoadResult.
import autocannon from 'autocannon';

const { url, scenario, connections, seconds, auth, marker, keyed, quantiles } = JSON.parse(process.argv[2]);

const FIRST = ['Jane', 'John', 'Amira', 'Yusuf', 'Mei', 'Olu', 'Sven', 'Priya', 'Carlos', 'Fatima', 'Liam', 'Chen'];
const LAST = ['Doe', 'Smith', 'Khan', 'Okafor', 'Nguyen', 'Garcia', 'Jensen', 'Patel', 'Rossi', 'Haddad'];
const CITIES = ['London', 'Leeds', 'Bristol', 'Glasgow', 'Cardiff', 'Belfast', 'Leicester'];
const TYPES = ['one-time', 'recurring', 'renewal'];
const METHODS = ['cash', 'card', 'bank transfer', 'cheque'];
const pick = (list) => list[Math.floor(Math.random() * list.length)];
const int = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));
const two = (n) => String(n).padStart(2, '0');

// A valid donation, different every time. The marker (unique per request) goes into
// payment_confirmation_number, and in the keyed run into the Idempotency-Key header of each request,
// so that the harness can count afterwards exactly which requests were stored.
function donation(mark) {
  const first = pick(FIRST);
  const last = pick(LAST);
  const d = {
    donor_first_name: first,
    donor_last_name: last,
    donor_email: `${first}.${last}.${int(1, 1e6)}@example.org`.toLowerCase(),
    donor_phone: Math.random() < 0.5 ? `07700 9${int(10000, 99999)}` : null,
    donor_address: `${int(1, 300)} High Street`,
    donor_city: pick(CITIES),
    donor_postcode: `SW${int(1, 20)} ${int(1, 9)}AA`,
    donor_ip: Math.random() < 0.5 ? `203.0.113.${int(1, 254)}` : '',
    gift_aid: Math.random() < 0.5 ? 'yes' : 'no',
    amount: Math.random() < 0.7 ? `${int(1, 5000)}.${two(int(0, 99))}` : int(1, 500),
    payment_method: pick(METHODS),
    payment_confirmation_number: mark,
    donation_type: pick(TYPES),
    zakat_donation: pick(['yes', 'no', true, false]),
  };
  if (Math.random() < 0.8) d.donation_date = `${two(int(1, 28))}-${two(int(1, 12))}-${int(2015, 2025)}`;
  return JSON.stringify(d);
}

const base = { authorization: auth, accept: 'application/json' };
let sent = 0; // autocannon builds each request right before writing it
const request =
  scenario === 'create'
    ? {
        method: 'POST',
        path: '/api/v1/donation/create',
        setupRequest(req) {
          const mark = `${marker}-${++sent}`;
          req.headers = { ...base, 'content-type': 'application/json' };
          if (keyed) req.headers['idempotency-key'] = mark;
          req.body = donation(mark);
          return req;
        },
      }
    : { method: 'POST', path: '/api/v1/me', headers: base };

const latencies = [];
const statuses = {};
const started = performance.now();
const instance = autocannon(
  { url, connections, duration: seconds, sampleInt: 100, timeout: 10, requests: [request] },
  (err, result) => {
    if (err) throw err;
    const elapsed = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
    process.stdout.write(
      JSON.stringify({
        seconds: elapsed,
        responses: latencies.length,
        statuses,
        errors: result.errors,
        timeouts: result.timeouts,
        sent: scenario === 'create' ? sent : null,
        p50: at(0.5),
        p99: at(0.99),
        mean: latencies.reduce((s, x) => s + x, 0) / latencies.length,
        quantiles: quantiles.map((p) => at(p / 100)), // the latency at each percentile load.ts asked for, so that slices can be merged
      }) + '\n',
    );
  },
);
instance.on('response', (_client, status, _bytes, ms) => {
  latencies.push(ms);
  statuses[status] = (statuses[status] ?? 0) + 1;
});
