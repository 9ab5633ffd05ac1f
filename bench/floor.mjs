// The floor: what the stack alone can do, measured in the same run as Almoner so that a goal out of
// reach shows as such (issue 13), and a goal within reach too. POST /api/v1/me: Basic auth as below
// and the charity's name and e-mail through a response schema. The least any server on this stack
// must do to answer POST /api/v1/donation/create as the interface asks: Fastify 5 with its JSON body parser and a
// response schema; Basic auth checked against a SHA-256 of the password kept in memory; the
// required fields present and validator's isEmail; each event-loop turn's donations written in one
// better-sqlite3 transaction (WAL, synchronous=FULL, foreign keys on, as Almoner opens it) into
// Almoner's own migrated tables; with an Idempotency-Key, the key looked up and stored beside its
// donation in that transaction (a replay answered from the table). The record comes back as the
// answer. Nothing else: no full validation or its messages, no logging, metrics, request ids,
// headers, deadlines, throttles or in-flight keys. Not a server to run: a bound to measure against.
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
const charity = db.prepare('select id, name, email from charities where username = ?').get(FLOOR_USERNAME);
if (charity === undefined) throw new Error(`no charity ${FLOOR_USERNAME} in ${FLOOR_DB}`);
const charityId = charity.id;

const COLUMNS = [
  'charity_id', 'donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'donor_ip',
  'gift_aid', 'amount', 'amount_minor', 'payment_method', 'payment_confirmation_number', 'donation_type', 'donation_date', 'zakat_donation', 'recorded_at',
];
const insertDonation = db.prepare(`insert into donations (${COLUMNS.join(', ')}) values (${COLUMNS.map(() => '?').join(', ')}) returning id`);
const findKey = db.prepare('select fingerprint, donation_id from idempotency_keys where charity_id = ? and key = ?');
const insertKey = db.prepare('insert into idempotency_keys (charity_id, key, fingerprint, donation_id, created_at, expires_at) values (?, ?, ?, ?, ?, ?)');
const KEY_TTL_MS = 24 * 3600 * 1000;

/** One turn's writes in one transaction: each a donation's row, and its key's when it has one. */
const writeTurn = db.transaction((writes) =>
  writes.map(({ row, key, fingerprint, now }) => {
    if (key !== undefined) {
      const known = findKey.get(charityId, key);
      if (known) return known.fingerprint === fingerprint ? { replay: known.donation_id } : { mismatch: true };
    }
    const { id } = insertDonation.get(row);
    if (key !== undefined) insertKey.run(charityId, key, fingerprint, id, now, new Date(Date.parse(now) + KEY_TTL_MS).toISOString());
    return { id };
  }),
);
let turn = [];
function commitTurn() {
  const writes = turn;
  turn = [];
  let results;
  try {
    results = writeTurn(writes);
  } catch (err) {
    for (const w of writes) w.reject(err);
    return;
  }
  writes.forEach((w, i) => w.resolve(results[i]));
}
const write = (w) =>
  new Promise((resolve, reject) => {
    if (turn.length === 0) setImmediate(commitTurn);
    turn.push({ ...w, resolve, reject });
  });

const passwordHash = createHash('sha256').update(FLOOR_PASSWORD).digest();
function authenticated(header) {
  if (!header?.startsWith('Basic ')) return false;
  const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && decoded.slice(0, colon) === FLOOR_USERNAME && timingSafeEqual(createHash('sha256').update(decoded.slice(colon + 1)).digest(), passwordHash);
}

const REQUIRED = ['donor_email', 'gift_aid', 'amount', 'donation_type'];
const yes = (v) => v === true || v === 'yes';
const text = (v) => (v === undefined || v === null || v === '' ? null : String(v));
const FIELDS = [
  'donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'donor_ip',
  'gift_aid', 'amount', 'payment_method', 'payment_confirmation_number', 'donation_type', 'donation_date', 'zakat_donation',
];
const RECORD = {
  type: 'object',
  properties: {
    data: {
      type: 'object',
      properties: Object.fromEntries([['id', { type: 'integer' }], ...FIELDS.map((f) => [f, {}]), ['created_at', { type: 'string' }]]),
    },
  },
};

const app = Fastify({ keepAliveTimeout: 72_000 });
const ME = {
  type: 'object',
  properties: { success: { type: 'boolean' }, message: { type: 'string' }, data: { type: 'object', properties: { name: { type: 'string' }, email: { type: 'string' } } } },
};
app.post('/api/v1/me', { schema: { response: { 200: ME } } }, (request, reply) => {
  if (!authenticated(request.headers.authorization)) return reply.code(401).send({ message: 'Unauthorized' });
  return reply.send({ success: true, message: 'Authenticated', data: { name: charity.name, email: charity.email } });
});
app.post('/api/v1/donation/create', { schema: { response: { 200: RECORD } } }, async (request, reply) => {
  if (!authenticated(request.headers.authorization)) return reply.code(401).send({ message: 'Unauthorized' });
  const d = request.body ?? {};
  const errors = {};
  for (const f of REQUIRED) if (d[f] === undefined || d[f] === null || d[f] === '') errors[f] = [`The ${f.replaceAll('_', ' ')} field is required.`];
  if (typeof d.donor_email !== 'string' || !isEmail(d.donor_email)) errors.donor_email ??= ['The donor email must be a valid email address.'];
  if (Object.keys(errors).length > 0) return reply.code(422).send({ message: 'The given data was invalid.', errors });
  const now = new Date().toISOString();
  const row = [
    charityId, text(d.donor_first_name), text(d.donor_last_name), d.donor_email, text(d.donor_phone), text(d.donor_address), text(d.donor_city),
    text(d.donor_postcode), text(d.donor_ip), yes(d.gift_aid) ? 1 : 0, String(d.amount), Math.round(Number(d.amount) * 100), text(d.payment_method),
    text(d.payment_confirmation_number), d.donation_type, text(d.donation_date) ?? now, yes(d.zakat_donation) ? 1 : 0, now,
  ];
  const key = request.headers['idempotency-key'];
  const fingerprint = key === undefined ? undefined : hash('sha256', JSON.stringify(d), 'hex');
  const result = await write({ row, key, fingerprint, now });
  if (result.mismatch) return reply.code(422).send({ message: 'This Idempotency-Key was already used for a different donation.' });
  return { data: { id: result.id ?? result.replay, ...d, created_at: now } };
});

const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(JSON.stringify({ port: Number(new URL(address).port) }) + '\n');
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void app.close().then(() => (db.close(), process.exit(0))));
// Never outlive the harness: it holds our stdin open, and it closes when the harness goes.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
