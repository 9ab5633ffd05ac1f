// bin/almoner donations export: donations recorded through the real HTTP app on a fresh database
// of each backend, read back by the real executable from the same database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DonationInput, DonationRecord } from '../../src/client/index.js';
import { exampleDonation, RECORD_KEYS, startTestApp, TIMESTAMP, type TestCharity, type TestContext } from '../support/app.js';
import { parseCsv } from '../support/csv.js';
import { BACKENDS } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/** A value with everything CSV has to quote: a comma, a double quote and line breaks (LF and CRLF). */
const TRICKY_ADDRESS = 'Flat 2, "The Old Mill"\nMill Lane\r\nLower Street';

type Row = Record<string, unknown>;


/** How a JSON value must appear in the CSV. */
function csvCell(value: unknown): string {
  if (value === null) return '';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return String(value);
}

// The backends are independent (each has its own database), so they run side by side; within one,
// the suites run in order as before (concurrency: 1, since a suite inherits its parent's setting).
describe('bin/almoner donations export', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`bin/almoner donations export [${backend.name}]`, { concurrency: 1 }, () => {
      let ctx: TestContext;
      let other: TestCharity;
      let startedAt: string;
      let finishedAt: string;
      /** What the API returned for each donation, by a short name, plus who recorded it. */
      const recorded = new Map<string, { record: DonationRecord; charity: string }>();

      async function exportOut(args: string[]): Promise<string> {
        const r = await almoner(ctx.databaseUrl, ['donations', 'export', ...args]);
        assert.equal(r.code, 0, `donations export ${args.join(' ')} exited ${r.code}\nstderr: ${r.stderr}`);
        return r.stdout;
      }

      async function exportJsonl(args: string[]): Promise<Row[]> {
        const out = await exportOut(['--format', 'jsonl', ...args]);
        if (out === '') return [];
        assert.ok(out.endsWith('\n'), 'every JSON line ends with a newline');
        return out
          .slice(0, -1)
          .split('\n')
          .map((line) => {
            const row = JSON.parse(line) as unknown;
            assert.ok(row !== null && typeof row === 'object' && !Array.isArray(row), `not a JSON object: ${line}`);
            return row as Row;
          });
      }

      async function donate(name: string, charity: TestCharity, body: Record<string, unknown>): Promise<void> {
        const { record } = await (await ctx.client(charity)).createDonation(body as unknown as DonationInput);
        recorded.set(name, { record, charity: charity.username });
      }

      /** What the export must hold for a donation: the API's record, then charity and recorded_at. */
      function expectedRow(name: string, recordedAt: unknown): Row {
        const r = recorded.get(name);
        assert.ok(r, `no donation ${name}`);
        return { ...r.record, charity: r.charity, recorded_at: recordedAt };
      }

      function ids(names: string[]): number[] {
        return names.map((n) => recorded.get(n)!.record.id);
      }

      before(async () => {
        assertBuilt();
        ctx = await startTestApp(backend);
        other = await ctx.signUp('Second Charity', 'second@charity.example');
        startedAt = new Date(Date.now() - 1000).toISOString();

        // The date window used below is 2021-02-25 .. 2021-03-10: one donation each side of each end.
        await donate('dayBeforeFrom', ctx.charity, exampleDonation({ donation_date: '24-02-2021' }));
        await donate(
          'onFrom',
          ctx.charity,
          exampleDonation({ donation_date: '25-02-2021', donor_address: TRICKY_ADDRESS, donor_city: 'Zürich 🌍', amount: '25.00' }),
        );
        await donate('otherCharity', other, exampleDonation({ donation_date: '01-03-2021', donor_email: 'someone@other.example', amount: '1000000.50' }));
        await donate('onTo', ctx.charity, {
          // Only the required fields, so the optional ones are null; "" stays "" except donor_ip.
          donor_email: 'minimal@example.com',
          gift_aid: 'no',
          amount: 5,
          donation_type: 'recurring',
          donation_date: '10-03-2021',
          donor_ip: '',
          payment_confirmation_number: '',
          zakat_donation: 'no',
        });
        await donate('dayAfterTo', ctx.charity, exampleDonation({ donation_date: '11-03-2021', donation_type: 'renewal' }));
        await donate('undated', ctx.charity, exampleDonation({ donation_date: undefined }));
        finishedAt = new Date(Date.now() + 1000).toISOString();
      });

      after(async () => {
        await ctx?.close();
      });

      describe('donations export --format jsonl', { concurrency: true }, () => {
        test('one flat object per line: the 16 record keys exactly as the API returned them, then charity and recorded_at', async () => {
          const rows = await exportJsonl([]);
          const all = ['dayBeforeFrom', 'onFrom', 'otherCharity', 'onTo', 'dayAfterTo', 'undated'];
          assert.equal(rows.length, all.length, 'one line per donation (a line break inside a value does not split it)');
          rows.forEach((row, i) => {
            const name = all[i]!;
            assert.deepEqual(Object.keys(row), [...RECORD_KEYS, 'charity', 'recorded_at'], `keys of ${name}`);
            assert.equal(typeof row.recorded_at, 'string');
            assert.match(row.recorded_at as string, TIMESTAMP);
            assert.ok((row.recorded_at as string) >= startedAt && (row.recorded_at as string) <= finishedAt, `recorded_at of ${name} is when it was recorded`);
            for (const [key, value] of Object.entries(row)) {
              assert.ok(value === null || typeof value !== 'object', `${name}.${key} is not flat`);
            }
            assert.deepEqual(row, expectedRow(name, row.recorded_at), `export of ${name}`);
          });
        });

        test('the values keep their API types: strings, null, booleans, the amount as sent', async () => {
          const rows = await exportJsonl([]);
          const byId = new Map(rows.map((r) => [r.id, r]));
          const minimal = byId.get(ids(['onTo'])[0]);
          assert.ok(minimal);
          assert.equal(minimal.donor_first_name, null);
          assert.equal(minimal.donor_ip, null, 'donor_ip "" is null');
          assert.equal(minimal.payment_confirmation_number, '', '"" stays ""');
          assert.equal(minimal.amount, '5');
          assert.equal(minimal.gift_aid, 'no');
          assert.equal(minimal.zakat_donation, false);
          assert.equal(minimal.donation_date, '2021-03-10T00:00:00.000000Z');
          const tricky = byId.get(ids(['onFrom'])[0]);
          assert.ok(tricky);
          assert.equal(tricky.donor_address, TRICKY_ADDRESS);
          assert.equal(tricky.donor_city, 'Zürich 🌍');
          assert.equal(tricky.amount, '25.00');
          assert.equal(tricky.zakat_donation, true);
          assert.equal(tricky.charity, ctx.charity.username);
        });

        test("--charity keeps only that charity's donations", async () => {
          assert.deepEqual(
            (await exportJsonl(['--charity', other.username])).map((r) => r.id),
            ids(['otherCharity']),
          );
          assert.deepEqual(
            (await exportJsonl(['--charity', ctx.charity.username])).map((r) => r.id),
            ids(['dayBeforeFrom', 'onFrom', 'onTo', 'dayAfterTo', 'undated']),
          );
        });

        test('--from and --to include both end days and nothing outside them', async () => {
          const rows = await exportJsonl(['--from', '2021-02-25', '--to', '2021-03-10']);
          assert.deepEqual(
            rows.map((r) => r.id),
            ids(['onFrom', 'otherCharity', 'onTo']),
          );
        });

        test('--from alone is inclusive; --to alone is inclusive', async () => {
          assert.deepEqual(
            (await exportJsonl(['--from', '2021-02-25'])).map((r) => r.id),
            ids(['onFrom', 'otherCharity', 'onTo', 'dayAfterTo', 'undated']),
          );
          assert.deepEqual(
            (await exportJsonl(['--to', '2021-03-10'])).map((r) => r.id),
            ids(['dayBeforeFrom', 'onFrom', 'otherCharity', 'onTo']),
          );
        });

        test('--from and --to on the same day give that day', async () => {
          assert.deepEqual(
            (await exportJsonl(['--from', '2021-02-24', '--to', '2021-02-24'])).map((r) => r.id),
            ids(['dayBeforeFrom']),
          );
        });

        test('--charity combines with --from and --to', async () => {
          assert.deepEqual(
            (await exportJsonl(['--charity', ctx.charity.username, '--from', '2021-02-25', '--to', '2021-03-10'])).map((r) => r.id),
            ids(['onFrom', 'onTo']),
          );
        });

        test('nothing matching is no output at all', async () => {
          assert.equal(await exportOut(['--format', 'jsonl', '--from', '1999-01-01', '--to', '1999-12-31']), '');
        });
      });

      describe('donations export --format csv', { concurrency: true }, () => {
        test('a header row with the same key names, then one RFC 4180 row per donation with CRLF record ends', async () => {
          const [csv, jsonl] = await Promise.all([exportOut(['--format', 'csv']), exportJsonl([])]);
          const [header, ...rows] = parseCsv(csv);
          assert.deepEqual(header, [...RECORD_KEYS, 'charity', 'recorded_at']);
          assert.equal(rows.length, jsonl.length);
          rows.forEach((row, i) => {
            const expected = jsonl[i]!;
            assert.deepEqual(
              row,
              header!.map((key) => csvCell(expected[key])),
              `csv row ${i + 1} matches the jsonl export`,
            );
          });
        });

        test('a value with a comma, a double quote and line breaks is quoted, quotes doubled, line breaks kept', async () => {
          const csv = await exportOut(['--format', 'csv', '--from', '2021-02-25', '--to', '2021-02-25']);
          assert.ok(csv.includes('"Flat 2, ""The Old Mill""\nMill Lane\r\nLower Street"'), `not quoted as RFC 4180 says:\n${csv}`);
          const [header, row] = parseCsv(csv);
          assert.ok(header && row);
          assert.equal(row[header.indexOf('donor_address')], TRICKY_ADDRESS);
          assert.equal(row[header.indexOf('donor_city')], 'Zürich 🌍');
          assert.equal(row[header.indexOf('amount')], '25.00', 'the amount as sent, not reformatted');
        });

        test('booleans are true/false and null is empty', async () => {
          const csv = await exportOut(['--format', 'csv', '--from', '2021-03-10', '--to', '2021-03-10']);
          const [header, row] = parseCsv(csv);
          assert.ok(header && row);
          const cell = (key: string) => row[header.indexOf(key)];
          assert.equal(cell('id'), String(ids(['onTo'])[0]));
          assert.equal(cell('zakat_donation'), 'false');
          assert.equal(cell('gift_aid'), 'no');
          assert.equal(cell('donor_ip'), '');
          assert.equal(cell('donor_first_name'), '');
          assert.equal(cell('amount'), '5');
          const yes = parseCsv(await exportOut(['--format', 'csv', '--from', '2021-02-24', '--to', '2021-02-24']));
          assert.equal(yes[1]?.[yes[0]!.indexOf('zakat_donation')], 'true');
        });

        test('--charity, --from and --to filter the csv like the jsonl', async () => {
          const csv = await exportOut(['--format', 'csv', '--charity', ctx.charity.username, '--from', '2021-02-25', '--to', '2021-03-10']);
          const [header, ...rows] = parseCsv(csv);
          assert.ok(header);
          assert.deepEqual(
            rows.map((r) => Number(r[header.indexOf('id')])),
            ids(['onFrom', 'onTo']),
          );
          assert.deepEqual(new Set(rows.map((r) => r[header.indexOf('charity')])), new Set([ctx.charity.username]));
        });

        test('nothing matching is the header row alone', async () => {
          const csv = await exportOut(['--format', 'csv', '--charity', other.username, '--to', '2000-01-01']);
          assert.equal(csv, `${[...RECORD_KEYS, 'charity', 'recorded_at'].join(',')}\r\n`);
        });
      });
    });
  }
});
