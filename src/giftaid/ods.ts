// HMRC's Gift Aid schedule spreadsheet (R68GAD) as an OpenDocument spreadsheet: the only file
// Charities Online takes. Pure: schedule rows in, the .ods file's bytes out, the same bytes for the
// same rows and the same `preparedAt`, so a claim's files can be written again exactly.
//
// Where HMRC's upload checker (hmrc/charities-claims-validation, OdsReaderService) reads, the layout
// is fixed, and the file is shaped to how that checker counts:
//  - the first sheet is named R68GAD_V1_00_0_EN (a claim's only: see SHEET_NAMES);
//  - rows are the sheet's direct table:table-row children (no row groups or header-row wrappers);
//  - cells are counted as table:table-cell elements, so no cell is merged (a merge leaves
//    table:covered-table-cell elements, which are not counted and would shift every later column);
//  - the earliest donation date is the 4th cell element of row 13 and the previously over-claimed
//    amount the 4th of row 17, so cells A to C of those rows are written one element each, and
//    A and B in different styles: LibreOffice saves equal neighbours as one element (repeated),
//    and HMRC then read D13 and D17 as blank in a file a person had saved (HMRC's template does the same);
//  - the donations are rows 25 to 1,024, columns B to K; the headings stand in row 23.
// Everything else (labels, guidance, the total) is for the person who opens the file first.
import { strToU8, zipSync, type ZipOptions } from 'fflate';
import { formatPounds, hmrcDate, MAX_ROWS_PER_SCHEDULE, pounds, type ScheduleRow } from './schedule.js';

const ODS_MIME_TYPE = 'application/vnd.oasis.opendocument.spreadsheet';
/**
 * The first sheet's name, by what the file is for. HMRC accepts any sheet name that starts
 * R68GAD_V1_00_0 (a claim's is the English template's), and refuses any other: so a preview, or a
 * rejected claim's files written again, whose donations may be in a live claim, is refused if
 * uploaded, not claimed twice (until 2026-11-28 both passed HMRC's checker).
 * A claim marked submitted or paid has its files written again as a copy HMRC refuses too: one
 * uploaded again would claim its donations twice (until 2026-11-29 it was the file as first written; a review).
 */
export const SHEET_NAMES = { claim: 'R68GAD_V1_00_0_EN', preview: 'PREVIEW not for HMRC', rejected: 'REJECTED not for HMRC', sent: 'SENT not for HMRC' } as const;

/** 0-based rows of the sheet that HMRC reads. */
const LAYOUT = {
  earliestDateRow: 12, // D13
  overClaimedRow: 16, // D17
  headingRow: 22, // row 23
  firstDonationRow: 24, // row 25
} as const;

/** The donation table's columns B to K, as the template heads them. */
const SCHEDULE_HEADINGS = [
  'Item',
  'Title',
  'First name',
  'Last name',
  'House name or number',
  'Postcode',
  'Aggregated donations',
  'Sponsored event',
  'Donation date',
  'Amount',
] as const;

export interface SpreadsheetOptions {
  /** The rows of this file, in order: 1 to 1,000. */
  rows: readonly ScheduleRow[];
  /** When the claim was prepared (ISO 8601): the file's own date, so writing it again gives the same bytes. */
  preparedAt: string;
  /** Lines shown above the schedule, saying what the file is (claim, charity, part). */
  about: readonly string[];
  /** The document's title in its properties. */
  title: string;
  /** What the file is for: only a claim's files can be uploaded to HMRC (SHEET_NAMES). */
  use: keyof typeof SHEET_NAMES;
}

/** The .ods file for one schedule of at most 1,000 donations. */
export function scheduleSpreadsheet(options: SpreadsheetOptions): Uint8Array {
  // The lines above the schedule and the title come from outside the rows (the charity's name, which
  // `charity create` takes as typed): a character XML cannot hold there is shown as U+FFFD, never a
  // claim recorded whose files can never be written. The rows are HMRC's characters already.
  const opts = { ...options, about: options.about.map(xmlSafe), title: xmlSafe(options.title) };
  const { rows } = opts;
  if (rows.length === 0 || rows.length > MAX_ROWS_PER_SCHEDULE) {
    throw new RangeError(`a schedule holds 1 to ${MAX_ROWS_PER_SCHEDULE} donations, not ${rows.length}`);
  }
  const mtime = new Date(opts.preparedAt);
  const file = (text: string, level: 0 | 6 = 6): [Uint8Array, ZipOptions] => [strToU8(text), { level, mtime }];
  // OpenDocument: the mimetype entry first and stored uncompressed, so a reader can tell the file's
  // type from its first bytes; fflate keeps the entries in this order and adds no extra fields.
  const entries = {
    mimetype: file(ODS_MIME_TYPE, 0),
    'content.xml': file(contentXml(opts)),
    'styles.xml': file(STYLES_XML),
    'meta.xml': file(metaXml(opts)),
    'META-INF/manifest.xml': file(MANIFEST_XML),
  };
  // A zip entry's time has no time zone, and fflate writes it as the machine's local time: written
  // in UTC, the same claim's files are the same bytes on any machine and under any TZ (giftaid files).
  const zone = process.env.TZ;
  process.env.TZ = 'UTC';
  try {
    return zipSync(entries);
  } finally {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  }
}

// --- content.xml ---

type Cell =
  | { kind: 'empty' }
  | { kind: 'text'; text: string; style?: string }
  | { kind: 'number'; value: number; text: string; style: string }
  | { kind: 'date'; day: string; style: string } // day: YYYY-MM-DD
  | { kind: 'total'; formula: string; minor: number };

const EMPTY: Cell = { kind: 'empty' };
const text = (t: string, style?: string): Cell => ({ kind: 'text', text: t, style });
const date = (day: string, style = 'ceDate'): Cell => ({ kind: 'date', day, style });

function contentXml(opts: SpreadsheetOptions): string {
  const { rows } = opts;
  const totalMinor = rows.reduce((sum, r) => sum + r.amountMinor, 0);
  const earliest = rows.reduce((min, r) => (r.donationDay < min ? r.donationDay : min), rows[0]!.donationDay);
  const lastRow = LAYOUT.firstDonationRow + MAX_ROWS_PER_SCHEDULE; // 1-based number of the last donation row

  // The sheet's rows above the donations, by 0-based index; columns from A.
  const top: Cell[][] = Array.from({ length: LAYOUT.firstDonationRow }, () => []);
  top[0] = [EMPTY, text('Gift Aid donations schedule', 'ceTitle')];
  opts.about.forEach((line, i) => (top[2 + i] = [EMPTY, text(line, i === 0 ? 'ceBold' : undefined)]));
  top[10] = [EMPTY, text('Enter details from here', 'ceBold')];
  top[11] = [EMPTY, EMPTY, EMPTY, text('Earliest donation date in the period of claim. (DD/MM/YY)', 'ceLabel')];
  // B13 and B17 empty but styled (ceLabel: only its font size differs), so no program merges them into A.
  const apart: Cell = text('', 'ceLabel');
  top[LAYOUT.earliestDateRow] = [EMPTY, apart, text('Box 1', 'ceBold'), date(earliest, 'ceDateBox')];
  top[15] = [EMPTY, EMPTY, EMPTY, text('Previously over-claimed amount. Leave blank if none', 'ceLabel')];
  // D17 shows what a person types in it with two decimals, as HMRC reads it: in a cell without that
  // format LibreOffice saves 12.50 typed as "12.5" and 20 as "20", which HMRC's checker refuses.
  top[LAYOUT.overClaimedRow] = [EMPTY, apart, text('Box 2', 'ceBold'), text('', 'ceAmountBox')];
  top[17] = [EMPTY, EMPTY, EMPTY, text("Don't use a £ sign")];
  top[18] = [EMPTY, text('The total below is automatically calculated from the amounts you enter in the schedule.')];
  top[19] = [
    ...Array<Cell>(8).fill(EMPTY),
    text('Total donations:', 'ceBold'),
    EMPTY,
    { kind: 'total', formula: `of:=SUM([.K${LAYOUT.firstDonationRow + 1}:.K${lastRow}])`, minor: totalMinor },
  ];
  top[20] = [EMPTY, text('Donations schedule table', 'ceBold')];
  top[LAYOUT.headingRow] = [EMPTY, ...SCHEDULE_HEADINGS.map((h) => text(h, 'ceHeading'))];
  top[LAYOUT.headingRow + 1] = [EMPTY, ...Array<Cell>(7).fill(EMPTY), text('(Yes/blank)', 'ceHeading'), text('(DD/MM/YY)', 'ceHeading')];

  const donation = (r: ScheduleRow, i: number): Cell[] => [
    EMPTY,
    { kind: 'number', value: i + 1, text: String(i + 1), style: 'ceItem' },
    EMPTY, // Title: not collected
    text(r.firstName),
    text(r.lastName),
    text(r.houseNameOrNumber),
    text(r.postcode),
    EMPTY, // Aggregated donations: every donation is its own row
    EMPTY, // Sponsored event: not known to Almoner
    date(r.donationDay),
    { kind: 'number', value: r.amountMinor / 100, text: formatPounds(r.amountMinor), style: 'ceAmount' },
  ];

  const parts: string[] = [CONTENT_HEAD, `<table:table table:name="${SHEET_NAMES[opts.use]}" table:style-name="ta1">`];
  for (const [, style] of COLUMNS) parts.push(`<table:table-column table:style-name="${style}" table:default-cell-style-name="Default"/>`);
  for (const cells of top) parts.push(rowXml(cells));
  rows.forEach((r, i) => parts.push(rowXml(donation(r, i))));
  parts.push('</table:table></office:spreadsheet></office:body></office:document-content>');
  return parts.join('');
}

function rowXml(cells: readonly Cell[]): string {
  return `<table:table-row>${cells.map(cellXml).join('')}</table:table-row>`;
}

function cellXml(cell: Cell): string {
  switch (cell.kind) {
    case 'empty':
      return '<table:table-cell/>';
    case 'text':
      return `<table:table-cell${styleAttr(cell.style)} office:value-type="string">${paragraph(cell.text)}</table:table-cell>`;
    case 'number':
      return `<table:table-cell${styleAttr(cell.style)} office:value-type="float" office:value="${cell.value}">${paragraph(cell.text)}</table:table-cell>`;
    case 'date':
      return `<table:table-cell${styleAttr(cell.style)} office:value-type="date" office:date-value="${cell.day}">${paragraph(hmrcDate(cell.day))}</table:table-cell>`;
    case 'total':
      return (
        `<table:table-cell table:style-name="ceTotal" table:formula="${escapeXml(cell.formula)}" office:value-type="currency" ` +
        `office:currency="GBP" office:value="${cell.minor / 100}">${paragraph(pounds(cell.minor))}</table:table-cell>`
      );
  }
}

const styleAttr = (style: string | undefined) => (style ? ` table:style-name="${style}"` : '');

/**
 * A cell's text as one text:p: XML-escaped, and with spaces kept as written (in OpenDocument a run
 * of spaces collapses to one unless written as text:s).
 */
function paragraph(t: string): string {
  if (t === '') return '';
  const body = escapeXml(t).replace(/ {2,}|^ /g, (run) => (run.length === 1 ? '<text:s/>' : ` <text:s text:c="${run.length - 1}"/>`));
  return `<text:p>${body}</text:p>`;
}

/** A character XML cannot hold: not in XML 1.0's Char production. */
const NOT_XML = '[^\\t\\n\\r\\u0020-\\uD7FF\\uE000-\\uFFFD\\u{10000}-\\u{10FFFF}]';
const NOT_XML_ONE = new RegExp(NOT_XML, 'u');
const NOT_XML_ALL = new RegExp(NOT_XML, 'gu');

/** Text as XML character data or an attribute value; a character XML cannot hold is a programming error. */
function escapeXml(t: string): string {
  const bad = NOT_XML_ONE.exec(t);
  if (bad) throw new RangeError(`U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} cannot be written in XML`);
  return t.replace(/[&<>"']/g, (c) => XML_ENTITIES[c]!);
}

/** `t` with each character XML cannot hold replaced by U+FFFD. */
function xmlSafe(t: string): string {
  return t.replace(NOT_XML_ALL, '\uFFFD');
}

const XML_ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

// Column widths, A to K, in the template's proportions.
const COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['0.3in', 'coA'],
  ['0.6in', 'coItem'],
  ['0.6in', 'coTitle'],
  ['1.5in', 'coName'],
  ['1.5in', 'coName'],
  ['1.7in', 'coHouse'],
  ['1.0in', 'coPostcode'],
  ['1.5in', 'coAggregated'],
  ['1.3in', 'coSponsored'],
  ['1.1in', 'coDate'],
  ['1.6in', 'coAmount'],
];

const NS =
  'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" ' +
  'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" ' +
  'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ' +
  'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" ' +
  'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" ' +
  'xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" ' +
  'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" ' +
  'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" ' +
  'xmlns:dc="http://purl.org/dc/elements/1.1/"';

const columnStyles = [...new Map(COLUMNS.map(([width, name]) => [name, width])).entries()]
  .map(([name, width]) => `<style:style style:name="${name}" style:family="table-column"><style:table-column-properties style:column-width="${width}"/></style:style>`)
  .join('');

const cellStyle = (name: string, props: string, dataStyle?: string) =>
  `<style:style style:name="${name}" style:family="table-cell" style:parent-style-name="Default"${dataStyle ? ` style:data-style-name="${dataStyle}"` : ''}>${props}</style:style>`;
const bold = '<style:text-properties fo:font-weight="bold"/>';
const boxed = '<style:table-cell-properties fo:border="0.5pt solid #000000"/>';

const CONTENT_HEAD =
  `<?xml version="1.0" encoding="UTF-8"?><office:document-content ${NS} office:version="1.3"><office:automatic-styles>` +
  // DD/MM/YY, as HMRC reads dates; 0.00 for amounts; £#,##0.00 for the total.
  '<number:date-style style:name="NDate"><number:day number:style="long"/><number:text>/</number:text><number:month number:style="long"/><number:text>/</number:text><number:year/></number:date-style>' +
  '<number:number-style style:name="NAmount"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1"/></number:number-style>' +
  '<number:number-style style:name="NItem"><number:number number:decimal-places="0" number:min-integer-digits="1"/></number:number-style>' +
  '<number:currency-style style:name="NTotal"><number:currency-symbol number:language="en" number:country="GB">£</number:currency-symbol><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:currency-style>' +
  '<style:style style:name="ta1" style:family="table"><style:table-properties table:display="true"/></style:style>' +
  columnStyles +
  cellStyle('ceTitle', '<style:text-properties fo:font-size="14pt" fo:font-weight="bold"/>') +
  cellStyle('ceBold', bold) +
  cellStyle('ceLabel', '<style:text-properties fo:font-size="9pt"/>') +
  cellStyle('ceHeading', `<style:table-cell-properties fo:background-color="#dddddd" fo:border="0.5pt solid #000000"/>${bold}`) +
  cellStyle('ceAmountBox', boxed, 'NAmount') +
  cellStyle('ceDateBox', boxed, 'NDate') +
  cellStyle('ceDate', '', 'NDate') +
  cellStyle('ceAmount', '', 'NAmount') +
  cellStyle('ceItem', '', 'NItem') +
  cellStyle('ceTotal', bold, 'NTotal') +
  '</office:automatic-styles><office:body><office:spreadsheet>';

const STYLES_XML =
  `<?xml version="1.0" encoding="UTF-8"?><office:document-styles ${NS} office:version="1.3"><office:styles>` +
  '<style:style style:name="Default" style:family="table-cell"><style:text-properties fo:font-size="10pt"/></style:style>' +
  '</office:styles></office:document-styles>';

function metaXml(opts: SpreadsheetOptions): string {
  const created = opts.preparedAt.replace(/Z$/, '');
  return (
    `<?xml version="1.0" encoding="UTF-8"?><office:document-meta ${NS} office:version="1.3"><office:meta>` +
    `<meta:generator>Almoner</meta:generator><dc:title>${escapeXml(opts.title)}</dc:title>` +
    `<meta:creation-date>${escapeXml(created)}</meta:creation-date><dc:date>${escapeXml(created)}</dc:date>` +
    '</office:meta></office:document-meta>'
  );
}

const MANIFEST_XML =
  '<?xml version="1.0" encoding="UTF-8"?>' +
  '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">' +
  `<manifest:file-entry manifest:full-path="/" manifest:version="1.3" manifest:media-type="${ODS_MIME_TYPE}"/>` +
  '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>' +
  '<manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/>' +
  '<manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>' +
  '</manifest:manifest>';
