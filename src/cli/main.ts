// bin/almoner: the operator's command. Every subcommand reads DATABASE_URL and applies migrations.
// Exit status: 0 done, 2 a bad argument (including an unknown username or a missing database), 1 anything else.
import cluster from 'node:cluster';
import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { endingEarly, outputFailed, outputGone, runningAs } from './io.js';
import { UsageError } from './usage.js';
import { ioErrorCode } from '../store/unavailable.js';

// A reader that goes away (`| head`) ends the command quietly, as it does any Unix tool; what was
// done stays done. A command whose output mattered more (a new password) says so itself first.
// Its row in almoner_instances (PostgreSQL) goes first: left, a restore run next was refused for 10 s.
// An erasure goes on to its end instead (io.ts, finishWhateverTheOutput), and says so itself.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (outputFailed()) return; // the command's writes meanwhile fail too
  if (err.code !== 'EPIPE') process.stderr.write(`almoner: cannot write the output: ${err.message}\n`);
  if (outputGone(err)) return;
  void endingEarly().finally(() => process.exit(err.code === 'EPIPE' ? (process.exitCode ?? 0) : 1));
});

const { version } = createRequire(import.meta.url)('almoner/package.json') as { version: string }; // by name: see scripts/bundle.mjs

const program = new Command('almoner')
  .description('Almoner: the donation recording service, and the commands to run it.')
  .version(version, '-V, --version', "print Almoner's version")
  .addHelpText(
    'after',
    "\nEnvironment:\n  DATABASE_URL  where the data lives (default sqlite:data/almoner.db in Almoner's folder)\n  PORT, HOST, LOG_LEVEL  for serve",
  );

program
  .command('serve')
  .description('run the HTTP service (PORT, default 3000; HOST, default 127.0.0.1; LOG_LEVEL, default info; WORKERS, default 1)')
  .action(async () => {
    const config = loadConfig();
    if (config.workers > 1 && cluster.isPrimary) {
      const { runPrimary } = await import('../cluster/primary.js'); // starts WORKERS processes, each of which comes back here
      await runPrimary(config);
    } else {
      const { serve } = await import('../server.js'); // only serve needs the HTTP stack
      await serve(config);
    }
  });

// Each command's module loads only when it is the one run (or when the command is not known: help,
// a typo's suggestions), so `serve` loads none of them (backups, Gift Aid claims, CSV, zip: about
// 150 kB of code, 15 to 20 ms of a start on a slow machine), and `charity list` only its own (about
// 20 ms of its 260). docs/performance.md has the measurements.
if (process.argv[2] !== 'serve') {
  // In the order `almoner --help` lists them.
  const COMMANDS = new Map<string, () => Promise<Command[]>>([
    ['charity', async () => [(await import('./charity.js')).charityCommand()]],
    ['donations', async () => [(await import('./donations.js')).donationsCommand()]],
    ['giftaid', async () => [(await import('./giftaid.js')).giftaidCommand()]],
    ['donor', async () => [(await import('./donor.js')).donorCommand()]],
    ['retention', async () => [(await import('./retention.js')).retentionCommand()]],
    ['backup', async () => [(await import('./backup.js')).backupCommand()]],
    ['restore', async () => [(await import('./backup.js')).restoreCommand()]],
    ['keep-replaced', async () => [(await import('./backup.js')).keepReplacedCommand()]],
    ['audit', async () => [(await import('./audit.js')).auditCommand()]],
  ]);
  // A Map, not an object: `almoner constructor` is an unknown command, not Object's own property.
  const named = COMMANDS.get(process.argv[2] ?? '');
  const commands = named ? await named() : (await Promise.all([...COMMANDS.values()].map((load) => load()))).flat();
  for (const command of commands) program.addCommand(command);
}

// Its name (`giftaid claim`), for the row a command keeps on PostgreSQL while it runs (io.ts, withStoreAt).
program.hook('preAction', (_program, action) => {
  const names: string[] = [];
  for (let c: Command | null = action; c && c !== program; c = c.parent) names.unshift(c.name());
  runningAs(names.join(' '));
});

// Subcommands added with addCommand do not inherit these settings, so set them on every one.
(function configure(command: Command) {
  command.exitOverride().showHelpAfterError('(add --help for usage)');
  command.commands.forEach(configure);
})(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitStatus(err);
  // A `serve` that could not start (a port in use, a setting) ends here, while its handlers still
  // hold SIGTERM and SIGINT; a worker's channel to the primary would keep it alive besides. Left to
  // end as its event loop emptied, Node's teardown put the signals' default action back some 15 ms
  // before the process was gone, and a SIGTERM then ended it by the signal, not with exit status 1
  // (a review: 17 of 20 `serve`s signalled as their "in use" message came).
  if (process.argv[2] === 'serve') process.exit();
}

function exitStatus(err: unknown): number {
  if (err instanceof CommanderError) {
    // Commander has already printed the message (or the help).
    return err.exitCode === 0 ? 0 : 2;
  }
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`almoner: ${err.message}\n`);
    return 2;
  }
  process.stderr.write(`almoner: ${err instanceof Error ? err.message : String(err)}${ioError(err)}\n`);
  return 1;
}

/**
 * What an I/O error of SQLite's leaves: a write whose fsync the disk refused may be in the WAL all
 * the same, read back by the next process to open the database (or undone by the next write), so the
 * command's change may have been made. Until 2026-11-30 it said `disk I/O error` alone, and a
 * `charity create` run again made a second charity (a review of a faults fix).
 */
function ioError(err: unknown): string {
  const code = ioErrorCode(err);
  if (!code) return '';
  return ` (${code}): the disk did not confirm the write, which may have been made all the same. See to the disk first; then look (charity list, giftaid claims, audit) before running the command again`;
}
