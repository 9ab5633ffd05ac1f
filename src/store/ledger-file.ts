// A PostgreSQL restore's claims file (….replaced-claims-<time>.json): the replaced database's claim
// ledger, kept beside the backup until its claims are kept (pg_restore drops it). One JSON object on
// one line, as JSON.stringify wrote it until 2026-12-01, when a scale review measured a restore of a
// ledger of 629,000 rows at about 1 GB: it is now written a page of rows at a time, the same bytes,
// and read back without holding its rows (an index of where each claim's are in the file), so
// that a file an older version wrote is read as one written now.
import { closeSync, fstatSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { byPosition, LEDGER_PAGE, type DatabaseLedger, type LedgerPages, type LedgerRow } from './claims.js';
import { PRIVATE_FILE } from './open.js';

/** The two arrays of rows a claims file holds, by their names in it. */
const KINDS = ['rows', 'withoutDonation'] as const;
type Kind = (typeof KINDS)[number];

/**
 * Writes `ledger` (its rows read a page at a time) and then `besideTrail` to `path`, a new file
 * readable by this user only (it holds donors' names and addresses): the bytes JSON.stringify gives of
 * the ledger read whole with `besideTrail` added. A file half written is removed.
 */
export async function writeLedgerFile(path: string, ledger: DatabaseLedger, besideTrail: unknown): Promise<string> {
  const { claims, charities, largestDonationId, donationCount } = ledger;
  const fd = openSync(path, 'wx', PRIVATE_FILE);
  try {
    const write = (text: string) => writeSync(fd, text);
    // Key by key, in readLedger's order; one undefined is left out, as JSON.stringify leaves it out.
    const fields: Array<[string, unknown]> = [['claims', claims], ['rows', 'rows'], ['withoutDonation', 'withoutDonation'], ['charities', charities], ['largestDonationId', largestDonationId], ['donationCount', donationCount], ['besideTrail', besideTrail]];
    let first = true;
    for (const [name, value] of fields) {
      if (value === undefined) continue;
      write(`${first ? '{' : ','}${JSON.stringify(name)}:`);
      first = false;
      if (name === 'rows' || name === 'withoutDonation') {
        write('[');
        let any = false;
        for await (const page of ledger.every(name)) {
          write(`${any ? ',' : ''}${page.map((r) => JSON.stringify(r)).join(',')}`);
          any = true;
        }
        write(']');
      } else write(JSON.stringify(value));
    }
    write(first ? '{}' : '}');
    closeSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw err;
  }
  return path;
}

/** Where some of a claim's rows of one kind are in the file: whole rows, one after the other (with the commas between), at most a page. */
interface Span {
  start: number;
  end: number;
  rows: number;
}

/** What readLedgerFile found: the file's values but for its rows, which arrays of rows it holds, and its rows as LedgerPages reads them. */
export interface LedgerFile {
  fields: Record<string, unknown>;
  arrays: ReadonlySet<Kind>;
  rowsOf: LedgerPages['rowsOf'];
}

/** How much of the file is read at a time. */
const READ_SIZE = 1 << 20;

/**
 * Reads the claims file at `path` as one JSON object, as JSON.parse would, but for its arrays of rows:
 * of those, only where each claim's rows are (spans of whole rows, each at most a page), read again a
 * page at a time as they are asked for. Undefined for a file that is not one JSON object (a trail's
 * JSON lines, or not JSON at all), for the caller to read otherwise.
 */
export function readLedgerFile(path: string): LedgerFile | undefined {
  const fd = openSync(path, 'r');
  try {
    return scan(path, fd);
  } finally {
    closeSync(fd);
  }
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function scan(path: string, fd: number): LedgerFile | undefined {
  const size = fstatSync(fd).size;
  const buffer = Buffer.alloc(READ_SIZE);
  let chunkStart = 0;
  /** The file's text from `start` to `end` (bytes; `end` in the part read last). */
  const text = (start: number, end: number): string => {
    if (start >= chunkStart) return buffer.toString('utf8', start - chunkStart, end - chunkStart);
    const bytes = Buffer.alloc(end - start);
    readSync(fd, bytes, 0, bytes.length, start);
    return bytes.toString('utf8');
  };
  const spans = new Map<Kind, Map<number, Span[]>>(KINDS.map((k) => [k, new Map()]));
  const unsorted = new Map<Kind, Set<number>>(KINDS.map((k) => [k, new Set()]));
  const fields: Record<string, unknown> = {};
  const arrays = new Set<Kind>();
  // Where the scan is: inside how many objects and arrays, in a string; in the top object, what comes next.
  let depth = 0;
  let inString = false;
  let escaped = false;
  let closed = false;
  let expect: 'key' | 'colon' | 'value' | 'inValue' = 'key';
  let key: string | undefined;
  let keyStart = 0;
  let valueStart = 0;
  let kind: Kind | undefined; // the array of rows being read
  let rowsValue = false; // the top object's value being read is an array of rows
  let element: number | undefined; // where the row being read began
  let rowDue = false; // a comma in the array of rows: a row follows
  let last: { claim: number; position: number; span: Span } | undefined;

  /** The row that began at `element` ends at `end` (a comma or the array's end): where it is, by its claim. */
  const addRow = (end: number): boolean => {
    if (element === undefined) return false;
    let row: { claim_id?: unknown; position?: unknown } | null;
    try {
      row = JSON.parse(text(element, end)) as typeof row;
    } catch {
      return false;
    }
    const claim = Number(row?.claim_id);
    const position = Number(row?.position);
    const ofKind = spans.get(kind!)!;
    if (last && last.claim === claim && last.span.rows < LEDGER_PAGE) {
      last.span.end = end;
      last.span.rows += 1;
    } else {
      const span = { start: element, end, rows: 1 };
      const of = ofKind.get(claim);
      if (of && last?.claim !== claim) unsorted.get(kind!)!.add(claim); // its rows are not all together
      if (of) of.push(span);
      else ofKind.set(claim, [span]);
      last = { claim, position: last?.claim === claim ? last.position : -Infinity, span };
    }
    if (position <= last.position) unsorted.get(kind!)!.add(claim);
    last.position = position;
    element = undefined;
    return true;
  };

  for (; chunkStart < size; chunkStart += READ_SIZE) {
    const length = readSync(fd, buffer, 0, Math.min(READ_SIZE, size - chunkStart), chunkStart);
    for (let i = 0; i < length; i++) {
      const c = buffer[i]!;
      const at = chunkStart + i;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) {
          inString = false;
          if (depth === 1 && expect === 'key') {
            try {
              key = JSON.parse(text(keyStart, at + 1)) as string;
            } catch {
              return undefined;
            }
            expect = 'colon';
          }
        }
        continue;
      }
      if (isSpace(c)) continue;
      if (closed) return undefined; // more after the object: JSON lines, say
      if (depth === 0) {
        if (c !== 0x7b) return undefined; // not an object
        depth = 1;
        continue;
      }
      if (depth === 1) {
        if (expect === 'key') {
          if (c === 0x22) [inString, keyStart] = [true, at];
          else if (c === 0x7d && key === undefined) [closed, depth] = [true, 0]; // {}
          else return undefined;
          continue;
        }
        if (expect === 'colon') {
          if (c !== 0x3a) return undefined;
          expect = 'value';
          continue;
        }
        if (expect === 'value') {
          [expect, valueStart] = ['inValue', at];
          if (c === 0x5b && (key === 'rows' || key === 'withoutDonation')) {
            [kind, rowsValue, last, depth] = [key, true, undefined, 2];
            arrays.add(key);
            continue;
          }
        } else if (c === 0x2c || c === 0x7d) {
          // The value's end: kept, unless it was an array of rows (kept as spans).
          if (!rowsValue) {
            try {
              fields[key!] = JSON.parse(text(valueStart, at));
            } catch {
              return undefined;
            }
          }
          rowsValue = false;
          if (c === 0x2c) expect = 'key';
          else [closed, depth] = [true, 0];
          continue;
        }
      }
      if (depth === 2 && kind !== undefined && element === undefined && c !== 0x2c && c !== 0x5d) [element, rowDue] = [at, false];
      if (c === 0x22) inString = true;
      else if (c === 0x7b || c === 0x5b) depth += 1;
      else if (c === 0x7d || c === 0x5d) {
        depth -= 1;
        if (depth < 1) return undefined;
        if (depth === 1 && kind !== undefined) {
          // The array of rows closed: its last row, if it has any, ended here.
          if ((element !== undefined && !addRow(at)) || rowDue) return undefined;
          kind = undefined;
        }
      } else if (c === 0x2c && depth === 2 && kind !== undefined) {
        if (!addRow(at)) return undefined;
        rowDue = true;
      }
    }
  }
  if (!closed) return undefined;
  return { fields, arrays, rowsOf: (claimId) => byPosition(rowsIn('rows', claimId), rowsIn('withoutDonation', claimId)) };

  /** A claim's rows of one kind, read from the file again a page at a time, in position order (as readLedger wrote them, or put in it). */
  async function* rowsIn(of: Kind, claimId: number): AsyncIterable<LedgerRow[]> {
    const where = spans.get(of)!.get(claimId) ?? [];
    if (where.length === 0) return;
    const again = openSync(path, 'r');
    try {
      const read = (span: Span): LedgerRow[] => {
        const bytes = Buffer.alloc(span.end - span.start);
        readSync(again, bytes, 0, bytes.length, span.start);
        return JSON.parse(`[${bytes.toString('utf8')}]`) as LedgerRow[];
      };
      if (!unsorted.get(of)!.has(claimId)) {
        for (const span of where) yield read(span);
        return;
      }
      // Not in order (a file Almoner did not write so): the claim's rows read whole, and put in order, as every file's were before 2026-12-01.
      const all = where.flatMap(read).sort((a, b) => a.position - b.position);
      for (let start = 0; start < all.length; start += LEDGER_PAGE) yield all.slice(start, start + LEDGER_PAGE);
    } finally {
      closeSync(again);
    }
  }
}
