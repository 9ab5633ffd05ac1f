// The independent .ods reader and checker in test/support/ods.ts, which tests use to check the Gift
// Aid schedules we write the way HMRC's upload checker reads them. Each file here is built by hand
// (fflate and XML strings), so the reader is tested without our writer and without HMRC's files.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { strToU8, zipSync, type ZipOptions } from 'fflate';
import { giftAidRows, hmrcProblems, packageProblems, readOds, type GiftAidRow, type OdsFile } from '../support/ods.js';

const TODAY = '2025-06-15';
const MIME = 'application/vnd.oasis.opendocument.spreadsheet';

const dir = mkdtempSync(join(tmpdir(), 'ods-reader-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let written = 0;

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A cell: '' is an empty cell, anything else one paragraph of text; raw XML passes as { xml }. */
type CellSpec = string | { xml: string };
const cell = (c: CellSpec): string =>
  typeof c === 'string' ? (c === '' ? '<table:table-cell/>' : `<table:table-cell office:value-type="string"><text:p>${esc(c)}</text:p></table:table-cell>`) : c.xml;
const row = (cells: CellSpec[], attrs = ''): string => `<table:table-row${attrs}>${cells.map(cell).join('')}</table:table-row>`;
const blankRows = (n: number): string => `<table:table-row table:number-rows-repeated="${n}"><table:table-cell/></table:table-row>`;

/** The fields of one donation, B to K, as the reader gives them back. */
type Donation = Omit<GiftAidRow, 'rowIndex'>;
const donation = (d: Partial<Donation> = {}): Donation => ({
  item: '1',
  title: 'Mrs',
  firstName: 'Ann',
  lastName: 'Smith',
  house: '1',
  postcode: 'AB1 2CD',
  aggregated: '',
  sponsored: '',
  date: '01/05/25',
  amount: '10.00',
  ...d,
});
const donationRow = (d: Donation): string =>
  row(['', d.item, d.title, d.firstName, d.lastName, d.house, d.postcode, d.aggregated, d.sponsored, d.date, d.amount]);

/** The sheet's rows: 0-11 blank, D13 the earliest date, D17 the over-claimed amount, 18-23 blank, then the donations. */
function sheetRows(opts: { earliest?: string; overClaimed?: string; donations?: Donation[] } = {}): string {
  const donations = opts.donations ?? [donation()];
  return [
    blankRows(12),
    row(['', '', 'Box 1', opts.earliest ?? '01/04/25']),
    blankRows(3),
    row(['', '', 'Box 2', opts.overClaimed ?? '']),
    blankRows(7),
    ...donations.map(donationRow),
  ].join('');
}

const NS =
  'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" ' +
  'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"';
const contentXml = (tableBody: string, sheetName = 'R68GAD_V1_00_0_EN'): string =>
  `<?xml version="1.0" encoding="UTF-8"?><office:document-content ${NS} office:version="1.3"><office:body><office:spreadsheet>` +
  `<table:table table:name="${sheetName}">${tableBody}</table:table></office:spreadsheet></office:body></office:document-content>`;
const STYLES = `<?xml version="1.0" encoding="UTF-8"?><office:document-styles ${NS} office:version="1.3"/>`;
const META = `<?xml version="1.0" encoding="UTF-8"?><office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" office:version="1.3"/>`;
const manifest = (paths: [string, string][] = [['/', MIME], ['content.xml', 'text/xml'], ['styles.xml', 'text/xml'], ['meta.xml', 'text/xml']]): string =>
  `<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">` +
  paths.map(([p, t]) => `<manifest:file-entry manifest:full-path="${p}" manifest:media-type="${t}"/>`).join('') +
  '</manifest:manifest>';

type Entries = Record<string, [Uint8Array, ZipOptions]>;
const MTIME = new Date('2025-06-01T00:00:00Z');
const entry = (text: string, opts: ZipOptions = {}): [Uint8Array, ZipOptions] => [strToU8(text), { level: 6, mtime: MTIME, ...opts }];

/** A complete package around the given content.xml. */
function packageEntries(content: string): Entries {
  return {
    mimetype: entry(MIME, { level: 0 }),
    'content.xml': entry(content),
    'styles.xml': entry(STYLES),
    'meta.xml': entry(META),
    'META-INF/manifest.xml': entry(manifest()),
  };
}

async function open(bytes: Uint8Array): Promise<OdsFile> {
  const path = join(dir, `f${++written}.ods`);
  writeFileSync(path, bytes);
  return readOds(path);
}
const openEntries = (entries: Entries): Promise<OdsFile> => open(zipSync(entries));
const openSheet = (tableBody: string, sheetName?: string): Promise<OdsFile> => openEntries(packageEntries(contentXml(tableBody, sheetName)));
const openDonations = (donations: Donation[], opts: { earliest?: string; overClaimed?: string } = {}): Promise<OdsFile> =>
  openSheet(sheetRows({ ...opts, donations }));

/** HMRC's problems only, without our stricter rules. */
const hmrcOnly = (f: OdsFile): string[] => hmrcProblems(f, TODAY, { ourRules: false });
const ourOnly = (f: OdsFile): string[] => hmrcProblems(f, TODAY).filter((p) => p.endsWith('(our rule)'));

describe('a correct minimal file', () => {
  test('passes every check', async () => {
    const f = await openDonations([donation(), donation({ item: '2', title: '', postcode: 'X', amount: '1250.50' })]);
    assert.deepEqual(packageProblems(f), []);
    assert.deepEqual(hmrcProblems(f, TODAY), []);
    assert.equal(f.sheetName, 'R68GAD_V1_00_0_EN');
    assert.deepEqual(
      f.entries.map((e) => e.name),
      ['mimetype', 'content.xml', 'styles.xml', 'meta.xml', 'META-INF/manifest.xml'],
    );
    assert.equal(f.files.get('mimetype')?.toString(), MIME);
    assert.equal(f.cellAt(12, 3), '01/04/25');
    assert.deepEqual(
      giftAidRows(f).map((r) => [r.rowIndex, r.item, r.lastName, r.postcode, r.amount]),
      [
        [24, '1', 'Smith', 'AB1 2CD', '10.00'],
        [25, '2', 'Smith', 'X', '1250.50'],
      ],
    );
  });
});

describe('reading the sheet as HMRC does', () => {
  test('rows are repeated table:number-rows-repeated times, cut to maxRows; 0 or less gives none', async () => {
    const f = await openSheet(
      [
        row(['a'], ' table:number-rows-repeated="3"'),
        row(['gone'], ' table:number-rows-repeated="0"'),
        row(['gone too'], ' table:number-rows-repeated="-2"'),
        row(['b'], ' table:number-rows-repeated="x"'),
        // Scala's toIntOption takes any Unicode decimal digit: ARABIC-INDIC DIGIT TWO is 2.
        row(['two'], ' table:number-rows-repeated="\u0662"'),
        row(['c'], ' table:number-rows-repeated="1000000"'),
      ].join(''),
    );
    const rows = f.rows(10, 2);
    assert.equal(rows.length, 10);
    assert.deepEqual(
      rows.map((r) => r[0]),
      ['a', 'a', 'a', 'b', 'two', 'two', 'c', 'c', 'c', 'c'],
    );
    assert.deepEqual(rows[0], ['a', '']);
    // The donation row is found at index 24 however the rows before it are repeated.
    const g = await openDonations([donation()]);
    assert.equal(giftAidRows(g)[0]?.rowIndex, 24);
  });

  test('cells are repeated, and table:covered-table-cell is not counted', async () => {
    const f = await openSheet(
      row([
        { xml: '<table:table-cell table:number-columns-spanned="2"><text:p>merged</text:p></table:table-cell>' },
        { xml: '<table:covered-table-cell><text:p>hidden</text:p></table:covered-table-cell>' },
        { xml: '<table:table-cell table:number-columns-repeated="2"><text:p>r</text:p></table:table-cell>' },
        { xml: '<table:table-cell table:number-columns-repeated="0"><text:p>one</text:p></table:table-cell>' },
        'last',
      ]),
    );
    assert.deepEqual(f.rows(1, 6)[0], ['merged', 'r', 'r', 'one', 'last', '']);
  });

  test('rows inside a row group or header rows are invisible to HMRC', async () => {
    const f = await openSheet(
      [
        row(['first']),
        `<table:table-header-rows>${row(['header'])}</table:table-header-rows>`,
        `<table:table-row-group>${row(['grouped'])}</table:table-row-group>`,
        row(['second']),
      ].join(''),
    );
    assert.deepEqual(
      f.rows(10, 1).map((r) => r[0]),
      ['first', 'second'],
    );
    // A sheet whose donation rows sit in a row group: HMRC finds no donations at all.
    const g = await openSheet(`${blankRows(24)}<table:table-row-group>${donationRow(donation())}</table:table-row-group>`);
    assert.deepEqual(giftAidRows(g), []);
    assert.deepEqual(hmrcProblems(g, TODAY), ['no donation rows in rows 25 to 1,024 (HMRC: Enter details for at least one Gift Aid donation)']);
    // Header rows before the donations shift HMRC's row numbers (the sheet shows this donation in
    // row 26, HMRC reads it as row 25), which our rule reports.
    const h = await openSheet(sheetRows().replace(blankRows(7), `${blankRows(7)}<table:table-header-rows>${row(['Item'])}</table:table-header-rows>`));
    assert.equal(giftAidRows(h)[0]?.rowIndex, 24);
    assert.ok(ourOnly(h).some((p) => p.startsWith('the sheet has table:table-row elements inside')));
  });

  test('cellAt counts table:table-cell elements without expanding repeats', async () => {
    const body = [
      blankRows(12),
      row([{ xml: '<table:table-cell table:number-columns-repeated="3"/>' }, '01/04/25', 'E13']),
      blankRows(3),
      row(['', '', 'Box 2', '']),
      blankRows(7),
      donationRow(donation()),
    ].join('');
    const f = await openSheet(body);
    assert.equal(f.rows(13, 5)[12]?.[3], '01/04/25'); // column D, as a spreadsheet shows it
    assert.equal(f.cellAt(12, 1), '01/04/25'); // the 2nd element
    assert.equal(f.cellAt(12, 2), 'E13');
    assert.equal(f.cellAt(12, 3), ''); // there is no 4th element
    assert.equal(f.cellAt(99, 0), '');
    const problems = hmrcProblems(f, TODAY);
    assert.equal(problems[0], 'D13: earliest donation date missing');
    assert.ok(problems.some((p) => p.startsWith('D13: HMRC reads "" (table:table-cell element 4 of the row) but the sheet shows "01/04/25" there')));
  });

  // Spaces written literally inside text:p are kept as they are (HMRC does not apply ODF's
  // white-space collapsing), then the whole cell is trimmed.
  test('cell text: text:s spaces, spans, literal spaces kept, paragraphs joined with a newline, trimmed; CDATA and text:tab give nothing', async () => {
    const f = await openSheet(
      row([
        { xml: '<table:table-cell><text:p>A<text:s/>B<text:s text:c="3"/>C</text:p></table:table-cell>' },
        { xml: '<table:table-cell><text:p>  <text:span>x<text:span>y</text:span></text:span>  </text:p><text:p>z</text:p></table:table-cell>' },
        { xml: '<table:table-cell office:value-type="float" office:value="5"><text:p>a<text:tab/>b<![CDATA[c]]></text:p></table:table-cell>' },
        { xml: '<table:table-cell office:value-type="float" office:value="5"/>' },
      ]),
    );
    assert.deepEqual(f.rows(1, 4)[0], ['A B   C', 'xy  \nz', 'ab', '']);
  });
});

describe('HMRC rules, one problem each', () => {
  const cases: [string, Partial<Donation>, string][] = [
    ['item not a number', { item: 'one' }, 'row 25: item "one" is not a whole number from 1 to 1000'],
    ['item with a leading zero', { item: '01' }, 'row 25: item "01" is not a whole number from 1 to 1000'],
    ['title too short', { title: 'M' }, 'row 25: donor title "M" is not 2 to 4 letters, apostrophes or hyphens starting with a letter'],
    ['title with a full stop', { title: 'Mr.' }, 'row 25: donor title "Mr." is not 2 to 4 letters, apostrophes or hyphens starting with a letter'],
    ['first name missing', { firstName: '' }, 'row 25: donor first name missing'],
    ['first name too long', { firstName: 'A'.repeat(36) }, 'row 25: donor first name is longer than 35 characters (36)'],
    ['last name missing', { lastName: '' }, 'row 25: donor last name missing'],
    ['last name too long', { lastName: 'B'.repeat(36) }, 'row 25: donor last name is longer than 35 characters (36)'],
    ['house missing', { house: '' }, 'row 25: donor house name or number missing'],
    ['house too long', { house: 'C'.repeat(41) }, 'row 25: donor house name or number is longer than 40 characters (41)'],
    ['postcode missing', { postcode: '' }, 'row 25: donor postcode missing'],
    ['postcode malformed', { postcode: 'AB1 2C' }, 'row 25: donor postcode "AB1 2C" is not a UK postcode or X'],
    ['postcode with I as 2nd letter', { postcode: 'AI1 2CD' }, 'row 25: donor postcode "AI1 2CD" is not a UK postcode or X'],
    ['lower-case x for abroad', { postcode: 'x' }, 'row 25: donor postcode "x" is not a UK postcode or X'],
    ['sponsored not yes', { sponsored: 'no' }, 'row 25: sponsored event "no" is neither blank nor Yes'],
    ['date missing', { date: '' }, 'row 25: donation date missing'],
    ['date not DD/MM/YY', { date: '1/5/25' }, 'row 25: donation date "1/5/25" is not a DD/MM/YY date'],
    ['date not a real day', { date: '29/02/25' }, 'row 25: donation date "29/02/25" is not a DD/MM/YY date'],
    ['date in the future', { date: '16/06/25' }, 'row 25: donation date "16/06/25" is in the future (after 2025-06-15)'],
    ['amount missing', { amount: '' }, 'row 25: donation amount missing'],
    ['amount without pence', { amount: '10' }, 'row 25: donation amount "10" is not an amount with 2 decimal places from 0.01 to 9999999999999.99'],
    ['amount zero', { amount: '0.00' }, 'row 25: donation amount "0.00" is not an amount with 2 decimal places from 0.01 to 9999999999999.99'],
    ['amount of 16 digits', { amount: '12345678901234.00' }, 'row 25: donation amount "12345678901234.00" is not an amount with 2 decimal places from 0.01 to 9999999999999.99'],
    ['aggregated too long', { title: '', firstName: '', lastName: '', house: '', postcode: '', aggregated: 'D'.repeat(36) }, 'row 25: aggregated donations is longer than 35 characters (36)'],
    ['aggregated row with a title', { firstName: '', lastName: '', house: '', postcode: '', aggregated: 'Collection' }, 'row 25: an aggregated donation cannot have a donor title'],
    ['aggregated row with a postcode', { title: '', firstName: '', lastName: '', house: '', aggregated: 'Collection' }, 'row 25: an aggregated donation cannot have a donor postcode'],
    ['aggregated amount over 1000', { title: '', firstName: '', lastName: '', house: '', postcode: '', aggregated: 'Collection', amount: '1000.01' }, 'row 25: aggregated donation amount "1000.01" is over 1000.00'],
  ];
  for (const [name, change, problem] of cases) {
    test(name, async () => {
      const f = await openDonations([donation(change)]);
      assert.deepEqual(hmrcOnly(f), [problem]);
    });
  }

  test('what HMRC accepts: Yes in any case, X, exponent amounts, aggregated rows without donor, dates up to today', async () => {
    const f = await openDonations([
      donation({ sponsored: 'YES', date: '15/06/25' }),
      donation({ item: '2', postcode: 'X', amount: '1000E-2' }),
      donation({ item: '3', title: '', firstName: '', lastName: '', house: '', postcode: '', aggregated: 'Collection', amount: '1000.00' }),
      donation({ item: '4', postcode: 'gir 0aa', amount: '1,000.00' }),
    ]);
    assert.deepEqual(hmrcOnly(f), []);
  });

  test('earliest donation date and over-claimed amount', async () => {
    assert.deepEqual(hmrcOnly(await openDonations([donation()], { earliest: '' })), ['D13: earliest donation date missing']);
    assert.deepEqual(hmrcOnly(await openDonations([donation()], { earliest: '2025-04-01' })), ['D13: earliest donation date "2025-04-01" is not a DD/MM/YY date']);
    assert.deepEqual(hmrcOnly(await openDonations([donation()], { overClaimed: '12.5' })), [
      'D17: previously over-claimed amount "12.5" is not a positive amount with 2 decimal places',
    ]);
    assert.deepEqual(hmrcOnly(await openDonations([donation()], { overClaimed: '-1.00' })), [
      'D17: previously over-claimed amount "-1.00" is not a positive amount with 2 decimal places',
    ]);
    assert.deepEqual(hmrcOnly(await openDonations([donation()], { overClaimed: '1,234.50' })), []);
  });

  test('a wrong sheet name and a sheet with no donations each stop HMRC with one problem', async () => {
    assert.deepEqual(hmrcProblems(await openSheet(sheetRows(), 'Sheet1'), TODAY), ['sheet name "Sheet1" does not start with R68GAD_V1_00_0']);
    assert.deepEqual(hmrcProblems(await openSheet(sheetRows({ donations: [] })), TODAY), [
      'no donation rows in rows 25 to 1,024 (HMRC: Enter details for at least one Gift Aid donation)',
    ]);
    // A row with only its item number is not a donation (the template numbers all 1,000 rows).
    const f = await openSheet(sheetRows() + row(['', '2']) + row(['', '3']));
    assert.equal(giftAidRows(f).length, 1);
    assert.deepEqual(hmrcProblems(f, TODAY), []);
  });
});

describe('characters HMRC would delete or change', () => {
  test('a value with a character outside Latin-1 passes HMRC but is reported', async () => {
    const f = await openDonations([donation(), donation({ item: '2', firstName: 'Łukasz' })]);
    assert.deepEqual(hmrcOnly(f), []);
    assert.deepEqual(hmrcProblems(f, TODAY), ['row 26: donor first name holds characters HMRC deletes: "Ł" (our rule)']);
  });

  test('two paragraphs, runs of spaces and surrounding spaces are reported', async () => {
    const house = { xml: '<table:table-cell><text:p>Flat 1</text:p><text:p>High St</text:p></table:table-cell>' };
    const last = { xml: '<table:table-cell><text:p>Van<text:s text:c="2"/>Dyke</text:p></table:table-cell>' };
    const first = { xml: '<table:table-cell><text:p><text:s/>Ann</text:p></table:table-cell>' };
    const body = sheetRows({ donations: [] }) + row(['', '1', 'Mrs', first, last, house, 'AB1 2CD', '', '', '01/05/25', '10.00']);
    const f = await openSheet(body);
    assert.equal(giftAidRows(f)[0]?.house, 'Flat 1\nHigh St');
    assert.deepEqual(hmrcOnly(f), []);
    assert.deepEqual(hmrcProblems(f, TODAY), [
      'row 25: donor first name has leading or trailing white space HMRC trims: " Ann" (our rule)',
      'row 25: donor last name has runs of white space HMRC collapses to one space: "Van  Dyke" (our rule)',
      'row 25: donor house name or number holds characters HMRC deletes: "\\n" (our rule)',
    ]);
  });
});

describe('our rules, stricter than HMRC', () => {
  const cases: [string, Partial<Donation>, string][] = [
    ['amount with a comma', { amount: '1,000.00' }, 'row 25: donation amount "1,000.00" is not digits, a point and 2 decimals (our rule)'],
    ['amount with a plus sign', { amount: '+10.00' }, 'row 25: donation amount "+10.00" is not digits, a point and 2 decimals (our rule)'],
    ['postcode in lower case', { postcode: 'ab1 2cd' }, 'row 25: donor postcode "ab1 2cd" is not upper case (our rule)'],
    ['sponsored event', { sponsored: 'Yes' }, 'row 25: sponsored event must be blank (our rule)'],
    ['item not 1', { item: '2' }, 'row 25: item "2" should be 1 (items run 1, 2, 3, ... in row order) (our rule)'],
  ];
  for (const [name, change, problem] of cases) {
    test(name, async () => {
      const f = await openDonations([donation(change)]);
      assert.deepEqual(hmrcOnly(f), []);
      assert.deepEqual(hmrcProblems(f, TODAY), [problem]);
    });
  }

  test('aggregated donations', async () => {
    const f = await openDonations([donation({ title: '', firstName: '', lastName: '', house: '', postcode: '', aggregated: 'Collection' })]);
    assert.deepEqual(hmrcProblems(f, TODAY), ['row 25: aggregated donations must be blank (we never aggregate) (our rule)']);
  });

  test('items with a gap, and a blank row between donations', async () => {
    const f = await openDonations([donation(), donation({ item: '3' })]);
    assert.deepEqual(ourOnly(f), ['row 26: item "3" should be 2 (items run 1, 2, 3, ... in row order) (our rule)']);
    const g = await openSheet(sheetRows() + blankRows(2) + donationRow(donation({ item: '2' })));
    assert.deepEqual(hmrcProblems(g, TODAY), ['rows 26 to 27: no donation, but donations follow (no blank rows between donations) (our rule)']);
  });

  test('a merged cell in a donation row shifts HMRC off the real columns', async () => {
    const first = { xml: '<table:table-cell table:number-columns-spanned="2"><text:p>Ann</text:p></table:table-cell><table:covered-table-cell/>' };
    const f = await openSheet(sheetRows({ donations: [] }) + row(['', '1', 'Mrs', first, '1', 'AB1 2CD', '', '', '01/05/25', '10.00']));
    // HMRC sees the house as the last name and the postcode as the house, and so on.
    assert.equal(giftAidRows(f)[0]?.lastName, '1');
    assert.ok(ourOnly(f).includes('row 25: HMRC reads "1" as column E but the sheet shows "" there (covered, nested or repeated cells) (our rule)'));
  });

  test('a donation past row 1,024 is never read', async () => {
    const f = await openSheet(sheetRows() + blankRows(999) + donationRow(donation({ item: '1001' })));
    assert.equal(giftAidRows(f).length, 1);
    assert.ok(ourOnly(f).includes('row 1025: holds a donation past row 1,024, which HMRC never reads (our rule)'));
  });
});

// --- the OpenDocument package ---

/** The same ZIP with its first two central directory records swapped (local headers untouched). */
function swapCentralRecords(zip: Uint8Array): Uint8Array {
  const buf = Buffer.from(zip);
  const eocd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const cdSize = buf.readUInt32LE(eocd + 12);
  const cdOffset = buf.readUInt32LE(eocd + 16);
  const records: Buffer[] = [];
  for (let p = cdOffset; p < cdOffset + cdSize; ) {
    const len = 46 + buf.readUInt16LE(p + 28) + buf.readUInt16LE(p + 30) + buf.readUInt16LE(p + 32);
    records.push(buf.subarray(p, p + len));
    p += len;
  }
  const [a, b, ...rest] = records;
  return Buffer.concat([buf.subarray(0, cdOffset), b!, a!, ...rest, buf.subarray(cdOffset + cdSize)]);
}

describe('packageProblems', () => {
  const content = contentXml(sheetRows());

  test('a compressed mimetype', async () => {
    const f = await openEntries({ ...packageEntries(content), mimetype: entry(MIME, { level: 6 }) });
    assert.deepEqual(packageProblems(f), ['mimetype is compressed (method 8), not stored']);
  });

  test('mimetype not the first entry', async () => {
    const { mimetype: _first, ...rest } = packageEntries(content);
    const f = await openEntries({ ...rest, mimetype: entry(MIME, { level: 0 }) });
    const problems = packageProblems(f);
    assert.ok(problems.includes('mimetype is entry 5, not the first'));
    assert.ok(problems.some((p) => p.startsWith("mimetype's local header is at offset")));
  });

  test('mimetype with an extra field', async () => {
    const extra = { 0x5455: new Uint8Array([1, 0, 0, 0, 0]) };
    const f = await openEntries({ ...packageEntries(content), mimetype: entry(MIME, { level: 0, extra }) });
    assert.equal(f.entries[0]?.extraFieldLength, 9);
    assert.deepEqual(packageProblems(f), ['mimetype has an extra field (9 bytes in its local header, 9 in the central directory)']);
  });

  test('mimetype with other content', async () => {
    const f = await openEntries({ ...packageEntries(content), mimetype: entry(`${MIME}\n`, { level: 0 }) });
    assert.deepEqual(packageProblems(f), [`mimetype holds "${MIME}\\n", not "${MIME}"`]);
  });

  test('a malformed content.xml: read, but reported by both checks', async () => {
    const f = await openEntries({ ...packageEntries(content), 'content.xml': entry(content.replace('</office:body>', '')) });
    const problems = packageProblems(f);
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^content\.xml is not well-formed XML: /);
    const hmrc = hmrcProblems(f, TODAY);
    assert.equal(hmrc.length, 1);
    assert.match(hmrc[0]!, /^content\.xml is not well-formed XML \(HMRC: unexpected error\)/);
  });

  test('missing parts and manifest entries', async () => {
    const { 'styles.xml': _styles, ...rest } = packageEntries(content);
    const f = await openEntries({
      ...rest,
      'META-INF/manifest.xml': entry(manifest([['/', 'text/plain'], ['content.xml', 'text/xml'], ['content.xml', 'text/xml'], ['styles.xml', 'text/xml']])),
    });
    assert.deepEqual(packageProblems(f), [
      'styles.xml missing',
      'the manifest lists "content.xml" twice',
      `the manifest gives "/" the media type "text/plain", not "${MIME}"`,
      'the manifest does not list meta.xml',
      'the manifest lists "styles.xml", which the archive does not hold',
      'archive entry "meta.xml" is not in the manifest',
    ]);
  });

  test('readOds rejects a file that is not a ZIP, a ZIP without content.xml, and central and local orders that disagree', async () => {
    await assert.rejects(open(strToU8('not a zip at all')), /is not a ZIP archive/);
    const { 'content.xml': _content, ...rest } = packageEntries(content);
    await assert.rejects(openEntries(rest), /has no content\.xml/);
    await assert.rejects(open(swapCentralRecords(zipSync(packageEntries(content)))), /central directory order and local header order disagree/);
  });
});
