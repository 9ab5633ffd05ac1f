// Test support: a real app on a real, fresh database of the backend under test.
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppOptions } from '../../src/app.js';
import type { FailureDelay } from '../../src/http/auth.js';
import type { AlmonerClient, DonationInput, DonationRecord } from '../../src/client/index.js';
import { signUpCharity } from '../../src/charities/signup.js';
import type { NewDonation } from '../../src/donations/donation.js';
import { validateDonation } from '../../src/donations/validate.js';
import { PERSONAL_FIELDS, type ErasableDonation } from '../../src/donations/erasure.js';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore, SERVER_SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/open.js';
import type { ExportedDonation, KeyedOutcome, Store } from '../../src/store/store.js';
import type { DatabaseBudget } from '../../src/store/budget.js';
import { fingerprint, IDEMPOTENCY } from '../../src/http/idempotency.js';
import { rawSql, SQLITE, type Backend } from './backends.js';
import { TestClock } from './clock.js';
import { clientFor, urlOf } from './client.js';
import { watchConformance } from './openapi.js';

export interface TestCharity {
  id: number;
  name: string;
  email: string;
  username: string;
  password: string;
  /** The Authorization header value for these credentials. */
  authorization: string;
}

export interface TestContext {
  backend: Backend['name'];
  /** For DATABASE_URL in a child process (bin/almoner) on the same database. */
  databaseUrl: string;
  store: Store;
  app: FastifyInstance;
  /** The app's clock: move it past a remembered credential's lifetime instead of waiting. */
  clock: TestClock;
  charity: TestCharity;
  signUp(name?: string, email?: string): Promise<TestCharity>;
  /** The app's address on a real socket (it starts listening on first use), e.g. http://127.0.0.1:41234. */
  baseUrl(): Promise<string>;
  /** The typed client for a charity (this one by default), over a real socket to the app. */
  client(charity?: Pick<TestCharity, 'username' | 'password'>): Promise<AlmonerClient>;
  donations(): Promise<ExportedDonation[]>;
  /** Holds every new donation back (another connection holds the lock) until the returned function is called. */
  holdDonationWrites(): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

export { tempDir } from './backends.js';

/** The interface's promise: a disable, or a rotation's old password, stops working on a running server within 5 s. */
export const HONOURED_WITHIN_MS = 5000;

/** A failed authentication answered at once: for tests that send many and do not time them. */
export const NO_FAILURE_DELAY: FailureDelay = { floorMs: 0, jitterMs: 0 };

/**
 * Creates a fresh database on the backend, builds the app on it (with `options`, and the context's
 * clock) and signs one charity up.
 */
export async function startTestApp(backend: Backend = SQLITE, options: Omit<AppOptions, 'store' | 'clock'> = {}): Promise<TestContext> {
  const database = await backend.createDatabase();
  const store = await openStore(database.location, { sqliteBusyTimeoutMs: SERVER_SQLITE_BUSY_TIMEOUT_MS }); // as the server opens it
  const clock = new TestClock();
  const app = await buildApp({ ...options, store, clock: clock.now });
  watchConformance(app);
  await app.ready();

  const signUp = async (name = 'Helping Hands', email = 'info@helpinghands.example'): Promise<TestCharity> => {
    const { charity, password } = await signUpCharity(store, { name, email });
    return { ...charity, password, authorization: basic(charity.username, password) };
  };

  const first = await signUp();
  return {
    backend: backend.name,
    databaseUrl: database.url,
    store,
    app,
    clock,
    charity: first,
    signUp,
    baseUrl: () => urlOf(app),
    client: (charity = first) => clientFor(app, charity),
    async donations() {
      const rows: ExportedDonation[] = [];
      for await (const d of store.exportDonations({})) rows.push(d);
      return rows;
    },
    async holdDonationWrites() {
      const location = database.location;
      if (location.dialect === 'sqlite') {
        const db = new BetterSqlite3(location.path);
        db.exec('begin immediate');
        return async () => {
          db.exec('rollback');
          db.close();
        };
      }
      const client = new pg.Client({ connectionString: location.url });
      await client.connect();
      await client.query('begin');
      await client.query('lock table donations in exclusive mode'); // reads still pass
      return async () => {
        await client.query('rollback');
        await client.end();
      };
    },
    /** Fails if any exchange did not conform to the OpenAPI document (see watchConformance). */
    async close() {
      try {
        await app.close();
      } finally {
        await store.close();
        await database.drop();
      }
    },
  };
}

// The interface as the tests hold Almoner to it: RECORD_KEYS, EXAMPLE_DONATION and EXAMPLE_RECORD
// (with ECHOED, what the two share) are stated here, apart from the field table
// (src/donations/fields.ts), and nowhere else in the tests. A change to the table that changes the
// interface (a new field) fails the tests until it is made here too, on purpose: RECORD_KEYS gains
// the field, and EXAMPLE_RECORD its value (null, for an optional field the example does not send).
// No other test needs an edit for a new field.

/** The keys of the API's donation record, in the API's order. */
export const RECORD_KEYS = [
  'id',
  'donor_first_name',
  'donor_last_name',
  'donor_email',
  'donor_phone',
  'donor_address',
  'donor_city',
  'donor_postcode',
  'donor_ip',
  'gift_aid',
  'amount',
  'payment_method',
  'payment_confirmation_number',
  'donation_type',
  'donation_date',
  'zakat_donation',
];

/** The example's fields the record gives back as they were sent (the interface: "echoes the request"). */
const ECHOED = {
  donor_first_name: 'Jane',
  donor_last_name: 'Doe',
  donor_email: 'jane.doe@example.com',
  donor_phone: '07700 900123',
  donor_address: '12 High Street',
  donor_city: 'London',
  donor_postcode: 'SW1A 1AA',
  donor_ip: '203.0.113.7',
  gift_aid: 'yes',
  amount: '25.00',
  payment_method: 'cash',
  payment_confirmation_number: 'PAY-123456',
  donation_type: 'one-time',
} as const;

/** The example donation the tests send (exampleDonation()), with every field, as a charity's form would send it. */
export const EXAMPLE_DONATION: DonationInput = { ...ECHOED, donation_date: '25-02-2021', zakat_donation: 'yes' };

/** The record EXAMPLE_DONATION is stored and answered as, but for its id: the date as midnight UTC, zakat as a boolean. */
export const EXAMPLE_RECORD: Omit<DonationRecord, 'id'> = { ...ECHOED, donation_date: '2021-02-25T00:00:00.000000Z', zakat_donation: true };

/** EXAMPLE_DONATION with `overrides`, as a plain object (a test may send what no DonationInput allows). */
export function exampleDonation(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...EXAMPLE_DONATION, ...overrides };
}

/** The example donation from `email`, validated: what the store is given to record. */
export function validDonation(email: string): NewDonation {
  const v = validateDonation(exampleDonation({ donor_email: email }));
  if (!v.ok) assert.fail(JSON.stringify(v.errors));
  return v.donation;
}

/**
 * A donation as erasureOf takes it, from the fields a test names: every other personal field null.
 * So a field added to the table needs no edit in the tests that erase one (two tests listed the
 * personal fields by hand, and a scratch field failed their typecheck: 2026-12-01).
 */
export function erasable(d: Record<string, unknown>): ErasableDonation {
  return { ...Object.fromEntries(PERSONAL_FIELDS.map((f) => [f.name, null])), ...d } as unknown as ErasableDonation;
}

/** Records validDonation(email) under the Idempotency-Key `key`, with its fingerprint, as the create route does (by default remembered as long as it would be). */
export function recordKeyed(
  store: Store,
  charityId: number,
  key: string,
  email: string,
  { ttlMicros = IDEMPOTENCY.ttlMicros, budget }: { ttlMicros?: number; budget?: DatabaseBudget } = {},
): Promise<KeyedOutcome> {
  const d = validDonation(email);
  return store.recordKeyedDonation(charityId, d, { key, fingerprint: fingerprint(d), ttlMicros }, budget);
}

/** ISO 8601 UTC with microseconds, as every timestamp Almoner returns. */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/**
 * Records the example donation, gift-aided and dated `daysAgo` days back (within HMRC's four years),
 * once for each of `overrides`, for the charity `charityId` of the database at `databaseUrl`.
 */
export async function recordGiftAided(databaseUrl: string, charityId: number, overrides: Record<string, unknown>[], daysAgo = 10): Promise<void> {
  const day = new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  const store = await openStore(parseDatabaseUrl(databaseUrl));
  try {
    for (const o of overrides) {
      const v = validateDonation(exampleDonation({ gift_aid: 'yes', donation_date: `${day.slice(8, 10)}-${day.slice(5, 7)}-${day.slice(0, 4)}`, ...o }));
      if (!v.ok) assert.fail(JSON.stringify(v.errors));
      await store.recordDonation(charityId, v.donation);
    }
  } finally {
    await store.close();
  }
}

/** `n` donations dated 2010 (every other one with Gift Aid) to the database's first charity, all due for erasure now (retention), inserted in one statement. */
export async function insertOldDonations(url: string, n: number): Promise<void> {
  await rawSql(
    url,
    `with recursive i(k) as (select 1 union all select k + 1 from i where k < ${Math.trunc(n)})
     insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_address, donor_city, donor_postcode,
       gift_aid, amount, amount_minor, donation_type, donation_date, zakat_donation, recorded_at)
     select (select min(id) from charities), 'Jane', 'Doe', 'donor' || k || '@example.org', k || ' High Street', 'London', 'SW1A 1AA',
       k % 2, '5.00', 500, 'one-time', '2010-01-01T00:00:00.000000Z', 0, '2010-01-01T01:00:00.000000Z' from i`,
  );
}
