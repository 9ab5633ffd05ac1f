// The text rule of the CSV Almoner writes for spreadsheets (src/cli/csv.ts: asText), held to
// LibreOffice Calc: text that Calc, in British English or German, reads as a number, date, time,
// boolean or percentage gets an apostrophe first, and with it opens as text, apostrophe and all;
// text Calc leaves alone gets none.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'csv-stringify/sync';
import { asText, readAsValue, RFC_4180 } from '../../src/cli/csv.js';
import { csvAsOpened, noLibreOffice, type OpenedCell } from '../support/libreoffice.js';

/**
 * Text that LibreOffice 7.4 read as a value in British or American English, German or French
 * (measured; the test opens it in two of them, each conversion taking seconds), or Excel does (gene
 * names: SEPT1 was 1 September).
 */
const READ_AS_VALUES = [
  ...['07700900123', '0012', '12345678901234567890', '1e5', '1E-05', '1.e5', '0.50', '.5', '5.', '1,000', '1,000,000', '1.000.000', '0,5', '1 000', '(123)', '1-'],
  ...['50%', '12.5 %', '£1,000.00', '$1,000', '€1.000,00', '100 $', '1 1/2', '0 1/2'],
  ...['1/2', '5/1', '12-03', '1-2', '12.03.', '1/2/3', '21/2/1', '1.2.2021', '25/02/2021', '2021-02-25', '20210225', '2021-02-25 10:00', '2021-02-25T10:00'],
  ...['12:30', '1:2', '24:00', '12:30:45.5', '10AM', '10:00 pm'],
  ...['Jan 5', '5 Jan', 'Jan-21', '1/Jan', '1.Jan', '12-Jan-2021', '5 Jan 2021', 'Mon 5 Jan', 'Monday 5 January 2021', '3 Sept', 'Sept 3', '5 Mai', '5 Okt', '5 mars', '5 janv.', '1. Januar'],
  ...['SEPT1', 'MARCH1', 'DEC1'],
  ...['TRUE', 'true', 'False', 'WAHR', 'falsch', 'VRAI', 'faux', '#N/A', '#DIV/0!'],
  ...[' 123', '123 '],
];

/** Text that every spreadsheet shows as it is, so it gets no apostrophe. */
const TEXT = ['', 'Jane', '12 High Street', '1 March Road', 'Flat 3', 'SW1A 1AA', 'PAY-123456', 'cash', 'jane.doe@example.com', '2001:db8::1', 'Q1 2021', '1st', '0x1A', 'March', "'07700"];

/** The languages Calc opens the file in (Windows language ids): the UK's, and one writing dates with dots and decimals with a comma. */
const LANGUAGES = { 'en-GB': 2057, 'de-DE': 1031 } as const;

describe('asText: text a spreadsheet would read as a value, with an apostrophe first', () => {
  test('the examples the README gives, and text that stays as it is', () => {
    assert.deepEqual(
      ['07700900123', '12345678901234567890', '1e5', '1/2', '12-03', '0.50', 'TRUE', '50%', '07700 900123', '203.0.113.7'].map(asText),
      ["'07700900123", "'12345678901234567890", "'1e5", "'1/2", "'12-03", "'0.50", "'TRUE", "'50%", "'07700 900123", "'203.0.113.7"],
    );
    for (const text of TEXT) assert.equal(asText(text), text, JSON.stringify(text));
    // One apostrophe, whichever rule asks for it; formula openers as before.
    assert.deepEqual(['-1', '+44 7700 900123', '=1+1', '\t0123', 'Smith;=1+1', '1;=2'].map(asText), ["'-1", "'+44 7700 900123", "'=1+1", "'\t0123", "Smith;'=1+1", "'1;'=2"]);
  });

  test(
    'LibreOffice, in British English and German: every value it reads from the text is one asText marks, and each marked cell opens as text, apostrophe and all',
    { skip: noLibreOffice },
    async () => {
      const values = [...READ_AS_VALUES, ...TEXT];
      const dir = mkdtempSync(join(tmpdir(), 'almoner-sheet-'));
      try {
        const file = join(dir, 'text.csv');
        writeFileSync(file, stringify([['as stored', 'asText'], ...values.map((v) => [v, asText(v)])], { bom: true, ...RFC_4180 }));
        // One conversion per language, one after another (at once, they took as long on two cores).
        const opened: OpenedCell[][][] = [];
        for (const language of Object.values(LANGUAGES)) opened.push((await csvAsOpened([file], language))[0]!);
        for (const [i, [name]] of Object.entries(LANGUAGES).entries()) {
          const rows = opened[i]!.slice(1);
          assert.equal(rows.length, values.length, `${name}: one row a value`);
          const readAsText = (cell: OpenedCell | undefined, text: string) => (text === '' ? cell === undefined || cell.type === 'empty' : cell?.type === 'string' && cell.text === text);
          // What Calc made of the text as stored: a value only where asText marks it.
          const unmarkedValues = values.filter((v, row) => !readAsText(rows[row]![0], v) && !readAsValue(v));
          assert.deepEqual(unmarkedValues, [], `${name}: text LibreOffice reads as a value, which asText leaves unmarked`);
          const plainText = TEXT.filter((v) => !readAsText(rows[values.indexOf(v)]![0], v));
          assert.deepEqual(plainText, [], `${name}: text LibreOffice shows as it is`);
          // asText's cells: text, shown as written, apostrophe first.
          const notText = values.flatMap((v, row) => (readAsText(rows[row]![1], asText(v)) ? [] : [{ v, cell: rows[row]![1] }]));
          assert.deepEqual(notText, [], `${name}: asText's cells open as the text written`);
        }
        const readByNoOne = READ_AS_VALUES.filter((v) => opened.every((rows) => rows[values.indexOf(v) + 1]![0]!.type === 'string'));
        // The rest: read by LibreOffice in American English (dollars) or French (a space grouping thousands, months, booleans), measured, or by Excel.
        assert.deepEqual(readByNoOne, ['1 000', '$1,000', '100 $', '5 mars', '5 janv.', 'SEPT1', 'MARCH1', 'DEC1', 'VRAI', 'faux', '#N/A', '#DIV/0!']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
