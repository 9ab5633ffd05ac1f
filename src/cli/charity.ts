// bin/almoner charity ...: sign charities up and manage their credentials.
import { fstatSync, statSync } from 'node:fs';
import { Command } from 'commander';
import { generatePassword, hashPassword } from '../charities/credentials.js';
import { signUpCharity } from '../charities/signup.js';
import { print, printAtOnce, printJson, withStore } from './io.js';
import { emailArgument, graceArgument, nameArgument, unknownCharity, UsageError } from './usage.js';
import { formatMicros, nowMicros } from '../time.js';

export function charityCommand(): Command {
  const charity = new Command('charity').description('sign charities up and manage their credentials');

  charity
    .command('create')
    .description('sign a charity up; prints its generated username and password (shown only this once)')
    .requiredOption('--name <name>', "the charity's name", nameArgument)
    .requiredOption('--email <email>', "the charity's contact e-mail address", emailArgument)
    .option('--json', 'print {"id","name","email","username","password"}')
    .action(async (opts: { name: string; email: string; json?: boolean }) => {
      refuseOutputToNowhere('create');
      const { charity: created, password } = await withStore((store) => signUpCharity(store, opts), { mayCreate: true });
      printSecret(
        created.username,
        opts.json
          ? [JSON.stringify({ id: created.id, name: created.name, email: created.email, username: created.username, password })]
          : [
              `Created charity "${created.name}" (id ${created.id}).`,
              `  username: ${created.username}`,
              `  password: ${password}`,
              'The password is shown only this once and is stored only as a hash: keep it now.',
              `A lost password is replaced with: bin/almoner charity rotate ${created.username}`,
            ],
      );
    });

  charity
    .command('list')
    .description('list the charities (no secrets)')
    .option('--json', 'print an array of {"id","name","email","username","active","created_at","old_password_until"}')
    .action(async (opts: { json?: boolean }) => {
      const charities = await withStore((store) => store.listCharities());
      if (opts.json) return printJson(charities);
      if (charities.length === 0) return print('No charities yet. Create one with: bin/almoner charity create --name NAME --email EMAIL');
      const status = (c: (typeof charities)[number]): string => (c.active ? 'active' : 'disabled') + (c.old_password_until ? ` (old password until ${c.old_password_until})` : '');
      const rows = charities.map((c) => [String(c.id), c.username, status(c), c.created_at, c.name, c.email]);
      const header = ['ID', 'USERNAME', 'STATUS', 'CREATED', 'NAME', 'EMAIL'];
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      for (const r of [header, ...rows]) print(r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
    });

  charity
    .command('rotate')
    .description("replace a charity's password with a new generated one; the old one stops working, or, with --grace, once the grace period is over")
    .argument('<username>')
    .option('--grace <duration>', 'let the old password go on working this long too (30m, 24h, 7d; at most 7d), so an integration can change over', graceArgument)
    .option('--json', 'print {"username","password","old_password_until"}')
    .action(async (username: string, opts: { grace?: number; json?: boolean }) => {
      // When the operator ran it (the process's start): where to look in the audit trail for a rotation this one overlapped.
      const began = formatMicros(nowMicros() - Math.round(performance.now() * 1000));
      refuseOutputToNowhere('rotate');
      const password = generatePassword();
      const graceUntil = opts.grace === undefined ? undefined : formatMicros(nowMicros() + opts.grace * 1000);
      await withStore(async (store) => {
        const before = await store.findCredential(username);
        if (!before) throw unknownCharity(username);
        // Over the password it found, or not at all: two rotations at
        // once (overlapping timers, a script run again while its first run still went) each printed a password and said the old one
        // worked on, but the second replaced the first's at once, and with --grace the old one too (a review, 2026-11-30: one
        // printed password never worked, in every round).
        if (!(await store.setPasswordHash(username, hashPassword(password), graceUntil, before.password_hash))) {
          const other = (await store.auditTrail(began)).filter((e) => e.target === username).at(-1);
          const who = other ? `\`${other.action}\` (by ${other.os_user}@${other.host} at ${other.at})` : 'another command';
          throw new Error(
            `${who} changed the credentials of ${username} while this charity rotate ran, so this one changed nothing and shows no password` +
              (other?.action === 'charity rotate' ? ': the password that rotation printed is the one that works' : '') +
              '. Run charity rotate again if a new password is still needed.',
          );
        }
      });
      printSecret(
        username,
        opts.json
          ? [JSON.stringify({ username, password, old_password_until: graceUntil ?? null })]
          : [
              `New password for ${username}: ${password}`,
              graceUntil === undefined
                ? 'The old password no longer works. The new one is shown only this once.'
                : `The old password works until ${graceUntil} too, then stops (sooner with: bin/almoner charity end-grace ${username}). The new one is shown only this once.`,
            ],
      );
    });

  charity
    .command('end-grace')
    .description('stop the old password that rotate --grace left working, now')
    .argument('<username>')
    .action(async (username: string) => {
      const outcome = await withStore((store) => store.endGrace(username));
      if (outcome === 'unknown') throw unknownCharity(username);
      print(outcome === 'none' ? `${username} has no old password that still works: nothing changed.` : `The old password of ${username} no longer works.`);
    });

  for (const [name, active] of [['disable', false], ['enable', true]] as const) {
    charity
      .command(name)
      .description(active ? 'let a disabled charity authenticate again' : 'stop a charity from authenticating (its data stays)')
      .argument('<username>')
      .action(async (username: string) => {
        const outcome = await withStore((store) => store.setActive(username, active));
        if (outcome === 'unknown') throw unknownCharity(username);
        print(outcome === 'already' ? `${username} was already ${active ? 'enabled' : 'disabled'}: nothing changed.` : `${active ? 'Enabled' : 'Disabled'} ${username}.`);
      });
  }

  return charity;
}

/**
 * Standard output closed (`>&-`: Node puts /dev/null in its place) or sent to /dev/null: a new
 * password written there is never seen, and the charity would be left with one nobody knows. Refused
 * before anything changes (exit 2).
 */
function refuseOutputToNowhere(command: 'create' | 'rotate'): void {
  const out = fstatSync(1);
  if (out.isCharacterDevice() && out.rdev === statSync('/dev/null').rdev) {
    throw new UsageError(`standard output is closed or /dev/null, so the new password would never be seen: run charity ${command} with its output going somewhere you can read it`);
  }
}

/**
 * A new password and what goes with it, in one write: a reader gets all of it or none. None (the
 * reader went away): the password is lost, so the operator is told how to make another.
 */
function printSecret(username: string, lines: string[]): void {
  printAtOnce(lines, (err) => {
    const why = err.code === 'EPIPE' ? 'the output was closed before the password could be written' : `the password could not be written (${err.code ?? err.message})`;
    process.stderr.write(
      `almoner: ${why}; ${username} has a password nobody has seen. ` +
        `Set a new one with: bin/almoner charity rotate ${username}\n`,
    );
    process.exitCode = 1;
  });
}
