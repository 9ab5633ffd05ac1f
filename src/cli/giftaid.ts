// bin/almoner giftaid schedule: a charity's Gift Aid donations as HMRC Charities Online schedule
// CSV files (at most 1,000 rows each), and the donations that cannot be claimed as they stand in
// needs-attention.csv. The rules live in src/giftaid/schedule.ts; this file streams and writes.
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { stringify } from 'csv-stringify/sync';
import {
  assessDonation,
  ATTENTION_COLUMNS,
  ATTENTION_FILE_NAME,
  attentionCells,
  claimCutoff,
  formatPounds,
  MAX_ROWS_PER_SCHEDULE,
  SCHEDULE_COLUMNS,
  scheduleCells,
  scheduleFileName,
} from '../giftaid/schedule.js';
import { print, withStore } from './io.js';
import { fromArgument, toArgument, UsageError } from './usage.js';

interface ScheduleOptions {
  charity: string;
  from: string;
  to: string;
  out: string;
}

/** Files a previous run may have left: never overwritten, lest an old schedule be claimed twice. */
const OUR_FILES = /^(?:schedule-\d{3,}\.csv|needs-attention\.csv)$/;

export function giftaidCommand(): Command {
  const giftaid = new Command('giftaid').description('claim Gift Aid from HMRC');

  giftaid
    .command('schedule')
    .description(
      "write a charity's Gift Aid donations as HMRC Charities Online schedule CSV files (schedule-001.csv, …, " +
        'at most 1,000 rows each) and the donations that cannot be claimed as they stand to needs-attention.csv',
    )
    .requiredOption('--charity <username>', 'the charity claiming')
    .requiredOption('--from <YYYY-MM-DD>', 'donations dated on or after this day', fromArgument)
    .requiredOption('--to <YYYY-MM-DD>', 'donations dated on or before this day', toArgument)
    .option('--out <dir>', 'the folder to write the files to, created if missing', '.')
    .action(async (opts: ScheduleOptions) => {
      if (opts.from > opts.to) throw new UsageError('--from must not be later than --to.');
      const dir = resolve(opts.out);
      await checkOutputFolder(dir, opts.out);
      const today = todayInUk();

      await withStore(async (store) => {
        if (!(await store.findCredential(opts.charity))) {
          throw new UsageError(`no charity has the username ${JSON.stringify(opts.charity)}.`);
        }
        await mkdir(dir, { recursive: true });
        const files = new OutputFiles(dir);
        let claimable = 0;
        let claimableMinor = 0;
        let attention = 0;
        let notGiftAid = 0;
        const perSchedule: number[] = [];
        try {
          const attentionFile = await files.open(ATTENTION_FILE_NAME, ATTENTION_COLUMNS);
          let schedule: CsvFile | undefined;
          for await (const d of store.exportDonations({ charity: opts.charity, from: opts.from, to: opts.to })) {
            const a = assessDonation(d, today);
            if (a.kind === 'claimable') {
              if (!schedule || schedule.rows === MAX_ROWS_PER_SCHEDULE) {
                if (schedule) await schedule.close();
                schedule = await files.open(scheduleFileName(perSchedule.length + 1), SCHEDULE_COLUMNS);
                perSchedule.push(0);
              }
              await schedule.write(scheduleCells(a.row));
              perSchedule[perSchedule.length - 1]!++;
              claimable++;
              claimableMinor += a.amountMinor;
            } else if (a.kind === 'needs-attention') {
              await attentionFile.write(attentionCells(a.row));
              attention++;
            } else {
              notGiftAid++;
            }
          }
          await schedule?.close();
          await attentionFile.close();
          await files.commit();
        } catch (err) {
          await files.abandon();
          throw err;
        }

        const shown = (name: string) => join(opts.out, name);
        print(`Gift Aid schedule for ${opts.charity}, donations dated ${opts.from.slice(0, 10)} to ${opts.to.slice(0, 10)} (claim date ${today}):`);
        if (claimable === 0) {
          print('  No donations can be claimed: no schedule file was written.');
        } else {
          print(`  ${count(claimable, 'donation')} to claim, ${pounds(claimableMinor)} in all, in ${count(perSchedule.length, 'schedule file')}:`);
          perSchedule.forEach((rows, i) => print(`    ${shown(scheduleFileName(i + 1))}  (${count(rows, 'row')})`));
        }
        print(
          attention === 0
            ? `  No donation needs attention (${shown(ATTENTION_FILE_NAME)} has only its header row).`
            : `  ${count(attention, 'donation')} need${attention === 1 ? 's' : ''} attention before ${attention === 1 ? 'it' : 'they'} can be claimed: ${shown(ATTENTION_FILE_NAME)}`,
        );
        if (notGiftAid > 0) print(`  ${count(notGiftAid, 'donation')} without Gift Aid ${notGiftAid === 1 ? 'was' : 'were'} left out.`);
        print(`  Donations dated before ${claimCutoff(today)} are more than four years old and cannot be claimed.`);
      });
    });

  return giftaid;
}

/** The folder must not already hold a schedule or a needs-attention.csv: an old file would mix with the new. */
async function checkOutputFolder(dir: string, shown: string): Promise<void> {
  const info = await stat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!info) return;
  if (!info.isDirectory()) throw new UsageError(`--out ${shown} is not a folder.`);
  const existing = (await readdir(dir)).filter((name) => OUR_FILES.test(name)).sort();
  if (existing.length > 0) {
    throw new UsageError(
      `${shown === '.' ? 'the current folder' : shown} already holds ${existing.join(', ')}: move or delete ${existing.length === 1 ? 'it' : 'them'} first, or choose another --out folder, so that no old schedule is claimed with the new.`,
    );
  }
}

/** Today in the UK, where the claim is made, as YYYY-MM-DD. */
function todayInUk(now = new Date()): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' }).format(now);
}

/**
 * The files of one run. Each is written under a hidden temporary name and renamed into place only
 * when the whole run has succeeded, so a failure half-way leaves no partial schedule to be claimed.
 */
class OutputFiles {
  private readonly files: CsvFile[] = [];

  constructor(private readonly dir: string) {}

  async open(name: string, columns: readonly string[]): Promise<CsvFile> {
    const file = new CsvFile(join(this.dir, `.${name}.partial`), join(this.dir, name));
    this.files.push(file);
    await file.open(columns);
    return file;
  }

  async commit(): Promise<void> {
    for (const f of this.files) await rename(f.partialPath, f.finalPath);
  }

  async abandon(): Promise<void> {
    for (const f of this.files) {
      f.destroy();
      await rm(f.partialPath, { force: true });
    }
  }
}

/**
 * A CSV file as spreadsheets open it cleanly: UTF-8 with a byte order mark (without one, Excel reads
 * UTF-8 as Windows-1252 and "Zoë" becomes "ZoÃ«"), a header row, RFC 4180 quoting, CRLF line ends.
 */
class CsvFile {
  rows = 0;
  private stream: WriteStream | undefined;
  /** A write error, kept until the next write or close reports it (an unheard 'error' would crash the process). */
  private failure: Error | undefined;

  constructor(
    readonly partialPath: string,
    readonly finalPath: string,
  ) {}

  async open(columns: readonly string[]): Promise<void> {
    this.stream = createWriteStream(this.partialPath, { flags: 'w' });
    this.stream.on('error', (err) => (this.failure ??= err));
    await once(this.stream, 'open');
    await this.put(`\uFEFF${csvLine(columns)}`);
  }

  async write(cells: string[]): Promise<void> {
    await this.put(csvLine(cells));
    this.rows++;
  }

  async close(): Promise<void> {
    const stream = this.stream;
    if (!stream) return;
    if (!stream.closed) {
      stream.end();
      await once(stream, 'close');
    }
    if (this.failure) throw this.failure;
  }

  destroy(): void {
    this.stream?.destroy();
  }

  private async put(text: string): Promise<void> {
    const stream = this.stream!;
    if (this.failure) throw this.failure;
    if (!stream.write(text)) await once(stream, 'drain');
  }
}

function csvLine(cells: readonly string[]): string {
  return stringify([cells], { record_delimiter: 'windows' });
}

function count(n: number, noun: string): string {
  return `${n.toLocaleString('en-GB')} ${noun}${n === 1 ? '' : 's'}`;
}

/** Pence as £1,234.56 (for people; the files carry no currency sign). */
function pounds(minor: number): string {
  const [whole, pence] = formatPounds(minor).split('.');
  return `£${BigInt(whole!).toLocaleString('en-GB')}.${pence}`;
}
