// bin/almoner retention apply: erases the personal data whose retention period has ended.
import { Command } from 'commander';
import { retentionYearsFromEnv } from '../config.js';
import { ukDay } from '../time.js';
import { describeErasures, sayTracesLeft } from './donor.js';
import { print, withStore } from './io.js';

export function retentionCommand(): Command {
  const retention = new Command('retention').description("donors' personal data kept no longer than it must be");
  retention
    .command('apply')
    .description('erase the personal data of gift-aided donations seven years after their day, and of others RETENTION_YEARS (6) after it')
    .option('--dry-run', 'say what would be erased, and change nothing')
    .action(async (opts: { dryRun?: boolean }) => {
      const retentionYears = retentionYearsFromEnv();
      const dryRun = opts.dryRun === true;
      const run = await withStore((store) => store.donors.applyRetention({ today: ukDay(new Date()), retentionYears, dryRun }));
      for (const line of describeErasures(run.erased, dryRun)) print(line);
      sayTracesLeft(run.tracesLeft);
    });
  return retention;
}
