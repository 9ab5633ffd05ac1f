// bin/almoner donations export, read back by a standard CSV parser: random valid donations whose
// text holds every character CSV finds awkward come out of the real executable exactly as stored,
// as CSV and as JSON Lines; --bom adds a byte order mark and nothing else; --spreadsheet's file opens
// in LibreOffice with text as text and numbers as numbers.
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'csv-parse/sync';
import fc from 'fast-check';
import type { DonationInput, DonationRecord } from '../../src/client/index.js';
import { isEmail, validateDonation } from '../../src/donations/validate.js';
import { exampleDonation, RECORD_KEYS, startTestApp, tempDir, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { parseCsv } from '../support/csv.js';
import { csvAsOpened, noLibreOffice, type OpenedCell } from '../support/libreoffice.js';

const HEADER = [...RECORD_KEYS, 'charity', 'recorded_at'];

/** Property runs per backend, each with its own charity, 1 to 6 donations and one export. */
const RUNS = 15;

/** Pieces of text that CSV, spreadsheets or line-based tools treat specially, and some that only look plain. */
const AWKWARD = [
  ',', '"', '""', '\r', '\n', '\r\n', '\n\r', '\t', ' ', '  ', "'", ';', '=', '+', '-', '@', '=SUM(A1:A9)', '=HYPERLINK("x","y")',
  'é', 'ß', 'Zürich', 'Łódź', 'Москва', '東京', '😀', '👩‍👩‍👧', '\u00a0', '\u2028', '\u200b', '\ufeff', '\\', 'a', '42', 'Main Road',
];

const awkwardText = fc
  .array(fc.oneof(fc.constantFrom(...AWKWARD), fc.string({ unit: 'binary', maxLength: 3 })), { maxLength: 10 })
  .map((parts) => parts.join(''));

/** An optional text field: omitted, null, "" or awkward text. */
const optionalText = fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant(''), awkwardText, awkwardText.map((s) => `=${s}`));

/** A quoted local part holds commas, quotes and line breaks and is still a valid address. */
const email = fc
  .oneof(
    fc.emailAddress(),
    fc
      .array(fc.constantFrom(',', '\\"', '\r', '\n', '\r\n', ' ', '\t', '=', 'é', 'a', '@'), { minLength: 1, maxLength: 8 })
      .map((parts) => `"${parts.join('')}"@example.com`),
  )
  .filter(isEmail);

/** Amounts as strings (echoed exactly, leading zeros and all) or as JSON numbers. */
const amount = fc.oneof(
  fc
    .tuple(fc.constantFrom('', '0', '00'), fc.integer({ min: 0, max: 999_999_999 }), fc.constantFrom('', '.5', '.05', '.50', '.99'))
    .map(([zeros, whole, fraction]) => `${zeros}${whole}${fraction}`),
  fc.integer({ min: 1, max: 99_999_999_999 }).map((pence) => pence / 100),
);

const day = fc
  .date({ min: new Date('1990-01-01T00:00:00Z'), max: new Date('2030-12-31T00:00:00Z'), noInvalidDate: true })
  .map((d) => d.toISOString().slice(0, 10))
  .map((iso) => `${iso.slice(8, 10)}-${iso.slice(5, 7)}-${iso.slice(0, 4)}`);

/** A request body the validator accepts; omitted fields are left out. */
const donationBody = fc
  .record({
    donor_first_name: optionalText,
    donor_last_name: optionalText,
    donor_email: email,
    donor_phone: optionalText,
    donor_address: optionalText,
    donor_city: optionalText,
    donor_postcode: optionalText,
    donor_ip: fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant(''), fc.ipV4(), fc.ipV6()),
    gift_aid: fc.constantFrom('yes', 'no'),
    amount,
    payment_method: optionalText,
    payment_confirmation_number: optionalText,
    donation_type: fc.constantFrom('one-time', 'recurring', 'renewal'),
    donation_date: fc.option(day, { nil: undefined }),
    zakat_donation: fc.constantFrom(undefined, 'yes', 'no', true, false),
  })
  .map((body) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined)))
  .filter((body) => validateDonation(body).ok);

/** One of each awkward case, tried first on every run of the suite. */
const EVERY_AWKWARD_CASE: Array<Record<string, unknown>> = [
  exampleDonation({ donor_address: '42\nMain Road', donor_city: 'St\rIves', donor_first_name: ' "Jo", Jr. ', donor_last_name: '=1+2' }),
  exampleDonation({ donor_address: 'Flat 2\r\n3 High St', donor_city: 'Hull,\tEast Riding', donor_postcode: '\n', donor_phone: '\r' }),
  exampleDonation({ donor_first_name: 'Zoë 😀', donor_last_name: '\r\n', donor_email: '"a,b\nc"@example.com', payment_method: '"', payment_confirmation_number: ',' }),
];

/** Fields the API does not echo as sent: "" is null, a day is a timestamp, yes/no is a boolean. */
const NORMALISED = new Set(['donor_ip', 'donation_date', 'zakat_donation']);

/** How a JSON value must read back from the CSV. */
function csvCell(value: unknown): string {
  if (value === null) return '';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return String(value);
}

/**
 * csv-parse taking any line break (CRLF, LF or CR) for a record end, as many readers do: RFC 4180
 * allows line breaks only inside quotes, so a correct file reads the same this way. (With its
 * default, csv-parse fixes the line break from the header row and would read an unquoted LF as data.)
 */
function readCsv(text: string): string[][] {
  return parse(text, { record_delimiter: ['\r\n', '\n', '\r'] }) as string[][];
}

function readJsonl(text: string): unknown[] {
  if (text === '') return [];
  assert.ok(text.endsWith('\n'), 'every JSON line ends with a newline');
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

describe('bin/almoner donations export: CSV that reads back exactly', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`donations export, read back [${backend.name}]`, { concurrency: 1 }, () => {
      let ctx: TestContext;

      async function exportOut(args: string[]): Promise<string> {
        const r = await almoner(ctx.databaseUrl, ['donations', 'export', ...args]);
        assert.equal(r.code, 0, `donations export ${args.join(' ')} exited ${r.code}\nstderr: ${r.stderr}`);
        return r.stdout;
      }

      /** Records the bodies under a new charity: the rows its export must hold, in id order. */
      async function recordAll(bodies: Array<Record<string, unknown>>): Promise<{ username: string; rows: Array<Record<string, unknown>> }> {
        const charity = await ctx.signUp('Awkward Characters Trust', 'awkward@charity.example');
        const client = await ctx.client(charity);
        const records: DonationRecord[] = [];
        for (const body of bodies) {
          const { record } = await client.createDonation(body as unknown as DonationInput);
          for (const [key, sent] of Object.entries(body)) {
            if (typeof sent === 'string' && !NORMALISED.has(key)) assert.equal(record[key as keyof DonationRecord], sent, `${key} is stored exactly as sent`);
          }
          records.push(record);
        }
        const recordedAt = new Map<number, string>();
        for await (const d of ctx.store.exportDonations({ charity: charity.username })) recordedAt.set(d.id, d.recorded_at);
        return { username: charity.username, rows: records.map((r) => ({ ...r, charity: charity.username, recorded_at: recordedAt.get(r.id) })) };
      }

      before(async () => {
        assertBuilt();
        ctx = await startTestApp(backend);
      });

      after(async () => {
        await ctx?.close();
      });

      test(`random donations with every awkward character: the CSV reads back through csv-parse as stored, and the JSONL as the records (${RUNS} runs)`, async () => {
        const all: Array<Record<string, unknown>> = [];
        await fc.assert(
          fc.asyncProperty(fc.array(donationBody, { minLength: 1, maxLength: 6 }), async (bodies) => {
            const { username, rows } = await recordAll(bodies);
            all.push(...rows);
            const csv = await exportOut(['--charity', username]);
            assert.ok(!csv.startsWith('\uFEFF'), 'no byte order mark without --bom');
            const expected = [HEADER, ...rows.map((row) => HEADER.map((key) => csvCell(row[key])))];
            assert.deepEqual(readCsv(csv), expected, 'csv-parse reads back the stored values, row by row');
            assert.deepEqual(parseCsv(csv), expected, 'a strict RFC 4180 reader (CRLF record ends, line breaks only inside quotes) agrees');
          }),
          { numRuns: RUNS, examples: [[EVERY_AWKWARD_CASE]], includeErrorInReport: true },
        );

        // JSON Lines: one export of everything the runs recorded, compared record by record.
        const jsonl = readJsonl(await exportOut(['--format', 'jsonl']));
        assert.equal(jsonl.length, all.length, 'one line per donation');
        assert.deepEqual(jsonl, all);
      });

      test('--bom starts the CSV with a UTF-8 byte order mark and changes nothing else', async () => {
        const { username } = await recordAll(EVERY_AWKWARD_CASE);
        const [plain, withBom, explicitCsv] = await Promise.all([
          exportOut(['--charity', username]),
          exportOut(['--charity', username, '--bom']),
          exportOut(['--bom', '--format', 'csv', '--charity', username]),
        ]);
        assert.ok(!plain.startsWith('\uFEFF'));
        assert.equal(withBom, `\uFEFF${plain}`);
        assert.equal(explicitCsv, withBom);
        assert.deepEqual(Buffer.from(withBom).subarray(0, 3), Buffer.from([0xef, 0xbb, 0xbf]), 'the BOM as UTF-8 bytes');
        assert.equal(
          await exportOut(['--bom', '--charity', username, '--to', '1970-01-01']),
          `\uFEFF${HEADER.join(',')}\r\n`,
          'nothing matching: the BOM and the header row',
        );
      });

      test("--spreadsheet: the BOM, and a cell that would start a formula with an apostrophe first, so a spreadsheet shows it as text (a donor's =HYPERLINK was a live link until 2026-11-29), as is text it would read as a number or date; nothing else changes", async () => {
        const attack = '=HYPERLINK("http://evil.example","click")';
        const { username, rows } = await recordAll([
          exampleDonation({ donor_first_name: attack, donor_last_name: '-Smith', donor_phone: '+44 7700 900123', donor_city: '@home', donor_address: '\t=1+1' }),
          exampleDonation({ donor_first_name: 'Jane', donor_address: 'Flat 2 = top', donor_last_name: 'Smith;=1+1', donor_city: 'Leeds\n@x' }),
        ]);
        const [plain, sheet] = await Promise.all([exportOut(['--charity', username]), exportOut(['--charity', username, '--spreadsheet'])]);
        assert.ok(sheet.startsWith('\uFEFF'), 'with a byte order mark, as --bom');
        const read = readCsv(sheet.slice(1));
        assert.deepEqual(read[0], HEADER);
        const cell = (row: number, key: string) => read[row]![HEADER.indexOf(key)];
        assert.deepEqual(
          ['donor_first_name', 'donor_last_name', 'donor_phone', 'donor_city', 'donor_address'].map((key) => cell(1, key)),
          [`'${attack}`, "'-Smith", "'+44 7700 900123", "'@home", "'\t'=1+1"],
        );
        assert.equal(cell(2, 'donor_address'), 'Flat 2 = top', 'a formula character within a cell is no formula');
        // After a separator within a cell too: a spreadsheet splitting on ';' (German or French Excel) starts a cell there (a review).
        assert.deepEqual([cell(2, 'donor_last_name'), cell(2, 'donor_city')], ["Smith;'=1+1", "Leeds\n'@x"]);
        // Every other cell as the plain export has it, but text a spreadsheet reads as a number or date: the example's phone and IP address.
        const plainRead = readCsv(plain);
        const readAsValues = [[], ['donor_ip'], ['donor_phone', 'donor_ip']];
        for (let row = 1; row < read.length; row++) {
          for (const [i, value] of read[row]!.entries()) {
            const expected = readAsValues[row]!.includes(HEADER[i]!) ? `'${plainRead[row]![i]}` : plainRead[row]![i];
            assert.equal(value.replace(/(?<=^|[;,\t\r\n])'(?=[=+\-@\t\r])/g, ''), expected, `${HEADER[i]}`);
          }
        }
        assert.equal(rows.length, 2);
        const jsonl = await almoner(ctx.databaseUrl, ['donations', 'export', '--spreadsheet', '--format', 'jsonl']);
        assert.equal(jsonl.code, 2);
        assert.match(jsonl.stderr, /--spreadsheet is for --format csv only/);
      });

      test(
        "--spreadsheet opened in LibreOffice: a phone's leading zero, a long reference's digits and text that looks like a date or number stay as text (apostrophe first), the amount and id are numbers, a formula is text",
        { skip: noLibreOffice ?? (backend !== BACKENDS[0] && 'the file is the same from either backend: opened once') },
        async () => {
          const attack = '=HYPERLINK("http://evil.example","click")';
          const looksLikeValues = {
            donor_phone: '07700900123',
            payment_confirmation_number: '12345678901234567890',
            donor_first_name: attack,
            donor_last_name: 'TRUE',
            donor_address: '1e5',
            donor_city: '1/2',
            donor_postcode: '12-03',
            payment_method: '0.50',
          };
          const { username, rows } = await recordAll([exampleDonation({ ...looksLikeValues, amount: '1234.50' }), exampleDonation()]);
          const dir = tempDir();
          try {
            const sheetFile = join(dir, 'sheet.csv');
            const plainFile = join(dir, 'plain.csv');
            writeFileSync(sheetFile, await exportOut(['--charity', username, '--spreadsheet']));
            writeFileSync(plainFile, `\uFEFF${await exportOut(['--charity', username])}`);
            const [sheet, plain] = await csvAsOpened([sheetFile, plainFile]); // one conversion, British English
            const cell = (cells: OpenedCell[][], row: number, key: string) => cells[row]![HEADER.indexOf(key)]!;

            // The plain CSV is for programs: opened in a spreadsheet, the review's losses.
            assert.deepEqual(cell(plain!, 1, 'donor_phone'), { type: 'float', value: 7700900123, text: '7700900123' });
            assert.deepEqual(cell(plain!, 1, 'payment_confirmation_number').type, 'float');
            assert.equal(cell(plain!, 1, 'donor_first_name').formula, 'of:=HYPERLINK("http://evil.example";"click")', 'a live link');

            assert.deepEqual(sheet![0]!.map((c) => c.text), HEADER);
            for (const [key, stored] of Object.entries(looksLikeValues)) {
              assert.deepEqual(cell(sheet!, 1, key), { type: 'string', text: `'${stored}` }, `${key}: text, shown as stored after the apostrophe`);
            }
            assert.deepEqual(cell(sheet!, 2, 'donor_phone'), { type: 'string', text: "'07700 900123" });
            assert.deepEqual(cell(sheet!, 2, 'donor_address'), { type: 'string', text: '12 High Street' }, 'text that reads as text has no apostrophe');
            // A value column is the value.
            for (const [row, amount] of [[1, 1234.5], [2, 25]] as const) {
              assert.deepEqual(cell(sheet!, row, 'amount'), { type: 'float', value: amount, text: String(amount) });
              const id = rows[row - 1]!.id as number;
              assert.deepEqual(cell(sheet!, row, 'id'), { type: 'float', value: id, text: String(id) });
            }
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      );

      test('--bom with --format jsonl is a usage error: exit 2 with a message, no output', async () => {
        for (const args of [['--bom', '--format', 'jsonl'], ['--format', 'jsonl', '--bom']]) {
          const r = await almoner(ctx.databaseUrl, ['donations', 'export', ...args]);
          assert.equal(r.code, 2, `${args.join(' ')}: exit 2\nstderr: ${r.stderr}`);
          assert.match(r.stderr, /almoner: --bom is for --format csv only/);
          assert.equal(r.stdout, '');
        }
      });
    });
  }
});
