// bin/almoner retention apply: erases the personal data whose retention period has ended.
import { Command } from 'commander';
import { retentionYearsFromEnv } from '../config.js';
import { ukDay } from '../time.js';
import { describeErasures } from './donor.js';
import { print, withStore } from './io.js';

export function retentionCommand(): Command {
  const retention = new Command('retention').description("donors' personal data kept no longer than it must be");
  retention
    .command('apply')
    .description('erase the personal data of gift-aided donations six years after their tax year, and of others after RETENTION_YEARS (6)')
    .option('--dry-run', 'say what would be erased, and change nothing')
    .action(async (opts: { dryRun?: boolean }) => {
      const retentionYears = retentionYearsFromEnv();
      const dryRun = opts.dryRun === true;
      const due = await withStore((store) => store.donors.applyRetention({ today: ukDay(new Date()), retentionYears, dryRun }));
      for (const line of describeErasures(due, dryRun)) print(line);
    });
  return retention;
}
