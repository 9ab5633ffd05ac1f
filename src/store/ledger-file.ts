// A PostgreSQL restore's claims file (….replaced-claims-<time>.json): the replaced database's claim
// ledger, kept beside the backup until its claims are kept (pg_restore drops it). Since 2026-12-01
// JSON lines: a first line with everything but the claims' rows (FORMAT, the claims, the
// charities, the counts), then a line a row, `{"rows":{…}}` or `{"withoutDonation":{…}}`, in claim
// and position order, written and read back a page of rows at a time. Until then it was one JSON
// object, written and read whole: a scale review measured a restore of a ledger of 629,000 rows at
// about 1 GB. A file an older version wrote is still read, whole, as it was.
import { closeSync, fstatSync, openSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import { byPosition, LEDGER_PAGE, pagesOf, type DatabaseLedger, type LedgerCopy, type LedgerPages, type LedgerRow } from './claims.js';
import { PRIVATE_FILE } from './open.js';

/** What the first line of a claims file written since 2026-12-01 says it is. */
const FORMAT = 'almoner claims file, JSON lines';

/** The two kinds of rows a claims file holds, by their names in it (LedgerCopy's). */
const KINDS = ['rows', 'withoutDonation'] as const;
type Kind = (typeof KINDS)[number];

/**
 * Writes `ledger` to `path`, a new file readable by this user only (it holds donors' names and
 * addresses): its first line, then its rows a page at a time as they are read. A file half written is removed.
 */
export async function writeLedgerFile(path: string, ledger: DatabaseLedger, besideTrail: unknown): Promise<string> {
  const { claims, charities, largestDonationId, donationCount } = ledger;
  const fd = openSync(path, 'wx', PRIVATE_FILE);
  try {
    writeSync(fd, `${JSON.stringify({ format: FORMAT, claims, charities, largestDonationId, donationCount, besideTrail })}\n`);
    for (const kind of KINDS) {
      for await (const page of ledger.every(kind)) writeSync(fd, page.map((row) => `${JSON.stringify({ [kind]: row })}\n`).join(''));
    }
    closeSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw err;
  }
  return path;
}

/** What readLedgerFile found: the file's values but for its rows, and its rows as LedgerPages reads them. */
export interface LedgerFile {
  fields: Record<string, unknown>;
  rowsOf: LedgerPages['rowsOf'];
}

/**
 * Reads the claims file at `path`: its first line, and where each claim's rows are (runs of whole
 * lines, each at most a page), read again a page at a time as they are asked for; or, written before
 * 2026-12-01, the one JSON object, whole. Undefined for a file that is neither (a trail's JSON lines,
 * or not JSON at all), for the caller to read otherwise.
 */
export function readLedgerFile(path: string): LedgerFile | undefined {
  const fd = openSync(path, 'r');
  try {
    const start = Buffer.alloc(READ_SIZE);
    const first = start.subarray(0, readSync(fd, start, 0, READ_SIZE, 0));
    if (first.subarray(0, FIRST_BYTES.length).equals(FIRST_BYTES)) return indexLines(path, fd);
    // An older file is one JSON object on one line: a file with a second line (a trail) is not read whole to find that out.
    const nl = first.indexOf(0x0a);
    return nl >= 0 && nl < first.length - 1 ? undefined : readWhole(fd);
  } finally {
    closeSync(fd);
  }
}

/** How a claims file written since 2026-12-01 begins (writeLedgerFile's first line names its format first). */
const FIRST_BYTES = Buffer.from(JSON.stringify({ format: FORMAT }).slice(0, -1));

/** A file an older version wrote: one JSON object holding `claims` and `rows`, read as it always was. */
function readWhole(fd: number): LedgerFile | undefined {
  let copy: unknown;
  try {
    copy = JSON.parse(readFileSync(fd, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof copy !== 'object' || copy === null || !Array.isArray((copy as LedgerCopy).claims) || !Array.isArray((copy as LedgerCopy).rows)) return undefined;
  const { rows: _, withoutDonation: __, ...fields } = copy as LedgerCopy;
  const whole = copy as Partial<LedgerCopy> & Pick<LedgerCopy, 'claims' | 'rows'>;
  return { fields, rowsOf: pagesOf({ ...whole, withoutDonation: whole.withoutDonation ?? [] }).rowsOf };
}

/** Where some of a claim's rows of one kind are in the file: whole lines, one after the other, at most a page. */
interface Span {
  start: number;
  end: number;
  rows: number;
}

/** How much of the file is read at a time. */
const READ_SIZE = 1 << 20;

/** A file whose first line says FORMAT: its first line, and its rows' places by claim and kind. Undefined for any other file. */
function indexLines(path: string, fd: number): LedgerFile | undefined {
  const size = fstatSync(fd).size;
  const spans = new Map<Kind, Map<number, Span[]>>(KINDS.map((k) => [k, new Map()]));
  let fields: Record<string, unknown> | undefined;
  let last: { kind: Kind; claim: number; span: Span } | undefined;
  const buffer = Buffer.alloc(READ_SIZE);
  let carried = Buffer.alloc(0); // a line begun in the part read before
  for (let offset = 0; offset < size; ) {
    const length = readSync(fd, buffer, 0, Math.min(READ_SIZE, size - offset), offset);
    const chunk = carried.length > 0 ? Buffer.concat([carried, buffer.subarray(0, length)]) : buffer.subarray(0, length);
    const chunkStart = offset - carried.length;
    let lineStart = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; lineStart = nl + 1, nl = chunk.indexOf(0x0a, lineStart)) {
      let line: unknown;
      try {
        line = JSON.parse(chunk.toString('utf8', lineStart, nl));
      } catch {
        return undefined;
      }
      if (fields === undefined) {
        if (typeof line !== 'object' || line === null || (line as { format?: unknown }).format !== FORMAT) return undefined;
        const { format: _, ...rest } = line as Record<string, unknown>;
        fields = rest;
        continue;
      }
      const kind = KINDS.find((k) => typeof line === 'object' && line !== null && k in line);
      if (kind === undefined) return undefined;
      const claim = Number((line as Record<Kind, LedgerRow>)[kind].claim_id);
      const [start, end] = [chunkStart + lineStart, chunkStart + nl + 1];
      if (last && last.kind === kind && last.claim === claim && last.span.rows < LEDGER_PAGE) {
        last.span.end = end;
        last.span.rows += 1;
        continue;
      }
      const span = { start, end, rows: 1 };
      const of = spans.get(kind)!;
      of.set(claim, [...(of.get(claim) ?? []), span]);
      last = { kind, claim, span };
    }
    offset += length;
    carried = Buffer.from(chunk.subarray(lineStart));
  }
  if (fields === undefined || carried.length > 0) return undefined; // empty, or its last line cut short
  const ofKind = (kind: Kind, claimId: number) => rowsIn(path, kind, spans.get(kind)!.get(claimId) ?? []);
  return { fields, rowsOf: (claimId) => byPosition(ofKind('rows', claimId), ofKind('withoutDonation', claimId)) };
}

/** A claim's rows of one kind, read from the file again a page (a span) at a time, in the order written (claim and position). */
async function* rowsIn(path: string, kind: Kind, where: readonly Span[]): AsyncIterable<LedgerRow[]> {
  if (where.length === 0) return;
  const fd = openSync(path, 'r');
  try {
    for (const span of where) {
      const bytes = Buffer.alloc(span.end - span.start);
      readSync(fd, bytes, 0, bytes.length, span.start);
      yield bytes
        .toString('utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as Record<Kind, LedgerRow>)[kind]);
    }
  } finally {
    closeSync(fd);
  }
}
