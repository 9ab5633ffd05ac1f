// bin/almoner giftaid: the needs-attention CSV that a claim and a preview write, read back by a
// standard CSV parser, with a bare LF, a bare CR, CRLF, double quotes and commas in its fields, and
// a formula opener and text a spreadsheet would read as a number, date or boolean shown as text
// (opened in LibreOffice).
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'csv-parse/sync';
import type { DonationInput } from '../../src/client/index.js';
import { exampleDonation, startTestApp, tempDir, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { almoner, assertBuilt, type Run } from '../support/cli.js';
import { parseCsv } from '../support/csv.js';
import { csvAsOpened, noLibreOffice } from '../support/libreoffice.js';

const ATTENTION_HEADER = ['id', 'donor_first_name', 'donor_last_name', 'donor_email', 'donor_address', 'donor_city', 'donor_postcode', 'donation_date', 'amount', 'reason'];

/** Gift Aid donations that cannot be claimed as they stand, each with awkward text, and the reason. */
const AWKWARD: Array<{ body: Record<string, unknown>; reason: string }> = [
  { body: { donor_first_name: 'Ann\nMarie', donor_last_name: null, donor_address: '42\nMain Road' }, reason: 'no last name' },
  { body: { donor_address: 'Flat 1\rRose Court', donor_city: 'St\rIves', donor_postcode: undefined }, reason: 'no postcode' },
  { body: { donor_last_name: 'O"Brien', donor_address: '', donor_city: 'Hull, East Riding' }, reason: 'no house name or number (donor_address is empty, or stands for none: "-", "N/A")' },
  {
    body: { donor_address: '7 Rue "Haute", Paris', donor_postcode: '75008, Paris', donor_email: '"x,\ny"@example.com' },
    reason: 'postcode "75008, Paris" is not a UK postcode (use X for a donor living outside the UK)',
  },
  {
    body: { donor_first_name: '=1+2', donor_last_name: 'Doe 😀', donor_address: 'Flat 2\r\n3 High St', donor_city: ' Zürich\t' },
    reason: 'first name has no letters; last name holds "😀", which HMRC\'s schedule cannot hold and which has no plain-letter spelling',
  },
  // Text a spreadsheet reads as a number, a date or a boolean (a review: 01234 lost its zero).
  { body: { donor_last_name: 'TRUE', donor_city: '12-03', donor_postcode: '01234' }, reason: 'postcode "01234" is not a UK postcode (use X for a donor living outside the UK)' },
];

/** The text cells a spreadsheet would read as something else, as the file has them: an apostrophe first. */
const AS_TEXT: Record<string, string> = { '=1+2': "'=1+2", TRUE: "'TRUE", '12-03': "'12-03", '01234': "'01234" };

/** Today where the claim is made, as the command reckons it. */
function todayInUk(): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
}

/** csv-parse taking any line break for a record end, as many readers do (see export-csv.test.ts). */
function readAttention(path: string): string[][] {
  const bytes = readFileSync(path);
  assert.deepEqual(bytes.subarray(0, 3), Buffer.from([0xef, 0xbb, 0xbf]), `${path} starts with a UTF-8 byte order mark`);
  const text = bytes.subarray(3).toString('utf8');
  const rows = parse(text, { record_delimiter: ['\r\n', '\n', '\r'] }) as string[][];
  assert.deepEqual(parseCsv(text), rows, 'a strict RFC 4180 reader (CRLF record ends, line breaks only inside quotes) agrees');
  return rows;
}

function json<T>(run: Run): T {
  assert.equal(run.code, 0, `exit ${run.code}\nstderr: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

describe('bin/almoner giftaid: needs-attention CSV that reads back exactly', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`needs-attention CSV [${backend.name}]`, { concurrency: 1 }, () => {
      let ctx: TestContext;
      let dir: string;
      const today = todayInUk();
      const recent = new Date(Date.parse(`${today}T00:00:00Z`) - 30 * 86_400_000).toISOString().slice(0, 10);
      /** The rows each needs-attention file must hold, in id order. */
      const expected: string[][] = [ATTENTION_HEADER];

      before(async () => {
        assertBuilt();
        ctx = await startTestApp(backend);
        dir = tempDir();
        const client = await ctx.client();
        const donationDate = `${recent.slice(8, 10)}-${recent.slice(5, 7)}-${recent.slice(0, 4)}`;
        await client.createDonation(exampleDonation({ donation_date: donationDate }) as unknown as DonationInput); // claimable, so a claim is made
        for (const { body, reason } of AWKWARD) {
          const { record: r } = await client.createDonation(exampleDonation({ donation_date: donationDate, ...body }) as unknown as DonationInput);
          const cells = [r.donor_first_name, r.donor_last_name, r.donor_email, r.donor_address, r.donor_city, r.donor_postcode].map((v) => v ?? '');
          // For a spreadsheet: a cell that would start a formula has an apostrophe first (=1+2 was a formula until 2026-11-29), as text read as a value has.
          expected.push([String(r.id), ...cells.map((v) => AS_TEXT[v] ?? v), recent, r.amount, reason]);
        }
      });

      after(async () => {
        await ctx?.close();
        if (dir) rmSync(dir, { recursive: true, force: true });
      });

      test('the preview (giftaid schedule) writes needs-attention-USERNAME.csv with every field as recorded', async () => {
        const preview = json<{ needs_attention: string | null }>(
          await almoner(ctx.databaseUrl, ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', '2000-01-01', '--to', today, '--out', join(dir, 'preview'), '--json']),
        );
        assert.equal(preview.needs_attention, join(dir, 'preview', `needs-attention-${ctx.charity.username}.csv`));
        assert.deepEqual(readAttention(preview.needs_attention), expected);
      });

      test(
        'LibreOffice opens needs-attention-USERNAME.csv with the text as text (apostrophe first where needed), the id and amount as numbers and the day as a date',
        { skip: noLibreOffice ?? (backend !== BACKENDS[0] && 'the file is the same from either backend: opened once') },
        async () => {
          const out = join(dir, 'opened');
          const preview = json<{ needs_attention: string }>(
            await almoner(ctx.databaseUrl, ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', '2000-01-01', '--to', today, '--out', out, '--json']),
          );
          const [cells] = await csvAsOpened([preview.needs_attention]); // one conversion, British English
          assert.deepEqual(cells![0]!.map((c) => c.text), ATTENTION_HEADER);
          assert.equal(cells!.length, expected.length, 'a row a donation');
          for (const [row, written] of expected.entries()) {
            if (row === 0) continue;
            const opened = cells![row]!;
            const column = (name: string) => opened[ATTENTION_HEADER.indexOf(name)]!;
            assert.deepEqual(column('id'), { type: 'float', value: Number(written[0]), text: written[0] }, 'the id is a number');
            assert.deepEqual(column('amount'), { type: 'float', value: 25, text: '25' }, 'the amount is a number');
            assert.equal(column('donation_date').type, 'date');
            assert.equal(column('donation_date').text, recent, 'the day, shown as written');
            // Every text cell is text, shown as the file has it: the apostrophe first where one was needed (line breaks aside: Calc makes them paragraphs).
            for (const name of ['donor_first_name', 'donor_last_name', 'donor_email', 'donor_address', 'donor_city', 'donor_postcode', 'reason']) {
              const text = written[ATTENTION_HEADER.indexOf(name)]!;
              const cell = column(name);
              if (text === '') assert.equal(cell.type, 'empty', `row ${row} ${name}`);
              else assert.deepEqual({ type: cell.type, text: cell.text.replace(/\n/g, '') }, { type: 'string', text: text.replace(/[\r\n]/g, '') }, `row ${row} ${name}`);
            }
          }
          const last = cells!.at(-1)!;
          assert.deepEqual(
            ['donor_last_name', 'donor_city', 'donor_postcode'].map((name) => last[ATTENTION_HEADER.indexOf(name)]),
            [{ type: 'string', text: "'TRUE" }, { type: 'string', text: "'12-03" }, { type: 'string', text: "'01234" }],
          );
        },
      );

      test('a claim (giftaid claim) writes claim-ID-needs-attention.csv with every field as recorded', async () => {
        const claim = json<{ claim: number | null; needs_attention: string | null }>(
          await almoner(ctx.databaseUrl, ['giftaid', 'claim', '--charity', ctx.charity.username, '--out', join(dir, 'claim'), '--json']),
        );
        assert.ok(claim.claim !== null, 'a claim was made');
        assert.equal(claim.needs_attention, join(dir, 'claim', `claim-${claim.claim}-needs-attention.csv`));
        assert.deepEqual(readAttention(claim.needs_attention), expected);
      });
    });
  }
});
