// The floor: what the stack alone can do, measured in the same run as Almoner so that a goal out of
// reach shows as such (issue 13), and a goal within reach too. About the least a server on this
// stack must do to answer the interface's two calls, done the way Almoner does its own fast paths:
// - Basic auth: the Authorization header that matched is remembered (one comparison after the
//   first request), else checked against a SHA-256 of the password kept in memory.
// - POST /api/v1/me: the charity's name and e-mail through a response schema.
// - POST /api/v1/donation/create: Fastify's JSON body parser; the interface's rules, checked
//   plainly (required fields, gift_aid, amount, donation_type, the date's format, validator's
//   isEmail); each batch of creates written in one better-sqlite3 transaction (WAL,
//   synchronous=FULL, foreign keys on, as Almoner opens it), two event-loop turns after its first
//   create as Almoner's group commit waits, into Almoner's own migrated tables; with an
//   Idempotency-Key, the key looked up and stored beside its donation (a replay is answered with
//   the donation stored under it, a different body with 422); then the record, the interface's
//   shape, through a response schema.
// Nothing else: no logging, metrics, request ids, extra headers, deadlines, throttles, in-flight
// keys, Laravel's messages for every rule, or retrying a batch one write at a time (a row that fails
// fails its batch; the benchmark's bodies are all valid). Not a server to run: a reference to
// measure against.
//
// Environment: FLOOR_DB (the SQLite file, migrated by `almoner charity create`), FLOOR_USERNAME and
// FLOOR_PASSWORD (that charity's credential). Prints {"port":N} on stdout once listening.
import { createHash, hash, timingSafeEqual } from 'node:crypto';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import isEmailModule from 'validator/lib/isEmail.js';

const isEmail = isEmailModule.default ?? isEmailModule;
const { FLOOR_DB, FLOOR_USERNAME, FLOOR_PASSWORD } = process.env;
if (!FLOOR_DB || !FLOOR_USERNAME || !FLOOR_PASSWORD) throw new Error('floor.mjs needs FLOOR_DB, FLOOR_USERNAME and FLOOR_PASSWORD');

const db = new Database(FLOOR_DB);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('foreign_keys = ON');
const charity = db.prepare('select id, name, email from charities where username = ? and active = 1').get(FLOOR_USERNAME);
if (charity === undefined) throw new Error(`no active charity ${FLOOR_USERNAME} in ${FLOOR_DB}`);

// ---- Authentication

const passwordHash = createHash('sha256').update(FLOOR_PASSWORD).digest();
let matchedHeader;
function authenticated(header) {
  if (header === matchedHeader) return header !== undefined;
  if (!header?.startsWith('Basic ')) return false;
  const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const ok = colon >= 0 && decoded.slice(0, colon) === FLOOR_USERNAME && timingSafeEqual(hash('sha256', decoded.slice(colon + 1), 'buffer'), passwordHash);
  if (ok) matchedHeader = header;
  return ok;
}

// ---- The donation: its rules, its row, its record

const FIELDS = [
  'donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'donor_ip',
  'gift_aid', 'amount', 'payment_method', 'payment_confirmation_number', 'donation_type', 'donation_date', 'zakat_donation',
];
const REQUIRED = ['donor_email', 'gift_aid', 'amount', 'donation_type'];
const DONATION_TYPES = new Set(['one-time', 'recurring', 'renewal']);
const AMOUNT = /^[0-9]{1,9}(\.[0-9]{1,2})?$/;
const DATE = /^([0-9]{2})-([0-9]{2})-([0-9]{4})$/;
const text = (v) => (v === undefined || v === null || v === '' ? null : String(v));
const flag = (v) => v === true || v === 'yes';

/** The interface's rules, each field's first failure; undefined when the donation is valid. */
function errorsOf(d) {
  const errors = {};
  for (const f of REQUIRED) if (d[f] === undefined || d[f] === null || d[f] === '') errors[f] = [`The ${f.replaceAll('_', ' ')} field is required.`];
  if (!errors.donor_email && (typeof d.donor_email !== 'string' || !isEmail(d.donor_email))) errors.donor_email = ['The donor email must be a valid email address.'];
  if (!errors.gift_aid && d.gift_aid !== 'yes' && d.gift_aid !== 'no') errors.gift_aid = ['The selected gift aid is invalid.'];
  if (!errors.amount && !(AMOUNT.test(String(d.amount)) && Number(d.amount) >= 0.01)) errors.amount = ['The amount must be a number of at least 0.01.'];
  if (!errors.donation_type && !DONATION_TYPES.has(d.donation_type)) errors.donation_type = ['The selected donation type is invalid.'];
  if (d.donation_date !== undefined && d.donation_date !== null && isoDate(d.donation_date) === undefined) errors.donation_date = ['The donation date must be a date as DD-MM-YYYY.'];
  return Object.keys(errors).length > 0 ? errors : undefined;
}

/** DD-MM-YYYY as midnight UTC that day, in the interface's form; undefined if it is no such day. */
function isoDate(v) {
  const m = typeof v === 'string' ? DATE.exec(v) : null;
  if (!m) return undefined;
  const day = new Date(Date.UTC(Number(m[3]), Number(m[2]) - 1, Number(m[1])));
  if (day.getUTCDate() !== Number(m[1]) || day.getUTCMonth() !== Number(m[2]) - 1) return undefined;
  return `${m[3]}-${m[2]}-${m[1]}T00:00:00.000000Z`;
}

const nowIso = () => `${new Date().toISOString().slice(0, -1)}000Z`; // microseconds, as Almoner writes them

/** The record the interface answers with, as stored, but for its id. */
function recordOf(d, donationDate) {
  return {
    donor_first_name: text(d.donor_first_name), donor_last_name: text(d.donor_last_name), donor_email: d.donor_email,
    donor_phone: text(d.donor_phone), donor_address: text(d.donor_address), donor_city: text(d.donor_city),
    donor_postcode: text(d.donor_postcode), donor_ip: text(d.donor_ip), gift_aid: d.gift_aid, amount: String(d.amount),
    payment_method: text(d.payment_method), payment_confirmation_number: text(d.payment_confirmation_number),
    donation_type: d.donation_type, donation_date: donationDate, zakat_donation: flag(d.zakat_donation),
  };
}

const COLUMNS = [
  'charity_id', 'donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'donor_ip',
  'gift_aid', 'amount', 'amount_minor', 'payment_method', 'payment_confirmation_number', 'donation_type', 'donation_date', 'zakat_donation', 'recorded_at',
];
const rowOf = (r, now) => [
  charity.id, r.donor_first_name, r.donor_last_name, r.donor_email, r.donor_phone, r.donor_address, r.donor_city, r.donor_postcode, r.donor_ip,
  r.gift_aid === 'yes' ? 1 : 0, r.amount, Math.round(Number(r.amount) * 100), r.payment_method, r.payment_confirmation_number, r.donation_type,
  r.donation_date, r.zakat_donation ? 1 : 0, now,
];

// ---- The batch

const insertDonation = db.prepare(`insert into donations (${COLUMNS.join(', ')}) values (${COLUMNS.map(() => '?').join(', ')}) returning id`);
const donationById = db.prepare(`select id, ${FIELDS.join(', ')} from donations where id = ?`);
const findKey = db.prepare('select fingerprint, donation_id from idempotency_keys where charity_id = ? and key = ?');
const insertKey = db.prepare('insert into idempotency_keys (charity_id, key, fingerprint, donation_id, created_at, expires_at) values (?, ?, ?, ?, ?, ?)');
const KEY_TTL_MS = 24 * 3600 * 1000;

/** A batch's writes in one transaction: each a donation's row, and its key's when it has one. */
const writeBatch = db.transaction((writes) =>
  writes.map(({ record, key, fingerprint, now }) => {
    if (key !== undefined) {
      const known = findKey.get(charity.id, key);
      if (known) return known.fingerprint === fingerprint ? { replay: donationById.get(known.donation_id) } : { mismatch: true };
    }
    const { id } = insertDonation.get(rowOf(record, now));
    if (key !== undefined) insertKey.run(charity.id, key, fingerprint, id, now, new Date(Date.now() + KEY_TTL_MS).toISOString());
    return { id };
  }),
);
let batch = [];
function commitBatch() {
  const writes = batch;
  batch = [];
  let results;
  try {
    results = writeBatch(writes);
  } catch (err) {
    for (const w of writes) w.reject(err);
    return;
  }
  writes.forEach((w, i) => w.resolve(results[i]));
}
const write = (w) =>
  new Promise((resolve, reject) => {
    if (batch.length === 0) setImmediate(() => setImmediate(commitBatch));
    batch.push({ ...w, resolve, reject });
  });

// ---- The routes

const app = Fastify({ keepAliveTimeout: 72_000 });
const unauthorized = (reply) => reply.code(401).header('www-authenticate', 'Basic realm="floor"').send({ message: 'Unauthorized' });

const ME = {
  type: 'object',
  properties: { success: { type: 'boolean' }, message: { type: 'string' }, data: { type: 'object', properties: { name: { type: 'string' }, email: { type: 'string' } } } },
};
app.post('/api/v1/me', { schema: { response: { 200: ME } } }, (request, reply) => {
  if (!authenticated(request.headers.authorization)) return unauthorized(reply);
  return reply.send({ success: true, message: 'Authenticated', data: { name: charity.name, email: charity.email } });
});

const nullableString = { type: ['string', 'null'] };
const RECORD = {
  type: 'object',
  properties: {
    data: {
      type: 'object',
      properties: {
        id: { type: 'integer' },
        ...Object.fromEntries(FIELDS.map((f) => [f, nullableString])),
        zakat_donation: { type: 'boolean' },
      },
    },
  },
};
app.post('/api/v1/donation/create', { schema: { response: { 200: RECORD } } }, async (request, reply) => {
  if (!authenticated(request.headers.authorization)) return unauthorized(reply);
  const d = request.body ?? {};
  const errors = errorsOf(d);
  if (errors) return reply.code(422).send({ message: 'The given data was invalid.', errors });
  const now = nowIso();
  const record = recordOf(d, d.donation_date ? isoDate(d.donation_date) : now);
  const key = request.headers['idempotency-key'];
  const fingerprint = key === undefined ? undefined : hash('sha256', JSON.stringify(record), 'hex');
  const result = await write({ record, key, fingerprint, now });
  if (result.mismatch) {
    return reply.code(422).send({ message: 'This Idempotency-Key was already used for a different donation.', errors: { idempotency_key: ['Use a new key for a new donation.'] } });
  }
  if (result.replay) return { data: { ...result.replay, zakat_donation: result.replay.zakat_donation === 1, gift_aid: result.replay.gift_aid === 1 ? 'yes' : 'no' } };
  record.id = result.id;
  return { data: record };
});

const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(JSON.stringify({ port: Number(new URL(address).port) }) + '\n');
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void app.close().then(() => (db.close(), process.exit(0))));
// Never outlive the harness: it holds our stdin open, and it closes when the harness goes.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
