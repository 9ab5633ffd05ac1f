// bin/almoner retention apply: erases the personal data whose retention period has ended.
import { Command } from 'commander';
import { retentionYearsFromEnv } from '../config.js';
import { ukDay } from '../time.js';
import type { DonationErasure } from '../store/donors.js';
import { erasureLines, erasureSummary, sayTracesLeft } from './donor.js';
import { finishWhateverTheOutput, outputFailed, print, printDrained, withStore } from './io.js';

export function retentionCommand(): Command {
  const retention = new Command('retention').description("donors' personal data kept no longer than it must be");
  retention
    .command('apply')
    .description('erase the personal data of gift-aided donations seven years after their day, and of others RETENTION_YEARS (6) after it')
    .option('--dry-run', 'say what would be erased, and change nothing')
    .action(async (opts: { dryRun?: boolean }) => {
      const retentionYears = retentionYearsFromEnv();
      const dryRun = opts.dryRun === true;
      let count = 0;
      // Each batch's lines as it is done, the reader keeping up: all of them held until the end took 2.9 GB for 607,000 donations (a review).
      const each = async (erased: DonationErasure[]) => {
        count += erased.length;
        if (erased.length > 0) await printDrained(erasureLines(erased, dryRun));
      };
      // An erasure begun goes to its end, every batch and the checkpoint, though its reader has gone (`| head -1`); a dry run ends with it.
      if (!dryRun) finishWhateverTheOutput();
      const run = await withStore((store) => store.donors.applyRetention({ today: ukDay(new Date()), retentionYears, dryRun, each }));
      print(erasureSummary(count, dryRun));
      const failed = outputFailed();
      if (failed) {
        process.stderr.write(`almoner: not every line could be written (${failed.code === 'EPIPE' ? 'EPIPE: its reader went away' : (failed.code ?? failed.message)}); the erasure went on to its end: ${erasureSummary(count, dryRun)}\n`);
        if (failed.code !== 'EPIPE') process.exitCode = 1;
      }
      sayTracesLeft(run.tracesLeft);
    });
  return retention;
}
