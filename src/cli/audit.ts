// bin/almoner audit: the trail of operator actions, oldest first.
import { Command } from 'commander';
import { print, printJson, withStore } from './io.js';
import { fromArgument } from './usage.js';

export function auditCommand(): Command {
  return new Command('audit')
    .description('list the audit trail: every operator action, when, by whom, on what (oldest first)')
    .option('--since <YYYY-MM-DD>', 'from the start of this day (UTC) on', fromArgument)
    .option('--json', 'one JSON object per line: {"id","at","action","target","os_user","host","summary"}')
    .action(async (opts: { since?: string; json?: boolean }) => {
      const trail = await withStore((store) => store.auditTrail(opts.since));
      if (opts.json) return trail.forEach(printJson);
      if (trail.length === 0) return print(opts.since === undefined ? 'No operator actions recorded.' : `No operator actions recorded since ${opts.since.slice(0, 10)} (UTC).`);
      const rows = trail.map((r) => [r.at, r.action, r.target, `${r.os_user}@${r.host}`, JSON.stringify(r.summary)]);
      const header = ['AT', 'ACTION', 'TARGET', 'BY', 'SUMMARY'];
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      for (const r of [header, ...rows]) print(r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
    });
}
