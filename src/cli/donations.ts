// bin/almoner donations export: the donations as CSV or JSON Lines on standard output.
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Command, Option } from 'commander';
import { type Cast, stringify } from 'csv-stringify';
import { toDonationRecord } from '../donations/donation.js';
import { DONATION_FIELDS } from '../donations/fields.js';
import type { ExportedDonation } from '../store/store.js';
import { RFC_4180, spreadsheetCell } from './csv.js';
import { checkCharity, toStdoutStream, withStore } from './io.js';
import { fromArgument, toArgument, UsageError } from './usage.js';

/** The record's keys exactly as the API returns them, then who recorded it and when. */
function encoder({ format, bom, spreadsheet }: Pick<ExportOptions, 'format' | 'bom' | 'spreadsheet'>): Transform {
  if (format === 'jsonl') {
    return new Transform({ objectMode: true, transform: (row, _enc, done) => done(null, `${JSON.stringify(row)}\n`) });
  }
  return stringify({
    header: true,
    columns: COLUMNS,
    bom: bom === true || spreadsheet === true,
    ...RFC_4180,
    cast: {
      boolean: (v) => (v ? 'true' : 'false'), // as in the JSON record, not csv-stringify's 1/""
      ...(spreadsheet && { string: forSpreadsheet }),
    },
  });
}

/** The string columns that hold a value, not text: an amount is a number to a spreadsheet, as `id` is. */
const VALUE_COLUMNS = new Set<string | number | undefined>([...DONATION_FIELDS.filter((f) => f.kind === 'amount' || f.kind === 'date').map((f) => f.name), 'recorded_at']);

/** A string cell for a spreadsheet: a value column's as written, to be read as the value; a text column's as text. */
const forSpreadsheet: Cast<string> = (value, { column }) => spreadsheetCell(value, VALUE_COLUMNS.has(column));

export function exportRow(d: ExportedDonation) {
  return { ...toDonationRecord(d), charity: d.charity, recorded_at: d.recorded_at };
}

const COLUMNS = Object.keys(
  exportRow({ charity: '', recorded_at: '' } as ExportedDonation), // the key order, from the one serialiser
);

interface ExportOptions {
  charity?: string;
  from?: string;
  to?: string;
  format: 'csv' | 'jsonl';
  bom?: boolean;
  spreadsheet?: boolean;
}

export function donationsCommand(): Command {
  const donations = new Command('donations').description('take the donations out');

  donations
    .command('export')
    .description('write donations to standard output, filtered by charity and by donation date (both ends inclusive)')
    .option('--charity <username>', "only this charity's donations")
    .option('--from <YYYY-MM-DD>', 'donations dated on or after this day', fromArgument)
    .option('--to <YYYY-MM-DD>', 'donations dated on or before this day', toArgument)
    .addOption(new Option('--format <format>', 'csv (RFC 4180, with a header row) or jsonl (one JSON object per line)').choices(['csv', 'jsonl']).default('csv'))
    .addOption(new Option('--bom', 'start the CSV with a UTF-8 byte order mark, for spreadsheet programs (without one, Excel reads UTF-8 as Windows-1252)'))
    .addOption(
      new Option('--spreadsheet', "for a spreadsheet program: --bom, and an apostrophe first on a cell that would start a formula (=, +, -, @) and on text a spreadsheet would read as a number, date or boolean (07700900123, 1/2, TRUE), so it shows as text"),
    )
    .action(async (opts: ExportOptions) => {
      if (opts.bom && opts.format === 'jsonl') {
        throw new UsageError('--bom is for --format csv only: JSON Lines never starts with a byte order mark.');
      }
      if (opts.spreadsheet && opts.format === 'jsonl') {
        throw new UsageError('--spreadsheet is for --format csv only: JSON Lines is for programs, and holds every value as it is.');
      }
      if (opts.from !== undefined && opts.to !== undefined && opts.from > opts.to) {
        throw new UsageError('--from must not be later than --to.');
      }
      await withStore(async (store) => {
        await checkCharity(store, opts.charity);
        // Recorded before the first row is written: a reader that stops early has still taken data out.
        await store.audit({
          action: 'donations export',
          target: opts.charity ?? '(every charity)',
          summary: { format: opts.format, from: opts.from ?? null, to: opts.to ?? null, ...(opts.spreadsheet && { spreadsheet: true }) },
        });
        const source = Readable.from(
          (async function* () {
            for await (const d of store.exportDonations(opts)) yield exportRow(d);
          })(),
        );
        try {
          await pipeline(source, encoder(opts), toStdoutStream(), process.stdout, { end: false });
        } catch (err) {
          // A reader that stops early (`| head`) is not a failure.
          if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
        } finally {
          // The query must be finished before the store closes.
          if (!source.closed) await new Promise((resolve) => source.once('close', resolve));
        }
      });
    });

  return donations;
}
