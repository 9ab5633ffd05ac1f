// An independent reader and checker for HMRC Gift Aid schedule spreadsheets (.ods), for tests of
// the files our own code writes. It imports nothing from src/: it is a second, separate reading of
// the file, written from HMRC's upload checker (hmrc/charities-claims-validation: OdsReaderService,
// GiftAidValidationService, CommonFileValidation, DocumentRowDecoder, DonationType), in our words.
//
// How HMRC reads the file, and what this module reproduces:
//  - content.xml is parsed by a JAXP DocumentBuilder that is not namespace aware, so every name is
//    matched as written, prefix and all ("table:table-row"); the first element named table:table in
//    document order is the sheet.
//  - Rows are the DIRECT table:table-row children of that table, each repeated
//    table:number-rows-repeated times (a value that is not an integer counts 1; 0 or less gives no
//    row at all). Rows inside table:table-header-rows, table:table-row-group or table:table-rows
//    are never seen.
//  - Cells are ALL descendant elements named table:table-cell (nested tables included;
//    table:covered-table-cell is a different name and is not counted), each repeated
//    table:number-columns-repeated times (anything but an integer of at least 1 counts 1).
//  - A single cell (the earliest donation date D13, the over-claimed amount D17) is the n-th
//    table:table-cell element of the row, repeats NOT expanded.
//  - A cell's text is the text of each text:p inside it (annotations included), paragraphs joined
//    with "\n", then trimmed as Java trims (characters up to U+0020). Only the displayed text is read,
//    never office:value. text:s gives text:c spaces; text:tab and text:line-break give nothing; CDATA
//    sections give nothing.
//  - Gift Aid reads rows 24 until 1025 with cells 1 until 12, but takes only `range.max` rows and
//    cells (1024 and 11), so 0-based row 1024 and cell 11 (column L) are never there: the donations are
//    rows 25 to 1,024 and columns B to K. A row whose cells other than the item are all blank is
//    skipped (the template has item numbers in every row).
//  - Before each check, every character outside U+0020..U+007E and U+00A1..U+00FF is deleted and the
//    value trimmed; names, house and aggregated donations also have white space runs collapsed.
import { readFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import yauzl from 'yauzl';
import { DOMParser, type Document, type Element, type Node } from '@xmldom/xmldom';

export interface ZipEntryInfo {
  name: string;
  compressionMethod: number;
  /** The extra field length in the entry's LOCAL header (the one that moves a stored mimetype's
   * bytes away from offset 38); packageProblems also checks the central directory's. */
  extraFieldLength: number;
  localHeaderOffset: number;
  uncompressedSize: number;
}

export interface OdsFile {
  /** ZIP entries in the order they are stored in the archive (central directory order and local header order must agree; readOds asserts that). */
  entries: ZipEntryInfo[];
  /** Raw bytes of each entry by name, decompressed (the first entry of a name, as a streaming reader finds it). */
  files: Map<string, Buffer>;
  /** The parsed content.xml (an @xmldom/xmldom Document). */
  content: Document;
  /** table:name of the first table:table element (document order); '' when there is none. */
  sheetName: string;
  /** The HMRC reading of the first sheet: the direct table:table-row children of the first
   * table:table, each repeated table:number-rows-repeated times, cut to maxRows. Each row is its
   * cells as HMRC's extractCells gives them: every table:table-cell element of the row, repeated,
   * cut to maxCells and padded with '' (maxCells defaults to 11, what the Gift Aid reading uses). */
  rows(maxRows: number, maxCells?: number): string[][];
  /** HMRC's cellFromDocument: row `rowIndex` as above, then the `cellIndex`-th table:table-cell
   * element of that row counted WITHOUT expanding table:number-columns-repeated, its text; '' when absent. */
  cellAt(rowIndex: number, cellIndex: number): string;
}

/** The donation rows as HMRC's checker takes them: 0-based rows 24..1024 (exclusive end 1025;
 * HMRC's reader never actually yields row 1024), cells 1..11 (B..L; K is the amount and L is never
 * read), rows whose cells other than the item are all blank skipped. Values are the cell texts
 * trimmed as Java trims, before HMRC's character removal. */
export interface GiftAidRow {
  rowIndex: number;
  item: string;
  title: string;
  firstName: string;
  lastName: string;
  house: string;
  postcode: string;
  aggregated: string;
  sponsored: string;
  date: string;
  amount: string;
}

// ---------------------------------------------------------------------------------------------
// ZIP and XML

const SPREADSHEET_MIME = 'application/vnd.oasis.opendocument.spreadsheet';
const MANIFEST_NS = 'urn:oasis:names:tc:opendocument:xmlns:manifest:1.0';
const OFFICE_NS = 'urn:oasis:names:tc:opendocument:xmlns:office:1.0';

/** What readOds learnt that the OdsFile interface does not show, for the checks. */
interface Internals {
  /** What xmldom reported while reading content.xml. */
  contentErrors: string[];
  /** Per entry, from its local header: flags and compression method; and the central directory's extra field length. */
  local: Map<ZipEntryInfo, { flags: number; method: number; centralExtraLength: number }>;
  unreadable: string[];
}
const internals = new WeakMap<OdsFile, Internals>();

/** ODF prefixes assumed when content.xml forgets to declare them: HMRC's parser is not namespace
 * aware, so an undeclared prefix does not stop it, and it should not stop this reading either. */
const ODF_PREFIXES: Record<string, string> = {
  office: OFFICE_NS,
  table: 'urn:oasis:names:tc:opendocument:xmlns:table:1.0',
  text: 'urn:oasis:names:tc:opendocument:xmlns:text:1.0',
  style: 'urn:oasis:names:tc:opendocument:xmlns:style:1.0',
  fo: 'urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0',
  number: 'urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0',
  draw: 'urn:oasis:names:tc:opendocument:xmlns:drawing:1.0',
  svg: 'urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0',
  meta: 'urn:oasis:names:tc:opendocument:xmlns:meta:1.0',
  dc: 'http://purl.org/dc/elements/1.1/',
  xlink: 'http://www.w3.org/1999/xlink',
  of: 'urn:oasis:names:tc:opendocument:xmlns:of:1.2',
  loext: 'urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0',
};

function decodeXml(bytes: Buffer): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  return new TextDecoder('utf-8').decode(bytes); // drops a UTF-8 BOM
}

/** Parses XML, recording every warning and error instead of printing it; `doc` is undefined when
 * the parser gave up. `assumePrefixes` pre-declares the ODF prefixes (for the HMRC-like reading). */
function parseXml(bytes: Buffer, assumePrefixes: boolean): { doc: Document | undefined; errors: string[] } {
  const errors: string[] = [];
  const parser = new DOMParser({
    locator: false,
    // XML 1.0 line-end handling (JAXP's), not xmldom's XML 1.1 default, which also rewrites U+0085,
    // U+2028 and U+2029 to "\n".
    normalizeLineEndings: (s: string) => s.replace(/\r\n?/g, '\n'),
    onError: (level, msg) => {
      errors.push(`${level}: ${String(msg).split('\n')[0]}`);
    },
    ...(assumePrefixes ? { xmlns: ODF_PREFIXES } : {}),
  });
  try {
    const doc = parser.parseFromString(decodeXml(bytes), 'text/xml');
    return { doc, errors };
  } catch (err) {
    const msg = `fatalError: ${(err as Error).message.split('\n')[0]}`;
    if (!errors.includes(msg)) errors.push(msg);
    return { doc: undefined, errors };
  }
}

async function readStream(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}

/** Opens and parses an .ods file with yauzl and @xmldom/xmldom. Rejects if it is not a ZIP or has
 * no content.xml, or if its local headers are not stored back to back in central directory order
 * (the order a streaming reader such as HMRC's ZipInputStream meets them). A content.xml that is not
 * well-formed does not reject: `content` is then whatever could be read (possibly an empty document),
 * and packageProblems and hmrcProblems report it. */
export async function readOds(path: string): Promise<OdsFile> {
  const buffer = await readFile(path);
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(buffer, { lazyEntries: true, decodeStrings: true, validateEntrySizes: true });
  } catch (err) {
    throw new Error(`${path} is not a ZIP archive: ${(err as Error).message}`);
  }

  const entries: ZipEntryInfo[] = [];
  const files = new Map<string, Buffer>();
  const local: Internals['local'] = new Map();
  const unreadable: string[] = [];
  const dataEnds: number[] = [];

  for await (const entry of zip.eachEntry()) {
    const header = await zip.readLocalFileHeaderPromise(entry);
    if (!header.fileName.equals(entry.fileNameRaw)) {
      throw new Error(
        `${path}: the local header at ${entry.relativeOffsetOfLocalHeader} names ${q(header.fileName.toString('latin1'))}, the central directory ${q(entry.fileName)}`,
      );
    }
    const info: ZipEntryInfo = {
      name: entry.fileName,
      compressionMethod: entry.compressionMethod,
      extraFieldLength: header.extraFieldLength,
      localHeaderOffset: entry.relativeOffsetOfLocalHeader,
      uncompressedSize: entry.uncompressedSize,
    };
    entries.push(info);
    local.set(info, {
      flags: header.generalPurposeBitFlag,
      method: header.compressionMethod,
      centralExtraLength: entry.extraFieldLength,
    });

    // Where this entry's data (and any data descriptor) ends: the next local header should start there.
    let end = header.fileDataStart + entry.compressedSize;
    if ((header.generalPurposeBitFlag & 0x8) !== 0) {
      end += end + 4 <= buffer.length && buffer.readUInt32LE(end) === 0x08074b50 ? 16 : 12;
    }
    dataEnds.push(end);

    if (entry.isEncrypted() || !entry.canDecodeFileData()) {
      unreadable.push(`${entry.fileName} cannot be read (encrypted or compression method ${entry.compressionMethod})`);
      continue;
    }
    const bytes = await readStream(await zip.openReadStreamPromise(entry));
    if (crc32(bytes) >>> 0 !== entry.crc32 >>> 0) unreadable.push(`${entry.fileName} fails its CRC-32 check`);
    if (!files.has(entry.fileName)) files.set(entry.fileName, bytes);
  }
  zip.close();

  for (let i = 1; i < entries.length; i++) {
    const prev = entries[i - 1]!;
    const cur = entries[i]!;
    if (cur.localHeaderOffset !== dataEnds[i - 1]) {
      throw new Error(
        `${path}: central directory order and local header order disagree: "${cur.name}" is listed after "${prev.name}" ` +
          `but its local header is at ${cur.localHeaderOffset}, not at ${dataEnds[i - 1]} where "${prev.name}" ends`,
      );
    }
  }

  const contentBytes = files.get('content.xml');
  if (contentBytes === undefined) throw new Error(`${path} has no content.xml`);
  const parsed = parseXml(contentBytes, true);
  const content = parsed.doc ?? new DOMParser().parseFromString('<empty/>', 'text/xml');

  const firstTable = firstElementByName(content, 'table:table');
  const sheetName = firstTable?.getAttribute('table:name') ?? '';

  const file: OdsFile = {
    entries,
    files,
    content,
    sheetName,
    rows: (maxRows, maxCells = GIFT_AID_CELL_MAX) => hmrcRows(content, maxRows).map((row) => hmrcCells(row, maxCells)),
    cellAt: (rowIndex, cellIndex) => hmrcCellAt(content, rowIndex, cellIndex),
  };
  internals.set(file, { contentErrors: parsed.doc ? parsed.errors : [...parsed.errors, 'fatalError: no document'], local, unreadable });
  return file;
}

// ---------------------------------------------------------------------------------------------
// HMRC's reading

const ELEMENT_NODE = 1;
const TEXT_NODE = 3;
const CDATA_SECTION_NODE = 4;

function children(node: Node): Node[] {
  const out: Node[] = [];
  for (let c = node.firstChild; c !== null; c = c.nextSibling) out.push(c);
  return out;
}

/** getElementsByTagName: every descendant element with this qualified name, in document order. */
function descendantsByName(root: Node, name: string): Element[] {
  const out: Element[] = [];
  const visit = (node: Node): void => {
    for (let c = node.firstChild; c !== null; c = c.nextSibling) {
      if (c.nodeType === ELEMENT_NODE) {
        if (c.nodeName === name) out.push(c as Element);
        visit(c);
      }
    }
  };
  visit(root);
  return out;
}

function firstElementByName(root: Node, name: string): Element | undefined {
  for (let c = root.firstChild; c !== null; c = c.nextSibling) {
    if (c.nodeType !== ELEMENT_NODE) continue;
    if (c.nodeName === name) return c as Element;
    const inner = firstElementByName(c, name);
    if (inner) return inner;
  }
  return undefined;
}

/** Java's Character.digit(ch, 10) for one UTF-16 unit: any Unicode decimal digit (Nd), -1 otherwise. */
function javaDigit(ch: string): number {
  if (!/^\p{Nd}$/u.test(ch)) return -1;
  // Unicode keeps each set of decimal digits contiguous, 0 to 9, so the value is the distance from
  // the start of the run of Nd characters, modulo 10.
  let start = ch.charCodeAt(0);
  while (start > 0 && /^\p{Nd}$/u.test(String.fromCharCode(start - 1))) start--;
  return (ch.charCodeAt(0) - start) % 10;
}

/** Scala's String.toIntOption (StringParsers.parseInt): optional + or -, then Unicode decimal
 * digits, within Int range; anything else (including "" and a lone sign) is undefined. */
function scalaToIntOption(s: string): number | undefined {
  if (s.length === 0) return undefined;
  let i = 0;
  let negative = false;
  if (s.length > 1 && (s[0] === '+' || s[0] === '-')) {
    negative = s[0] === '-';
    i = 1;
  }
  let value = 0;
  for (; i < s.length; i++) {
    const d = javaDigit(s[i]!);
    if (d < 0) return undefined;
    value = value * 10 + d;
    if (value > 2147483648) return undefined;
  }
  if (negative) return value === 0 ? 0 : -value;
  return value > 2147483647 ? undefined : value;
}

/** Java's String.trim: strips characters up to U+0020 at both ends (not NBSP or other Unicode spaces). */
function javaTrim(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && s.charCodeAt(a) <= 0x20) a++;
  while (b > a && s.charCodeAt(b - 1) <= 0x20) b--;
  return s.slice(a, b);
}

/** Java's Node.getTextContent for an element: its text and CDATA, comments and PIs left out. */
function textContent(node: Node): string {
  if (node.nodeType === TEXT_NODE || node.nodeType === CDATA_SECTION_NODE) return (node as unknown as { data: string }).data;
  if (node.nodeType !== ELEMENT_NODE) return '';
  return children(node).map(textContent).join('');
}

function paragraphText(node: Node): string {
  if (node.nodeType === TEXT_NODE) return (node as unknown as { data: string }).data;
  if (node.nodeType !== ELEMENT_NODE) return ''; // CDATA, comments, PIs: nothing
  const el = node as Element;
  switch (el.nodeName) {
    case 'text:s': {
      const n = scalaToIntOption(el.getAttribute('text:c') ?? '') ?? 1;
      return ' '.repeat(Math.max(0, n));
    }
    case 'text:c': {
      const n = scalaToIntOption(el.getAttribute('text:c') ?? '') ?? 1;
      return textContent(el).repeat(Math.max(0, n));
    }
    default: // text:p, text:span, and every other element: its children
      return children(el).map(paragraphText).join('');
  }
}

/** A cell's text before trimming: every text:p descendant, joined with "\n". */
function untrimmedCellText(cell: Element): string {
  return descendantsByName(cell, 'text:p').map(paragraphText).join('\n');
}

function cellText(cell: Element): string {
  return javaTrim(untrimmedCellText(cell));
}

function firstTable(doc: Document): Element | undefined {
  return firstElementByName(doc, 'table:table');
}

/** extractRows: the first table's direct table:table-row children, repeated, cut to maxRows. */
function hmrcRows(doc: Document, maxRows: number): Element[] {
  const table = firstTable(doc);
  const out: Element[] = [];
  if (!table) return out;
  for (const child of children(table)) {
    if (out.length >= maxRows) break;
    if (child.nodeType !== ELEMENT_NODE || child.nodeName !== 'table:table-row') continue;
    const row = child as Element;
    // No lower bound here (unlike cells): 0 or a negative number gives no row.
    const repeat = scalaToIntOption(row.getAttribute('table:number-rows-repeated') ?? '') ?? 1;
    for (let i = 0; i < repeat && out.length < maxRows; i++) out.push(row);
  }
  return out;
}

/**
 * extractCells: every table:table-cell element of the row, repeated, cut to maxCells, padded with ''
 * (`textOf` the cell's text: trimmed as HMRC reads it, or untrimmed to see what trimming hides).
 */
function hmrcCells(row: Element, maxCells: number, textOf: (cell: Element) => string = cellText): string[] {
  const out: string[] = [];
  for (const cell of descendantsByName(row, 'table:table-cell')) {
    if (out.length >= maxCells) break;
    const n = scalaToIntOption(cell.getAttribute('table:number-columns-repeated') ?? '');
    const repeat = n !== undefined && n >= 1 ? n : 1;
    const text = textOf(cell);
    for (let i = 0; i < repeat && out.length < maxCells; i++) out.push(text);
  }
  while (out.length < maxCells) out.push('');
  return out;
}

/** cellFromDocument: the cellIndex-th table:table-cell ELEMENT of the row (repeats not expanded). */
function hmrcCellAt(doc: Document, rowIndex: number, cellIndex: number): string {
  const row = hmrcRows(doc, rowIndex + 1)[rowIndex];
  if (!row) return '';
  const cell = descendantsByName(row, 'table:table-cell')[cellIndex];
  return cell ? cellText(cell) : '';
}

// HMRC's Gift Aid layout: rowRange 24 until 1025 and cellRange 1 until 12; the reader takes
// `range.max` of each (1024 rows, 11 cells), so row 1024 and cell 11 never exist.
const ROW_START = 24;
const ROW_END = 1025; // exclusive
const GIFT_AID_ROW_MAX = ROW_END - 1;
const CELL_START = 1;
const CELL_END = 12; // exclusive
const GIFT_AID_CELL_MAX = CELL_END - 1;
const EARLIEST_DATE = { row: 12, cell: 3, name: 'D13' } as const;
const OVER_CLAIMED = { row: 16, cell: 3, name: 'D17' } as const;

export function giftAidRows(file: OdsFile): GiftAidRow[] {
  return giftAidRowsOf(file.content).map((r) => r.row);
}

interface ReadRow {
  row: GiftAidRow;
  element: Element;
}

function giftAidRowsOf(doc: Document): ReadRow[] {
  const rows = hmrcRows(doc, GIFT_AID_ROW_MAX);
  const out: ReadRow[] = [];
  for (let rowIndex = ROW_START; rowIndex < ROW_END; rowIndex++) {
    const element = rows[rowIndex];
    if (!element) continue;
    const all = hmrcCells(element, GIFT_AID_CELL_MAX);
    const selected: string[] = [];
    for (let c = CELL_START; c < CELL_END; c++) selected.push(all[c] ?? '');
    const v = selected.map(javaTrim);
    const [item, title, firstName, lastName, house, postcode, aggregated, sponsored, date, amount] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => v[i] ?? '') as [
      string, string, string, string, string, string, string, string, string, string,
    ];
    if ([title, firstName, lastName, house, postcode, aggregated, sponsored, date, amount].every((x) => x === '')) continue;
    out.push({ row: { rowIndex, item, title, firstName, lastName, house, postcode, aggregated, sponsored, date, amount }, element });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// HMRC's rules

const DELETED = /[^\x20-\x7E\xA1-\xFF]/g;

/** CommonFileValidation.removeNonWesternCharacters. */
function removeNonWestern(s: string, collapseSpaces = false): string {
  const kept = javaTrim(s.replace(DELETED, ''));
  // Java's \s without the Unicode flag: space, tab, newline, vertical tab, form feed, return.
  return collapseSpaces ? kept.replace(/[ \t\n\x0B\f\r]+/g, ' ') : kept;
}

/** LocalDate.parse with "dd/MM/uu" and ResolverStyle.STRICT: exactly two ASCII digits each, a real
 * date, the year 2000 + yy. Gives YYYY-MM-DD or undefined. */
function parseHmrcDate(s: string): string | undefined {
  const m = /^([0-9]{2})\/([0-9]{2})\/([0-9]{2})$/.exec(s);
  if (!m) return undefined;
  const day = Number(m[1]);
  const month = Number(m[2]);
  const year = 2000 + Number(m[3]);
  if (month < 1 || month > 12 || day < 1) return undefined;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return undefined;
  return `${year}-${m[2]}-${m[1]}`;
}

interface Decimal {
  unscaled: bigint;
  scale: number;
}

/** Scala's BigDecimal(String), i.e. Java's new BigDecimal(String): optional sign, digits with an
 * optional point (".5" and "5." both allowed), optional exponent; scale = decimals - exponent. */
function parseBigDecimal(s: string): Decimal | undefined {
  const m = /^([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?$/.exec(s);
  if (!m) return undefined;
  const intPart = m[2] ?? '';
  const fracPart = m[3] ?? m[4] ?? '';
  const exponent = m[5] === undefined ? 0 : Number(m[5]);
  const scale = fracPart.length - exponent;
  if (!Number.isSafeInteger(exponent) || scale > 2147483647 || scale < -2147483648) return undefined;
  const magnitude = BigInt(intPart + fracPart);
  return { unscaled: m[1] === '-' ? -magnitude : magnitude, scale };
}

function digitCount(d: Decimal): number {
  return (d.unscaled < 0n ? -d.unscaled : d.unscaled).toString().length;
}

// "^(GIR 0AA)|(...)$" with String.matches: the whole value must match one of the two sides.
const POSTCODE = /^(?:GIR 0AA|(?:[A-Z][0-9][0-9]?|[A-Z][A-HJ-Y][0-9][0-9]?|[A-Z][0-9][A-Z]|[A-Z][A-HJ-Y][0-9][A-Z]) [0-9][A-Z]{2})$/;

const LABEL: Record<Exclude<keyof GiftAidRow, 'rowIndex'>, string> = {
  item: 'item',
  title: 'donor title',
  firstName: 'donor first name',
  lastName: 'donor last name',
  house: 'donor house name or number',
  postcode: 'donor postcode',
  aggregated: 'aggregated donations',
  sponsored: 'sponsored event',
  date: 'donation date',
  amount: 'donation amount',
};
const FIELDS = Object.keys(LABEL) as Exclude<keyof GiftAidRow, 'rowIndex'>[];
const COLLAPSED: ReadonlySet<string> = new Set(['firstName', 'lastName', 'house', 'aggregated']);

const q = (s: string): string => JSON.stringify(s);

/** validateRow, in HMRC's order: item, aggregated-row conflicts, title, first name, last name,
 * house, postcode, aggregated donations, sponsored event, date, amount. */
function hmrcRowProblems(r: GiftAidRow, today: string): string[] {
  const at = `row ${r.rowIndex + 1}:`;
  const out: string[] = [];
  const isAggregated = javaTrim(removeNonWestern(r.aggregated)) !== '';

  const item = removeNonWestern(r.item);
  const itemNumber = /^[1-9][0-9]{0,3}$/.test(item) ? Number(item) : undefined;
  if (itemNumber === undefined || itemNumber < 1 || itemNumber > 1000) out.push(`${at} item ${q(r.item)} is not a whole number from 1 to 1000`);

  if (isAggregated) {
    // These look at the values as read (trimmed), before any character removal.
    const conflicts: [string, string][] = [
      [r.sponsored, 'a sponsored event'],
      [r.title, 'a donor title'],
      [r.firstName, 'a donor first name'],
      [r.lastName, 'a donor last name'],
      [r.house, 'a donor house name or number'],
      [r.postcode, 'a donor postcode'],
    ];
    for (const [value, what] of conflicts) if (javaTrim(value) !== '') out.push(`${at} an aggregated donation cannot have ${what}`);
  }

  if (!isAggregated) {
    const title = removeNonWestern(r.title);
    if (title !== '' && !/^[A-Za-z][A-Za-z'-]{1,3}$/.test(title)) out.push(`${at} donor title ${q(r.title)} is not 2 to 4 letters, apostrophes or hyphens starting with a letter`);

    for (const field of ['firstName', 'lastName'] as const) {
      const v = removeNonWestern(r[field], true);
      if (v === '') out.push(`${at} ${LABEL[field]} missing`);
      else if (v.length > 35) out.push(`${at} ${LABEL[field]} is longer than 35 characters (${v.length})`);
    }

    const house = removeNonWestern(r.house, true);
    if (house === '') out.push(`${at} donor house name or number missing`);
    else if (house.length > 40) out.push(`${at} donor house name or number is longer than 40 characters (${house.length})`);

    const postcode = removeNonWestern(javaTrim(r.postcode));
    const valid = postcode === 'X' || POSTCODE.test(postcode.toUpperCase());
    if (postcode === '') out.push(`${at} donor postcode missing`);
    else if (!valid) out.push(`${at} donor postcode ${q(r.postcode)} is not a UK postcode or X`);
  }

  const aggregated = removeNonWestern(r.aggregated, true);
  if (aggregated.length > 35) out.push(`${at} aggregated donations is longer than 35 characters (${aggregated.length})`);

  if (!isAggregated) {
    const sponsored = removeNonWestern(javaTrim(r.sponsored).toLowerCase());
    if (sponsored !== '' && sponsored !== 'yes') out.push(`${at} sponsored event ${q(r.sponsored)} is neither blank nor Yes`);
  }

  const dateText = removeNonWestern(r.date);
  if (dateText === '') out.push(`${at} donation date missing`);
  else {
    const date = parseHmrcDate(dateText);
    if (date === undefined) out.push(`${at} donation date ${q(r.date)} is not a DD/MM/YY date`);
    else if (date > today) out.push(`${at} donation date ${q(r.date)} is in the future (after ${today})`);
  }

  const amountText = removeNonWestern(r.amount);
  if (amountText === '') out.push(`${at} donation amount missing`);
  else {
    const amount = parseBigDecimal(amountText.replaceAll(',', ''));
    const formatProblem = `${at} donation amount ${q(r.amount)} is not an amount with 2 decimal places from 0.01 to ${isAggregated ? '1000.00' : '9999999999999.99'}`;
    if (amount === undefined || amount.scale !== 2 || digitCount(amount) > 15) out.push(formatProblem);
    else if (amount.unscaled < 1n) out.push(formatProblem);
    else if (isAggregated && amount.unscaled > 100000n) out.push(`${at} aggregated donation amount ${q(r.amount)} is over 1000.00`);
    else if (!isAggregated && amount.unscaled > 999999999999999n) out.push(formatProblem);
  }
  return out;
}

/** Reports for values HMRC would change before checking them: characters it deletes, white space
 * runs it collapses, white space it trims. */
function manglingProblems(where: string, label: string, raw: string, untrimmed: string, collapses: boolean): string[] {
  const out: string[] = [];
  const deleted = raw.match(DELETED);
  if (deleted) out.push(`${where} ${label} holds characters HMRC deletes: ${q([...new Set(deleted)].join(''))}`);
  if (javaTrim(untrimmed) !== untrimmed) out.push(`${where} ${label} has leading or trailing white space HMRC trims: ${q(untrimmed)}`);
  if (collapses) {
    const kept = removeNonWestern(raw);
    if (kept !== removeNonWestern(raw, true)) out.push(`${where} ${label} has runs of white space HMRC collapses to one space: ${q(raw)}`);
  }
  return out;
}

/** The sheet as a spreadsheet program lays it out (not HMRC's reading): every table:table-row of
 * the first table, wrappers included, and per row its table:table-cell and table:covered-table-cell
 * children, repeats expanded. Used to check that HMRC's reading lines up with the real columns. */
function trueRowIndex(table: Element): { rows: { element: Element; start: number; repeat: number }[]; wrapped: boolean } {
  const rows: { element: Element; start: number; repeat: number }[] = [];
  let wrapped = false;
  let index = 0;
  const visit = (node: Node, depth: number): void => {
    for (const c of children(node)) {
      if (c.nodeType !== ELEMENT_NODE) continue;
      const el = c as Element;
      if (el.nodeName === 'table:table-row') {
        if (depth > 0) wrapped = true;
        const n = Number(el.getAttribute('table:number-rows-repeated') ?? '');
        const repeat = Number.isInteger(n) && n >= 1 ? n : 1;
        rows.push({ element: el, start: index, repeat });
        index += repeat;
      } else if (['table:table-header-rows', 'table:table-row-group', 'table:table-rows'].includes(el.nodeName)) {
        visit(el, depth + 1);
      }
    }
  };
  visit(table, 0);
  return { rows, wrapped };
}

function trueCells(row: Element, maxCells: number): string[] {
  const out: string[] = [];
  for (const c of children(row)) {
    if (out.length >= maxCells) break;
    if (c.nodeType !== ELEMENT_NODE || (c.nodeName !== 'table:table-cell' && c.nodeName !== 'table:covered-table-cell')) continue;
    const el = c as Element;
    const n = Number(el.getAttribute('table:number-columns-repeated') ?? '');
    const repeat = Number.isInteger(n) && n >= 1 ? n : 1;
    const text = cellText(el);
    for (let i = 0; i < repeat && out.length < maxCells; i++) out.push(text);
  }
  while (out.length < maxCells) out.push('');
  return out;
}

function columnName(i: number): string {
  let name = '';
  for (let n = i + 1; n > 0; n = Math.floor((n - 1) / 26)) name = String.fromCharCode(65 + ((n - 1) % 26)) + name;
  return name;
}

/** Every problem HMRC's Gift Aid checker would report, as readable strings such as
 * `row 25: donor last name missing` or `D13: earliest donation date missing`, in HMRC's order,
 * followed by what our own, stricter rules find (each such string ends with "(our rule)"; pass
 * `{ ourRules: false }` to leave them out); [] when the file passes. `today` is YYYY-MM-DD (HMRC
 * uses the day of the upload). Where HMRC stops (the ZIP or content.xml unreadable, no sheet, wrong
 * sheet name, no donation rows) this stops too, with that one problem. */
export function hmrcProblems(file: OdsFile, today: string, options: { ourRules?: boolean } = {}): string[] {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(today)) throw new RangeError(`today must be YYYY-MM-DD, not ${q(today)}`);

  // The file as HMRC's ZipInputStream and DocumentBuilder meet it.
  const zipStops = zipReadingProblems(file);
  if (zipStops.length > 0) return zipStops;
  const contentBytes = file.files.get('content.xml');
  if (contentBytes === undefined) return ['content.xml missing (HMRC: unexpected error)'];
  const contentErrors = internals.get(file)?.contentErrors ?? parseXml(contentBytes, true).errors;
  const fatal = contentErrors.filter((e) => !e.startsWith('warning'));
  if (fatal.length > 0) return [`content.xml is not well-formed XML (HMRC: unexpected error): ${fatal[0]}`];
  const doc = file.content;

  const table = firstTable(doc);
  if (!table) return ['content.xml has no table:table (HMRC: unexpected error)'];
  const sheetName = table.getAttribute('table:name') ?? '';
  if (sheetName === '') return ['the first table:table has no table:name (HMRC: unexpected error)'];
  if (!javaTrim(sheetName).startsWith('R68GAD_V1_00_0')) return [`sheet name ${q(sheetName)} does not start with R68GAD_V1_00_0`];

  const read = giftAidRowsOf(doc);
  if (read.length === 0) return ['no donation rows in rows 25 to 1,024 (HMRC: Enter details for at least one Gift Aid donation)'];

  const out: string[] = [];
  const earliestRaw = hmrcCellAt(doc, EARLIEST_DATE.row, EARLIEST_DATE.cell);
  const earliest = removeNonWestern(earliestRaw);
  if (earliest === '') out.push(`${EARLIEST_DATE.name}: earliest donation date missing`);
  else if (parseHmrcDate(earliest) === undefined) out.push(`${EARLIEST_DATE.name}: earliest donation date ${q(earliestRaw)} is not a DD/MM/YY date`);

  const overRaw = hmrcCellAt(doc, OVER_CLAIMED.row, OVER_CLAIMED.cell);
  const over = javaTrim(removeNonWestern(overRaw)).replaceAll(',', '');
  if (over !== '') {
    const amount = parseBigDecimal(over);
    if (amount === undefined || amount.scale !== 2 || digitCount(amount) > 15 || amount.unscaled <= 0n) {
      out.push(`${OVER_CLAIMED.name}: previously over-claimed amount ${q(overRaw)} is not a positive amount with 2 decimal places`);
    }
  }

  for (const { row } of read) out.push(...hmrcRowProblems(row, today));
  if (options.ourRules === false) return out;

  // --- our own rules, stricter than HMRC's code ---
  const ours = (s: string): void => {
    out.push(`${s} (our rule)`);
  };

  // The D13 and D17 values as HMRC would change them before checking.
  for (const cell of [EARLIEST_DATE, OVER_CLAIMED]) {
    const raw = cell === EARLIEST_DATE ? earliestRaw : overRaw;
    const rowEl = hmrcRows(doc, cell.row + 1)[cell.row];
    const el = rowEl ? descendantsByName(rowEl, 'table:table-cell')[cell.cell] : undefined;
    const label = cell === EARLIEST_DATE ? 'earliest donation date' : 'previously over-claimed amount';
    for (const p of manglingProblems(`${cell.name}:`, label, raw, el ? untrimmedCellText(el) : '', false)) ours(p);
  }

  // HMRC's reading must line up with the sheet as a spreadsheet program shows it.
  const layout = trueRowIndex(table);
  if (layout.wrapped) {
    ours('the sheet has table:table-row elements inside header-row, row-group or rows wrappers, which HMRC does not see, so its row numbers differ from the sheet');
  }
  const trueRowAt = (index: number): Element | undefined => layout.rows.find((r) => index >= r.start && index < r.start + r.repeat)?.element;
  for (const cell of [EARLIEST_DATE, OVER_CLAIMED]) {
    const el = trueRowAt(cell.row);
    const shown = el ? (trueCells(el, cell.cell + 1)[cell.cell] ?? '') : '';
    const seen = hmrcCellAt(doc, cell.row, cell.cell);
    if (shown !== seen) ours(`${cell.name}: HMRC reads ${q(seen)} (table:table-cell element ${cell.cell + 1} of the row) but the sheet shows ${q(shown)} there`);
  }

  // Each donation row, as the issue asks, and as HMRC would change it.
  read.forEach(({ row, element }, k) => {
    const at = `row ${row.rowIndex + 1}:`;
    const untrimmed = hmrcCells(element, GIFT_AID_CELL_MAX, untrimmedCellText);
    FIELDS.forEach((field, i) => {
      for (const p of manglingProblems(at, LABEL[field], row[field], untrimmed[CELL_START + i] ?? '', COLLAPSED.has(field))) ours(p);
    });
    if (row.item !== String(k + 1)) ours(`${at} item ${q(row.item)} should be ${k + 1} (items run 1, 2, 3, ... in row order)`);
    if (row.postcode !== row.postcode.toUpperCase()) ours(`${at} donor postcode ${q(row.postcode)} is not upper case`);
    if (row.aggregated !== '') ours(`${at} aggregated donations must be blank (we never aggregate)`);
    if (row.sponsored !== '') ours(`${at} sponsored event must be blank`);
    if (row.amount !== '' && !/^\d+\.\d{2}$/.test(row.amount)) ours(`${at} donation amount ${q(row.amount)} is not digits, a point and 2 decimals`);
    const seen = hmrcCells(element, GIFT_AID_CELL_MAX);
    const trueEl = trueRowAt(row.rowIndex);
    const shown = trueEl ? trueCells(trueEl, GIFT_AID_CELL_MAX) : [];
    const c = seen.findIndex((t, i) => i >= CELL_START && t !== (shown[i] ?? ''));
    if (c >= 0) ours(`${at} HMRC reads ${q(seen[c] ?? '')} as column ${columnName(c)} but the sheet shows ${q(shown[c] ?? '')} there (covered, nested or repeated cells)`);
  });

  // No blank rows between donations: every row from 25 to the last donation holds one.
  const taken = new Set(read.map((r) => r.row.rowIndex));
  const last = read[read.length - 1]!.row.rowIndex;
  for (let i = ROW_START; i < last; i++) {
    if (taken.has(i)) continue;
    let j = i;
    while (j + 1 < last && !taken.has(j + 1)) j++;
    ours(`${i === j ? `row ${i + 1}` : `rows ${i + 1} to ${j + 1}`}: no donation, but donations follow (no blank rows between donations)`);
    i = j;
  }

  // Donations HMRC never reads: past row 1,024 (a row with more than an item in it, as HMRC's
  // decoder would take it; the template's own "Stop!" note in B1025 is fine), or in column L on.
  for (const r of layout.rows) {
    if (r.start + r.repeat <= GIFT_AID_ROW_MAX) continue;
    const cells = trueCells(r.element, GIFT_AID_CELL_MAX);
    if (cells.slice(CELL_START + 1).some((t) => javaTrim(t) !== '')) {
      ours(`row ${Math.max(r.start, GIFT_AID_ROW_MAX) + 1}: holds a donation past row 1,024, which HMRC never reads`);
    }
  }
  for (const r of layout.rows) {
    if (r.start + r.repeat <= ROW_START || r.start >= GIFT_AID_ROW_MAX) continue;
    const cells = trueCells(r.element, 64);
    const extra = cells.findIndex((t, i) => i >= GIFT_AID_CELL_MAX && t !== '');
    if (extra >= 0) ours(`row ${Math.max(r.start, ROW_START) + 1}: holds data in column ${columnName(extra)}, which HMRC never reads`);
  }
  return out;
}


/** Things that stop Java's ZipInputStream (HMRC reads the upload as a stream): a stored entry with
 * a data descriptor ("only DEFLATED entries can have EXT descriptor"), an entry it cannot inflate,
 * a CRC mismatch. */
function zipReadingProblems(file: OdsFile): string[] {
  const inner = internals.get(file);
  if (!inner) return [];
  const out = [...inner.unreadable];
  const first = file.entries[0];
  if (first && first.localHeaderOffset !== 0) out.push(`the first entry starts at byte ${first.localHeaderOffset}, not 0, so Java's ZipInputStream finds no entry`);
  for (const e of file.entries) {
    const l = inner.local.get(e);
    if (!l) continue;
    if ((l.flags & 0x8) !== 0 && l.method !== 8) out.push(`${e.name} is stored with a data descriptor, which Java's ZipInputStream rejects`);
    if (l.method !== 0 && l.method !== 8) out.push(`${e.name} uses compression method ${l.method}, which Java's ZipInputStream cannot read`);
    else if (l.method !== e.compressionMethod) out.push(`${e.name} has compression method ${l.method} in its local header but ${e.compressionMethod} in the central directory`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The OpenDocument package

/** Problems with the file as an OpenDocument package (not HMRC rules); [] when fine. */
export function packageProblems(file: OdsFile): string[] {
  const out: string[] = [];
  const inner = internals.get(file);

  const first = file.entries[0];
  if (!first || first.name !== 'mimetype') {
    const at = file.entries.findIndex((e) => e.name === 'mimetype');
    out.push(at < 0 ? 'no mimetype entry' : `mimetype is entry ${at + 1}, not the first`);
  }
  const mimeEntry = file.entries.find((e) => e.name === 'mimetype');
  if (mimeEntry) {
    if (mimeEntry.compressionMethod !== 0) out.push(`mimetype is compressed (method ${mimeEntry.compressionMethod}), not stored`);
    const l = inner?.local.get(mimeEntry);
    if (mimeEntry.extraFieldLength !== 0 || (l && l.centralExtraLength !== 0)) {
      out.push(`mimetype has an extra field (${mimeEntry.extraFieldLength} bytes in its local header, ${l?.centralExtraLength ?? '?'} in the central directory)`);
    }
    if (l && (l.flags & 0x8) !== 0) out.push('mimetype uses a data descriptor');
    if (mimeEntry.localHeaderOffset !== 0) out.push(`mimetype's local header is at offset ${mimeEntry.localHeaderOffset}, not 0`);
    const bytes = file.files.get('mimetype');
    if (bytes && bytes.toString('latin1') !== SPREADSHEET_MIME) out.push(`mimetype holds ${q(bytes.toString('latin1'))}, not ${q(SPREADSHEET_MIME)}`);
  }

  const seen = new Set<string>();
  for (const e of file.entries) {
    if (seen.has(e.name)) out.push(`entry ${q(e.name)} is in the archive twice`);
    seen.add(e.name);
  }
  out.push(...zipReadingProblems(file));

  const docs = new Map<string, Document>();
  for (const name of ['content.xml', 'styles.xml', 'meta.xml', 'META-INF/manifest.xml']) {
    const bytes = file.files.get(name);
    if (bytes === undefined) {
      out.push(`${name} missing`);
      continue;
    }
    const { doc, errors } = parseXml(bytes, false);
    if (!doc || errors.length > 0) out.push(`${name} is not well-formed XML: ${errors.join('; ') || 'unreadable'}`);
    else docs.set(name, doc);
  }

  const content = docs.get('content.xml');
  if (content) {
    const root = content.documentElement;
    if (!root || root.namespaceURI !== OFFICE_NS || root.localName !== 'document-content') out.push('content.xml is not an office:document-content');
    else if (root.getElementsByTagNameNS(OFFICE_NS, 'spreadsheet').length === 0) out.push('content.xml has no office:spreadsheet body');
  }

  const manifest = docs.get('META-INF/manifest.xml');
  if (manifest) {
    const listed = new Map<string, string>();
    const entries = manifest.getElementsByTagNameNS(MANIFEST_NS, 'file-entry');
    for (let i = 0; i < entries.length; i++) {
      const el = entries.item(i)!;
      const path = el.getAttributeNS(MANIFEST_NS, 'full-path') ?? '';
      if (listed.has(path)) out.push(`the manifest lists ${q(path)} twice`);
      listed.set(path, el.getAttributeNS(MANIFEST_NS, 'media-type') ?? '');
    }
    if (!listed.has('/')) out.push('the manifest does not list "/"');
    else if (listed.get('/') !== SPREADSHEET_MIME) out.push(`the manifest gives "/" the media type ${q(listed.get('/') ?? '')}, not ${q(SPREADSHEET_MIME)}`);
    for (const name of ['content.xml', 'styles.xml', 'meta.xml']) if (!listed.has(name)) out.push(`the manifest does not list ${name}`);
    for (const path of listed.keys()) {
      if (path !== '/' && !path.endsWith('/') && !seen.has(path)) out.push(`the manifest lists ${q(path)}, which the archive does not hold`);
    }
    for (const e of file.entries) {
      if (e.name === 'mimetype' || e.name.startsWith('META-INF/') || e.name.endsWith('/')) continue;
      if (!listed.has(e.name)) out.push(`archive entry ${q(e.name)} is not in the manifest`);
    }
  }
  return out;
}
