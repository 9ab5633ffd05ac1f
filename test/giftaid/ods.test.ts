// The schedule spreadsheet writer (src/giftaid/ods.ts) on rows of its own, read back by the
// independent reader: what it does with any text, its limits, and the same bytes for the same rows.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { strFromU8, strToU8, unzipSync, zipSync } from 'fflate';
import { scheduleSpreadsheet, type SpreadsheetOptions } from '../../src/giftaid/ods.js';
import type { ScheduleRow } from '../../src/giftaid/schedule.js';
import { noLibreOffice, savedByLibreOffice } from '../support/libreoffice.js';
import { giftAidRows, hmrcProblems, packageProblems, readOds, type OdsFile } from '../support/ods.js';

const dir = mkdtempSync(join(tmpdir(), 'almoner-ods-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const row = (overrides: Partial<ScheduleRow> = {}): ScheduleRow => ({
  donationId: 1,
  firstName: 'Jane',
  lastName: 'Doe',
  houseNameOrNumber: '12',
  postcode: 'SW1A 1AA',
  donationDay: '2025-02-25',
  amountMinor: 2500,
  ...overrides,
});

const options = (rows: ScheduleRow[]): SpreadsheetOptions => ({ rows, use: 'claim', preparedAt: '2025-03-01T10:00:00.000000Z', about: ['About <this> & "that"'], title: "Claim 1 for O'Brien & Co" });

let n = 0;
async function written(rows: ScheduleRow[]): Promise<OdsFile> {
  const path = join(dir, `s${++n}.ods`);
  writeFileSync(path, scheduleSpreadsheet(options(rows)));
  return readOds(path);
}

describe('the schedule spreadsheet', () => {
  test('saved again by LibreOffice, as a person checking it or filling in D17 does, HMRC still reads D13 and every row', { skip: noLibreOffice }, async () => {
    // LibreOffice writes equal neighbouring cells as one with table:number-columns-repeated, and HMRC reads
    // D13 and D17 as the 4th cell element of their rows: with A and B both bare, it read "" (a review, 2026-11-28).
    const path = join(dir, 'resaved-source.ods');
    writeFileSync(path, scheduleSpreadsheet(options([row({ donationDay: '2025-02-25' }), row({ donationId: 2, donationDay: '2024-12-31', firstName: 'Ann' })])));
    const savedDir = mkdtempSync(join(dir, 'saved-'));
    const [saved] = await savedByLibreOffice([path], savedDir);
    const f = await readOds(saved!);
    assert.equal(f.cellAt(12, 3), '31/12/24', 'D13 as HMRC reads it');
    assert.deepEqual(hmrcProblems(f, '2026-11-28', { ourRules: false }), []);
    assert.deepEqual(giftAidRows(f).map((r) => r.firstName), ['Jane', 'Ann']);
  });

  test('an over-claimed amount typed into D17 and saved by LibreOffice is read by HMRC with its two decimals', { skip: noLibreOffice }, async () => {
    // D17 as LibreOffice holds a number typed there (12.50 or 12.5 typed are the value 12.5), then the
    // file saved again: the text HMRC reads is the cell's value as its format shows it. Without a
    // two-decimal format it was "12.5" (and "20" for 20.00), which HMRC's checker refuses.
    const files = unzipSync(scheduleSpreadsheet(options([row()])));
    const content = strFromU8(files['content.xml']!);
    const d17 = /(<table:table-row>(?:<table:table-cell[^>]*\/>|<table:table-cell[^>]*>.*?<\/table:table-cell>){3})<table:table-cell( table:style-name="[^"]*")? office:value-type="string"><\/table:table-cell>/;
    const rows = content.split('</table:table-row>');
    const row17 = rows[16]!;
    assert.match(row17, d17, 'D17 is an empty string cell');
    for (const [typed, shown] of [['12.5', '12.50'], ['20', '20.00']] as const) {
      rows[16] = row17.replace(d17, `$1<table:table-cell$2 office:value-type="float" office:value="${typed}"/>`);
      const source = join(dir, `d17-${typed}.ods`);
      writeFileSync(source, zipSync({ ...Object.fromEntries(Object.entries(files).map(([name, bytes]) => [name, [bytes, { level: name === 'mimetype' ? 0 : 6 }]])), 'content.xml': strToU8(rows.join('</table:table-row>')) }));
      const [saved] = await savedByLibreOffice([source], mkdtempSync(join(dir, 'saved-')));
      const f = await readOds(saved!);
      assert.equal(f.cellAt(16, 3), shown, `D17 typed as ${typed}, as HMRC reads it`);
      assert.deepEqual(hmrcProblems(f, '2026-11-28', { ourRules: false }), [], `D17 typed as ${typed}`);
    }
  });

  test('text comes back exactly: XML characters escaped, runs of spaces and a leading space kept', async () => {
    const names = ['A & B', '<b>Bold</b>', `"Quoted" 'n'`, 'Two  spaces', 'Five     spaces'];
    const f = await written(names.map((lastName, i) => row({ donationId: i + 1, lastName })));
    assert.deepEqual(
      giftAidRows(f).map((r) => r.lastName),
      names,
    );
    assert.deepEqual(packageProblems(f), []);
    assert.match(f.rows(3)[2]![1]!, /^About <this> & "that"$/);
  });

  test('the same rows make the same bytes under any time zone (a zip entry time is local time)', () => {
    const zone = process.env.TZ;
    const under = (tz: string) => {
      process.env.TZ = tz;
      return Buffer.from(scheduleSpreadsheet(options([row()])));
    };
    try {
      const utc = under('UTC');
      for (const tz of ['Europe/London', 'America/New_York', 'Asia/Kolkata']) assert.ok(under(tz).equals(utc), tz);
      assert.equal(process.env.TZ, 'Asia/Kolkata', "the caller's TZ is left as it was");
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  test('a character XML cannot hold is refused, not written', () => {
    assert.throws(() => scheduleSpreadsheet(options([row({ lastName: 'Doe\u0001' })])), /U\+0001 cannot be written in XML/);
  });

  test('1 to 1,000 rows: none or more is a programming error', async () => {
    assert.throws(() => scheduleSpreadsheet(options([])), RangeError);
    assert.throws(() => scheduleSpreadsheet(options(Array.from({ length: 1001 }, (_, i) => row({ donationId: i + 1 })))), RangeError);
    const f = await written(Array.from({ length: 1000 }, (_, i) => row({ donationId: i + 1, lastName: `Doe ${i}`, amountMinor: i + 1 })));
    assert.equal(giftAidRows(f).length, 1000);
    assert.equal(giftAidRows(f)[999]!.rowIndex, 1023, 'the last donation in row 1,024');
    assert.deepEqual(hmrcProblems(f, '2025-03-01'), []);
  });

  test('D13 is the earliest date of the rows, whatever their order', async () => {
    const f = await written([row({ donationDay: '2025-02-25' }), row({ donationId: 2, donationDay: '2024-12-31' })]);
    assert.equal(f.cellAt(12, 3), '31/12/24');
  });

  test('the same rows and preparation time give the same bytes', () => {
    const rows = [row(), row({ donationId: 2, lastName: 'Roe' })];
    assert.ok(Buffer.from(scheduleSpreadsheet(options(rows))).equals(Buffer.from(scheduleSpreadsheet(options(rows)))));
  });
});
