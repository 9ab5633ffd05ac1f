// bin/almoner giftaid: claim Gift Aid from HMRC. `claim` prepares a claim of a charity's unclaimed
// Gift Aid donations and records it in the ledger (src/store/claims.ts), `files` writes its HMRC
// schedule spreadsheets again, `mark` records what HMRC did with it, `claims` lists them, and
// `schedule` previews, claiming nothing. The rules live in src/giftaid/schedule.ts, the
// spreadsheet in src/giftaid/ods.ts; this file reads, decides what to write, and writes.
import { randomBytes } from 'node:crypto';
import { constants, existsSync, lstatSync, rmSync, statSync } from 'node:fs';
import { access, mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { Argument, Command, InvalidArgumentError } from 'commander';
import { stringify } from 'csv-stringify/sync';
import { CLAIM_STATUSES, NEXT_STATUSES, type ClaimStatus } from '../giftaid/claim.js';
import { scheduleSpreadsheet, type SHEET_NAMES } from '../giftaid/ods.js';
import { RETRY_ACROSS_MIDNIGHT_MS, TwinFinder, type GiftFacts, type Twin } from '../giftaid/twins.js';
import {
  ATTENTION_COLUMNS,
  attentionFileName,
  attentionCells,
  buildSchedule,
  chunk,
  claimCutoff,
  pastEveryPeriodCutoff,
  dayMonthYear,
  donationDay,
  formatPounds,
  HOUSE_MAX_LENGTH,
  mergeSchedules,
  MAX_ROWS_PER_SCHEDULE,
  NAME_MAX_LENGTH,
  pounds,
  REASONS,
  sameGiftKey,
  setAsideTwins,
  type AttentionRow,
  type Schedule,
  type ScheduleRow,
} from '../giftaid/schedule.js';
import { ClaimConflictError, ClaimReopenError, ClaimStatusError, type Claim } from '../store/claims.js';
import type { Store } from '../store/store.js';
import { claimsUnsettledBy } from '../store/audit.js';
import { formatMicros, ukDay, ukEndOfDayIso, ukStartOfDayIso } from '../time.js';
import { RFC_4180, spreadsheetCell } from './csv.js';
import { PRIVATE_FILE } from '../store/open.js';
import { lockFile } from '../store/restoring.js';
import { refuseSharedFolder } from '../store/sqlite-backup.js';
import { count, print, printJson, withStore } from './io.js';
import { dayArgument, periodEndArgument, unknownCharity, UsageError } from './usage.js';

const claimFileName = (claim: number, file: number) => `claim-${claim}-${file}.ods`;
/**
 * Any claim's schedule (claimFileName), under any name a person or a program gives a copy of it
 * (Claim-1-1.ODS, "claim-1-1 (1).ods", "Copy of claim-1-1.ods", "claim-1-1_corrected.ods", which
 * until 2026-11-29 was not seen; a review): a folder holding one takes no other claim's, so that no
 * two are uploaded together. A spreadsheet of one's own named so ("claims 2025.ods") is refused too.
 */
const CLAIM_SCHEDULE = /claim.*\.ods$/i;
const claimAttentionName = (claim: number) => `claim-${claim}-needs-attention.csv`;
/**
 * A preview's file: the charity's username in its name, as its needs-attention file has, so two charities' previews can share a
 * folder (until 2026-12-02 both were preview-1.ods, and the second was refused: a README walkthrough).
 */
const previewFileName = (username: string, file: number) => `preview-${username}-${file}.ods`;
/** A charity's preview files of any run, which a new preview into the same folder does not write over. */
const previewFamily = (username: string) => new RegExp(`^preview-${username.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+\\.ods$`);

export function giftaidCommand(): Command {
  const giftaid = new Command('giftaid').description('claim Gift Aid from HMRC: prepare a claim, write its files, record what HMRC did');

  giftaid
    .command('claim')
    .description(
      "prepare a new claim of a charity's Gift Aid donations that are in no other live claim, record it, and write its " +
        'HMRC schedule spreadsheets (claim-ID-1.ods, …, at most 1,000 donations each) and the donations left out, with the reason, to claim-ID-needs-attention.csv',
    )
    .requiredOption('--charity <username>', 'the charity claiming')
    .requiredOption('--out <dir>', 'the folder to write the files to, created if missing')
    .option('--to <YYYY-MM-DD>', 'donations dated on or before this UK day (default: today in the UK)', dayArgument)
    .option('--period-end <MM-DD>', "the day the charity's accounting period ends each year (04-05 for 5 April): HMRC takes a donation up to four years after the end of its period; without it, up to four years before today", periodEndArgument)
    .option('--checked-since-backup', "after a restore into a new database: you have compared bin/almoner giftaid claims with what was sent to HMRC since its backup (the claims made since are not in it)")
    .option('--json', 'print {"claim","files","needs_attention","donations","total","shortened"}')
    .action(async (opts: { charity: string; out: string; to?: string; periodEnd?: string; checkedSinceBackup?: boolean; json?: boolean }) => {
      const today = ukDay(new Date()); // the claim is made in the UK
      const upTo = opts.to ?? today;
      if (upTo > today) {
        throw new UsageError(`--to must not be later than today (${today}): HMRC refuses donations dated in the future.`);
      }
      const dir = await outputFolder(opts.out);

      await withStore(async (store) => {
        const charity = await findCharity(store, opts.charity);
        if (!opts.checkedSinceBackup) await refuseAfterBlindRestore(store);
        // Both before the folder is made, so a refusal leaves nothing behind (until 2026-11-30 it left the folder it had made,
        // empty; a README audit). A folder others can write to first: --out /tmp was refused for the claims other runs had left
        // in its folders, a long list that did not say why /tmp itself will not do (a README walkthrough, 2026-12-02).
        refuseSharedOut(dir, opts.out);
        await refuseOtherClaims(dir); // nowhere near another claim's files, a rejected one's above all
        await makeFolder(dir, opts.out); // before the claim is recorded: its files must have somewhere to go
        // Held until the command ends: another claim into this folder at the same time (overlapping timers, a script run
        // again) looked, found it empty, recorded its claim and was refused its files (until 2026-11-30; a review).
        await holdFolder(dir, opts.out);
        await refuseOtherClaims(dir); // again, now that no other can be writing there: one that just finished may have written its files
        const { claim, assessed } = await prepareClaim(store, charity.id, upTo, today, opts.periodEnd, opts.checkedSinceBackup);
        if (!claim) {
          // No claim, so no entry from the ledger; the donations left out are still written out (names, addresses).
          await store.audit({
            action: 'giftaid claim',
            target: opts.charity,
            summary: { charity_id: charity.id, up_to: upTo, donations: 0, total_minor: 0, needs_attention: assessed.needsAttention.length, period_end: opts.periodEnd ?? null, ...(opts.checkedSinceBackup && { checked_since_backup: true }) },
          });
        }

        const attentionName = claim ? claimAttentionName(claim.id) : attentionFileName(opts.charity);
        let files: string[] = [];
        try {
          if (claim) files = await writeNewFiles(dir, await claimSpreadsheets(store, claim, charity.name), { family: CLAIM_SCHEDULE });
          await writeAttention(dir, attentionName, assessed.needsAttention);
        } catch (err) {
          if (!claim) throw err;
          const why = (err instanceof Error ? err.message : String(err)).replace(/\.$/, '');
          // The donations left out are in no claim, so `giftaid files` cannot write them: a preview lists them again.
          const leftOut = assessed.needsAttention.length;
          const listThem =
            `list the ${leftOut} donation${leftOut === 1 ? '' : 's'} left out (needing attention) with: ` +
            `bin/almoner giftaid schedule --charity ${opts.charity} --from 0001-01-01 --to ${upTo} --out DIR (a preview: it claims nothing)`;
          // Which were written: the schedules all or none (writeNewFiles), then the list. Until 2026-11-29 the message did not say (a review).
          throw new Error(
            files.length > 0
              ? `claim ${claim.id} was prepared and recorded, and its schedule${files.length === 1 ? ' was' : 's were'} written (${files.map((f) => join(opts.out, f)).join(', ')}), ` +
                  `but not its list of the donations left out: ${why}. To see them, ${listThem}`
              : `claim ${claim.id} was prepared and recorded, but none of its files was written: ${why}. ` +
                  // Another folder: one holding this claim's schedule is refused (refuseOtherClaims).
                  `Write them to a new folder with: bin/almoner giftaid files ${claim.id} --out DIR${leftOut === 0 ? '' : `, and ${listThem}`}`,
          );
        }

        const shown = (name: string) => join(opts.out, name);
        const needsAttention = assessed.needsAttention.length > 0 ? shown(attentionName) : null;
        if (opts.json) {
          printJson({
            claim: claim?.id ?? null,
            files: files.map(shown),
            needs_attention: needsAttention,
            donations: claim?.donation_count ?? 0,
            total: formatPounds(claim?.total_minor ?? 0),
            shortened: assessed.shortened,
          });
          return;
        }
        if (claim) {
          print(`Claim ${claim.id} for ${charity.name} (${opts.charity}) prepared: ${count(claim.donation_count, 'donation')} dated up to ${dayMonthYear(claim.up_to)}, ${pounds(claim.total_minor)} in all.`);
          print(`  ${files.length === 1 ? 'Its schedule' : `Its ${files.length} schedules (one HMRC upload each)`}: ${files.map(shown).join(', ')}`);
        } else {
          print(`Nothing to claim for ${opts.charity}: no Gift Aid donation dated up to ${dayMonthYear(upTo)} is both claimable and in no live claim. No claim was made.`);
        }
        printShortened(assessed);
        printLeftOut(assessed, needsAttention, today, opts.periodEnd);
        // A claim recorded whose command was stopped before its files were written holds its donations with no file to show for it.
        if (assessed.claimedBefore > 0) {
          for (const c of (await store.claims.list(charity.id)).filter((c) => c.status === 'prepared' && c.id !== claim?.id).reverse()) {
            print(
              `  Claim ${c.id} (${count(c.donation_count, 'donation')}, ${pounds(c.total_minor)}) was prepared on ${dayMonthYear(preparedDay(c))} and is not yet marked submitted: ` +
                `if you do not have its files, write them with bin/almoner giftaid files ${c.id} --out DIR`,
            );
          }
        }
        if (claim) {
          print(`Next: open ${files.length === 1 ? 'the file' : 'each file'}, check it, attach it to a claim in HMRC Charities Online, then record that with`);
          print(`  bin/almoner giftaid mark ${claim.id} submitted`);
        }
      });
    });

  giftaid
    .command('claims')
    .description('list the claims, newest first, with their status, donation count and total')
    .option('--charity <username>', "only this charity's claims")
    .option('--json', 'print an array of {"id","charity","status","donations","total","up_to","claim_date","prepared_at","submitted_at","paid_at","rejected_at"}')
    .action(async (opts: { charity?: string; json?: boolean }) => {
      await withStore(async (store) => {
        const charityId = opts.charity === undefined ? undefined : (await findCharity(store, opts.charity)).id;
        const claims = await store.claims.list(charityId);
        if (opts.json) return printJson(claims.map(claimJson));
        if (claims.length === 0) return print(opts.charity ? `No claims for ${opts.charity} yet.` : 'No claims yet.');
        const table = [
          ['claim', 'charity', 'status', 'donations', 'total', 'up to', 'prepared'],
          ...claims.map((c) => [String(c.id), c.charity, c.status, c.donation_count.toLocaleString('en-GB'), pounds(c.total_minor), c.up_to, preparedDay(c)]),
        ];
        const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
        const numeric = new Set([0, 3, 4]);
        for (const r of table) print(r.map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd());
      });
    });

  giftaid
    .command('mark')
    .description(
      'record what happened to a claim at HMRC: submitted (uploaded), then paid or rejected; rejected frees its donations for the next claim. ' +
        `Allowed: ${CLAIM_STATUSES.filter((s) => NEXT_STATUSES[s].length > 0).map((s) => `${s} -> ${NEXT_STATUSES[s].join('|')}`).join(', ')}`,
    )
    .argument('<claim>', 'the claim id', claimIdArgument)
    .addArgument(new Argument('<status>', 'submitted, paid or rejected').choices(['submitted', 'paid', 'rejected']))
    .option('--json', 'print the claim as `claims --json` does')
    .action(async (id: number, status: ClaimStatus, opts: { json?: boolean }) => {
      await withStore(async (store) => {
        let marked;
        try {
          marked = await store.claims.mark(id, status);
        } catch (err) {
          if (err instanceof ClaimStatusError) throw new UsageError(err.message);
          throw err;
        }
        if (!marked) throw new UsageError(`no claim has the id ${id}.`);
        const { claim, changed } = marked;
        if (opts.json) return printJson(claimJson(claim));
        if (!changed) return print(`Claim ${id} is already ${status}: nothing changed.`);
        print(
          status === 'rejected'
            ? `Claim ${id} marked rejected: its ${count(claim.donation_count, 'donation')} can go in the next claim.\n` +
                `  Delete the files written for it before (claim-${id}-*.ods): they still pass HMRC's checker, and uploaded after the next claim they would claim ` +
                `those donations twice. bin/almoner giftaid files ${id} --out DIR writes them again, marked as rejected.\n` +
                `  Marked rejected by mistake? bin/almoner giftaid reopen ${id} takes it back, while no other claim holds its donations.`
            : `Claim ${id} marked ${status}.`,
        );
      });
    });

  giftaid
    .command('reopen')
    .description(
      'take back a rejection marked by mistake: the claim is again what it was (submitted, or prepared if never submitted) and its donations are its own again; ' +
        'refused while another live claim holds any of them',
    )
    .argument('<claim>', 'the claim id', claimIdArgument)
    .option('--json', 'print the claim as `claims --json` does')
    .action(async (id: number, opts: { json?: boolean }) => {
      await withStore(async (store) => {
        let claim;
        try {
          claim = await store.claims.reopen(id);
        } catch (err) {
          if (err instanceof ClaimReopenError) throw new UsageError(err.message);
          throw err;
        }
        if (!claim) throw new UsageError(`no claim has the id ${id}.`);
        if (opts.json) return printJson(claimJson(claim));
        print(
          `Claim ${id} reopened: ${claim.status} again, with its ${count(claim.donation_count, 'donation')}; the next claim will not take ${claim.donation_count === 1 ? 'it' : 'them'}. ` +
            `bin/almoner giftaid files ${id} --out DIR writes its files again.`,
        );
      });
    });

  giftaid
    .command('files')
    .description("write a claim's HMRC schedule spreadsheets again, with the same rows (claim-ID-1.ods, …)")
    .argument('<claim>', 'the claim id', claimIdArgument)
    .requiredOption('--out <dir>', 'the folder to write the files to, created if missing')
    .option('--resend', 'a submitted claim: write files HMRC takes, to upload again the one HMRC refused (and no other)')
    .option('--json', 'print {"claim","files"}')
    .action(async (id: number, opts: { out: string; resend?: boolean; json?: boolean }) => {
      const dir = await outputFolder(opts.out);
      await withStore(async (store) => {
        const claim = await store.claims.find(id);
        if (!claim) throw new UsageError(`no claim has the id ${id}.`);
        if (opts.resend && claim.status !== 'submitted') {
          throw new UsageError(`--resend is for a submitted claim, one of whose files HMRC refused; claim ${id} is ${claim.status}${claim.status === 'prepared' ? ': its files are written for HMRC without it' : ''}.`);
        }
        const charity = await findCharity(store, claim.charity);
        refuseSharedOut(dir, opts.out); // first, as giftaid claim does
        await refuseOtherClaims(dir); // its own schedule there is refused too (writeNewFiles), as another claim's; before the folder is made
        // Recorded before the files are written, as an export is: donors' names and addresses are taken out.
        const audit = () => store.audit({ action: 'giftaid files', target: `claim ${id}`, summary: { status: claim.status, donations: claim.donation_count, ...(opts.resend && { resend: true }) } });
        const spreadsheets = await claimSpreadsheets(store, claim, charity.name, { resend: opts.resend === true });
        await makeFolder(dir, opts.out); // once the files can be made: a claim short of its rows, refused, leaves no folder (it did until 2026-11-30)
        await holdFolder(dir, opts.out); // not while a claim writes there (holdFolder)
        const files = (await writeNewFiles(dir, spreadsheets, { family: CLAIM_SCHEDULE, beforeWriting: audit })).map((name) => join(opts.out, name));
        if (opts.json) return printJson({ claim: id, files });
        print(`Claim ${id} (${claim.status}): ${files.join(', ')}`);
        if (opts.resend) print(`  ${RESENT} Delete the others.`);
        else if (NOT_FOR_HMRC[claim.status] !== undefined) print(`  ${NOT_FOR_HMRC[claim.status]} HMRC's checker refuses these files.`);
        // Each copy of a prepared claim's files is one HMRC takes: two uploaded claim the same donations twice (a Gift Aid review).
        else if (claim.status === 'prepared') {
          print(
            `  The same files giftaid claim wrote when it prepared claim ${id} (${claim.prepared_at}): upload one copy of them only. Once uploaded, ` +
              `bin/almoner giftaid mark ${id} submitted; files written after that are marked as copies HMRC's checker refuses.`,
          );
        }
      });
    });

  giftaid
    .command('schedule')
    .description(
      "preview, claiming nothing: a charity's Gift Aid donations that are in no live claim, as the schedule spreadsheets a claim " +
        'would write (preview-USERNAME-1.ods, …, marked as previews), and the donations that cannot be claimed as they stand in needs-attention-USERNAME.csv',
    )
    .requiredOption('--charity <username>', 'the charity')
    .requiredOption('--from <YYYY-MM-DD>', 'donations dated on or after this UK day', dayArgument)
    .requiredOption('--to <YYYY-MM-DD>', 'donations dated on or before this UK day', dayArgument)
    .requiredOption('--out <dir>', 'the folder to write the files to, created if missing')
    .option('--period-end <MM-DD>', "the day the charity's accounting period ends each year, as for giftaid claim", periodEndArgument)
    .option('--json', 'print {"files","needs_attention","donations","total","shortened"}')
    .action(async (opts: { charity: string; from: string; to: string; out: string; periodEnd?: string; json?: boolean }) => {
      if (opts.from > opts.to) throw new UsageError('--from must not be later than --to.');
      const dir = await outputFolder(opts.out);
      const today = ukDay(new Date()); // the claim is made in the UK
      await withStore(async (store) => {
        const charity = await findCharity(store, opts.charity);
        // Donors' names and addresses, as a claim's files, and the same needs-attention-USERNAME.csv a claim that claims
        // nothing writes: until 2026-12-01 into any folder, another user's link there followed, and no folder held (a review).
        refuseSharedOut(dir, opts.out); // before the folder is made: a refused one leaves nothing behind
        await makeFolder(dir, opts.out);
        await holdFolder(dir, opts.out); // not while another giftaid command writes there, nor another while this one does
        // With those dated after today, as a claim lists them (so the preview a failed claim names shows them too).
        const assessed = await assessUnclaimed(store, charity.id, { from: opts.from, to: opts.to }, today, opts.periodEnd, { withFuture: true });
        const audit = () =>
          store.audit({
            action: 'giftaid schedule',
            target: opts.charity,
            summary: { from: opts.from, to: opts.to, donations: assessed.rows.length, needs_attention: assessed.needsAttention.length, period_end: opts.periodEnd ?? null },
          });
        const parts = chunk(assessed.rows, MAX_ROWS_PER_SCHEDULE);
        // Each file made as it is written, as a claim's are (until 2026-12-01 all were made first).
        const preparedAt = new Date().toISOString();
        const spreadsheets: NewFiles = {
          names: parts.map((_, i) => previewFileName(opts.charity, i + 1)),
          contents: async function* () {
            for (const [i, rows] of parts.entries()) {
              yield scheduleSpreadsheet({
                rows,
                preparedAt,
                use: 'preview',
                title: `Gift Aid schedule PREVIEW for ${charity.name}, ${i + 1} of ${parts.length}`,
                about: [
                  'PREVIEW, NOT A CLAIM: do not send this file to HMRC. Its donations are not recorded as claimed.',
                  `${charity.name} (${opts.charity}): file ${i + 1} of ${parts.length}, ${count(rows.length, 'donation')}. Prepare the claim with: bin/almoner giftaid claim --charity ${opts.charity} --out DIR`,
                ],
              });
            }
          },
        };
        const files = (await writeNewFiles(dir, spreadsheets, { family: previewFamily(opts.charity), beforeWriting: audit })).map((name) => join(opts.out, name));
        const attentionName = attentionFileName(opts.charity);
        await writeAttention(dir, attentionName, assessed.needsAttention);
        const needsAttention = assessed.needsAttention.length > 0 ? join(opts.out, attentionName) : null;
        if (opts.json) return printJson({ files, needs_attention: needsAttention, donations: assessed.rows.length, total: formatPounds(assessed.claimableMinor), shortened: assessed.shortened });

        print(`Gift Aid preview for ${opts.charity}, donations dated ${opts.from} to ${opts.to} (claim date ${today}); nothing was claimed:`);
        if (files.length === 0) print('  No donations can be claimed: no schedule file was written.');
        else print(`  ${count(assessed.rows.length, 'donation')} to claim, ${pounds(assessed.claimableMinor)} in all: ${files.join(', ')}`);
        printShortened(assessed);
        printLeftOut(assessed, needsAttention, today, opts.periodEnd);
      });
    });

  return giftaid;
}

interface Assessed extends Schedule {
  /** Gift Aid donations in the range that are in a live claim already. */
  claimedBefore: number;
}

/**
 * The charity's Gift Aid donations in no live claim whose UK day (the day the schedule shows) is in
 * the range of days (YYYY-MM-DD, both inclusive), decided by the rules.
 */
async function assessUnclaimed(
  store: Store,
  charityId: number,
  days: { from?: string; to: string },
  today: string,
  periodEnd?: string,
  { withFuture = false }: { withFuture?: boolean } = {},
): Promise<Assessed> {
  const range = { from: days.from === undefined ? undefined : ukStartOfDayIso(days.from), to: ukEndOfDayIso(days.to) };
  // A donation sent again after a restore lost it may be one a kept claim sent to HMRC already (ClaimLedger.keepFrom).
  const sent = new Map((await store.claims.rowsWithoutDonation(charityId)).map((r) => [sameGiftKey(r), r.claimId]));
  const claimedIn = (row: ScheduleRow) => sent.get(sameGiftKey(row));
  // Assessed a batch at a time, and none kept whole: of each claimable one, its row, and what tells a gift recorded twice
  // (TwinFinder). Until a scale review (2026-11-30) every donation was kept, whole, until the end: a claim of 630,000
  // peaked at 1.7 GB, and ran out of memory on a machine of 2 GB.
  const twins = new TwinFinder();
  const parts: Schedule[] = [];
  let batch: GiftFacts[] = [];
  const assess = () => {
    const part = buildSchedule(batch, today, { claimedIn, periodEnd });
    const byId = new Map(batch.map((d) => [d.id, d]));
    for (const r of part.rows) twins.add(byId.get(r.donationId)!);
    parts.push(part);
    batch = [];
  };
  const inRange = withFuture ? new Set<number>() : undefined;
  for await (const d of store.claims.unclaimed(charityId, range)) {
    inRange?.add(d.id);
    if (batch.push(d) === ASSESSED_A_BATCH) assess();
  }
  if (inRange) {
    // Dated after today (a year mistyped, 2062 for 2026): in no claim's range until that day, so never
    // listed anywhere, and never claimed (a review, 2026-11-29). Listed as needing attention instead.
    for await (const d of store.claims.unclaimed(charityId, { from: ukEndOfDayIso(today), to: ukEndOfDayIso('9999-12-31') })) {
      if (!inRange.has(d.id) && donationDay(d.donation_date) > today && batch.push(d) === ASSESSED_A_BATCH) assess();
    }
    inRange.clear();
  }
  assess();
  const schedule = mergeSchedules(parts);
  parts.length = 0;
  // One gift recorded twice (sent again under another Idempotency-Key): each claimable one looked for among every donation of their days.
  const [first, last] = [schedule.rows[0], schedule.rows.at(-1)]; // earliest first
  const found = new Map<number, Twin>();
  if (first !== undefined && last !== undefined) {
    await twins.read(
      // Widened by the time a gift sent again without a date may take to cross a UK midnight.
      store.claims.dated(charityId, {
        from: formatMicros((Date.parse(ukStartOfDayIso(first.donationDay)) - RETRY_ACROSS_MIDNIGHT_MS) * 1000),
        to: formatMicros((Date.parse(ukEndOfDayIso(last.donationDay)) + RETRY_ACROSS_MIDNIGHT_MS) * 1000),
      }),
    );
    for (const r of schedule.rows) {
      const twin = twins.twinOfCandidate(r.donationId);
      if (twin !== undefined) found.set(r.donationId, twin);
    }
  }
  // The few set aside read again, to be listed: none was kept.
  const donations = await store.claims.facts([...found.keys()]);
  const setAside = new Map(
    [...found].map(([id, twin]) => {
      const donation = donations.get(id);
      if (donation === undefined) throw new Error(`donation ${id}, one gift recorded again, is no longer in the database: run the claim again`);
      return [id, { donation, twin }];
    }),
  );
  return { ...setAsideTwins(schedule, setAside), claimedBefore: await store.claims.countClaimed(charityId, range) };
}

/** How many donations a claim assesses at once (assessUnclaimed). */
const ASSESSED_A_BATCH = 5_000;

/**
 * Records a claim of every claimable donation up to the UK day `upTo` that is in no live claim, if there is
 * one. When another claim takes some of them at the same moment, the database refuses this one and
 * it looks again at what is left; each refusal means another claim was recorded, so this ends.
 */
async function prepareClaim(store: Store, charityId: number, upTo: string, today: string, periodEnd?: string, checkedSinceBackup?: boolean): Promise<{ claim?: Claim; assessed: Assessed }> {
  for (let attempt = 1; ; attempt++) {
    const assessed = await assessUnclaimed(store, charityId, { to: upTo }, today, periodEnd, { withFuture: true });
    if (assessed.rows.length === 0) return { assessed };
    try {
      const claim = await store.claims.prepare({ charityId, upTo, claimDate: today, rows: assessed.rows, needsAttention: assessed.needsAttention.length, periodEnd, checkedSinceBackup });
      // Its rows let go once recorded: its files are written from the ledger's (claimSpreadsheets), and nothing after reads them.
      return { claim, assessed: { ...assessed, rows: [] } };
    } catch (err) {
      if (!(err instanceof ClaimConflictError) || attempt === 10) throw err;
    }
  }
}

/** What a claim's files are for, by its status: only a claim not yet sent to HMRC is for HMRC (ods.ts's SHEET_NAMES). */
const FILE_USE = { prepared: 'claim', submitted: 'sent', paid: 'sent', rejected: 'rejected' } as const satisfies Record<ClaimStatus, keyof typeof SHEET_NAMES>;

/** What a claim's files say first, and `giftaid files` after them, when they are not for HMRC. */
const NOT_FOR_HMRC: Partial<Record<ClaimStatus, string>> = {
  submitted: 'COPY OF A CLAIM SENT TO HMRC: do not send this file again, or its donations are claimed twice. It is for your records.',
  paid: 'COPY OF A CLAIM HMRC HAS PAID: do not send this file again, or its donations are claimed twice. It is for your records.',
  rejected: 'REJECTED CLAIM: do not send this file to HMRC. Its donations may be in a newer claim.',
};

/** What files written with --resend say first: for the one file HMRC refused. */
const RESENT = 'WRITTEN AGAIN TO RESEND: upload only the file HMRC refused; the others are claimed already, and sent again would claim their donations twice.';

/**
 * Files for writeNewFiles to write, one at a time: their names, known before any is written (a name
 * taken refuses them all), and their bytes, made in the same order as each is written, so that no
 * more than one is held. Until 2026-12-01 a claim's were all made before the first was written (a
 * scale review: 450 MB for a claim of 630 files).
 */
interface NewFiles {
  names: readonly string[];
  contents: () => AsyncIterable<Uint8Array>;
}

/** A claim's spreadsheets, from its rows as recorded: the same bytes every time (but for what the status, or --resend, says they are for). */
async function claimSpreadsheets(store: Store, claim: Claim, charityName: string, { resend = false } = {}): Promise<NewFiles> {
  const held = await store.claims.rowCount(claim.id);
  // Never a schedule short of what HMRC has (a ledger from before 0014 kept no rows without their donation).
  if (held !== claim.donation_count) {
    throw new UsageError(`claim ${claim.id} holds ${claim.donation_count} donations, of which this database has the rows of ${held}: its files cannot be written again from here.`);
  }
  const parts = Math.ceil(held / MAX_ROWS_PER_SCHEDULE);
  const names = Array.from({ length: parts }, (_, i) => claimFileName(claim.id, i + 1));
  async function* contents(): AsyncIterable<Uint8Array> {
    let i = 0;
    // Each file's rows read as it is made: the pages are the files' rows (chunk of the rows in order, as before).
    for await (const rows of store.claims.rowPages(claim.id, MAX_ROWS_PER_SCHEDULE)) {
      yield scheduleSpreadsheet({
        rows,
        preparedAt: claim.prepared_at,
        use: resend ? 'claim' : FILE_USE[claim.status],
        title: `Gift Aid claim ${claim.id} for ${charityName}, ${i + 1} of ${parts}`,
        about: [
          ...(resend ? [RESENT] : NOT_FOR_HMRC[claim.status] === undefined ? [] : [NOT_FOR_HMRC[claim.status]!]),
          `Gift Aid claim ${claim.id} for ${charityName} (${claim.charity}): file ${i + 1} of ${parts}, ${count(rows.length, 'donation')}, ${pounds(rows.reduce((s, r) => s + r.amountMinor, 0))}.`,
          `Prepared by Almoner on ${dayMonthYear(preparedDay(claim))} from donations dated up to ${dayMonthYear(claim.up_to)}. ` +
            "Check it, then attach it to a claim in HMRC Charities Online. Don't change the layout of the schedule or the name of the worksheet.",
        ],
      });
      i += 1;
    }
  }
  return { names, contents };
}

/** The UK day a claim was prepared on, as every other day of a claim is (its UTC day, until 2026-11-29: 30 June for one prepared at 00:35 on 1 July, in summer time). */
const preparedDay = (claim: { prepared_at: string }): string => ukDay(new Date(claim.prepared_at));

async function findCharity(store: Store, username: string): Promise<{ id: number; name: string }> {
  const charity = await store.findCredential(username);
  if (!charity) throw unknownCharity(username);
  return charity;
}

/** The --out folder: a usage error if it, or a folder above it, is something else than a folder. Nothing is created yet. */
async function outputFolder(out: string): Promise<string> {
  // resolve('') is the current folder: donors' names and addresses were written wherever the command ran (an operator's review).
  if (out.trim() === '') throw new UsageError('--out is empty: give the folder to write the files to');
  const dir = resolve(out);
  const info = await stat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    if (err.code === 'ENOTDIR') throw new UsageError(`--out ${out} is not a folder: something above it is a file.`);
    throw err;
  });
  if (info && !info.isDirectory()) throw new UsageError(`--out ${out} is not a folder.`);
  return dir;
}

/**
 * Creates the folder if missing, once the arguments have been checked, one level at a time (Node's
 * recursive mkdir never returns for a path under /proc); a usage error if it cannot be created or
 * written to.
 */
async function makeFolder(dir: string, out: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; !(await exists(d)); d = dirname(d)) missing.unshift(d);
  try {
    for (const d of missing) {
      // its files' names say whose claims are in it: the owner's alone, whatever the umask
      await mkdir(d, { mode: 0o700 }).catch(async (err: NodeJS.ErrnoException) => {
        // Made meanwhile by another command given the same folder: there it is (until 2026-11-30 this said it could not be created).
        if (err.code !== 'EEXIST' || !(await stat(d).then((s) => s.isDirectory(), () => false))) throw err;
      });
    }
    await access(dir, constants.W_OK);
  } catch (err) {
    throw new UsageError(`--out ${out} cannot be created or written to (${(err as NodeJS.ErrnoException).code ?? String(err)}).`);
  }
}

/** The file in a claim's folder whose lock holdFolder takes (hidden, no schedule's name; removed, with SQLite's -journal beside it, when the command ends). */
const FOLDER_HOLD = '.almoner-giftaid.lock';

/**
 * Holds the --out folder for this command until it ends: lockFile (restoring.ts) on a file in it,
 * which goes with the process, killed or not. Refused (exit
 * 2, nothing recorded) while another `giftaid claim`, `giftaid files` or (since 2026-12-01) `giftaid schedule` holds it: two claims into one
 * folder at once each found it empty, both were recorded, and the second was refused its files
 * (exit 1), its donations held by a claim whose files it had not written (a review, 2026-11-30: in
 * 19 rounds of 20, on SQLite and on PostgreSQL). The file is removed as the process exits, still
 * held; one that waited for it and then found it gone (or another in its place) looks again.
 */
async function holdFolder(dir: string, out: string): Promise<void> {
  refuseSharedOut(dir, out); // again, now that it is there
  const file = join(dir, FOLDER_HOLD);
  const inode = () => stat(file).then((s) => s.ino, () => undefined); // which file is at that name now, if any
  for (let attempt = 1; ; attempt++) {
    refuseNotOwn(dir, out);
    const before = await inode();
    let release: (() => void) | undefined;
    try {
      release = await lockFile(file);
    } catch (err) {
      // The one it waited for ended and removed the file this had opened: SQLite answers a lock on a removed file
      // SQLITE_IOERR_FSTAT. Looked at again, as below; until 2026-11-30 said as "disk I/O error" (a README review).
      const removed = (err as { code?: string }).code?.startsWith('SQLITE_IOERR') && (await inode()) !== before;
      if (removed && attempt < 5) continue;
      throw new UsageError(`--out ${out} cannot be held for this command's files (${FOLDER_HOLD} in it: ${(err as Error).message}).`);
    }
    if (!release) {
      throw new UsageError(
        `another giftaid claim, files or schedule is writing to --out ${out} now: wait for it to end (the folder then holds its files), or give this command a folder of its own.`,
      );
    }
    const after = await inode();
    if (after !== undefined && (before === undefined || after === before)) {
      process.once('exit', () => {
        // Never a throw here: one in an 'exit' listener turned a claim made and written into exit 1.
        for (const made of [file, `${file}-journal`]) {
          try {
            rmSync(made, { force: true }); // the lock's while still held, so that no other takes it and then loses it; SQLite's -journal, made as the lock was taken
          } catch {
            // left behind: the next command's refuseNotOwn says what it is
          }
        }
        release();
      });
      return;
    }
    release(); // the one it waited for was removed by its holder as it ended
    if (attempt === 5) throw new UsageError(`--out ${out} cannot be held for this command's files: ${FOLDER_HOLD} in it keeps being replaced.`);
  }
}

/**
 * Refuses an --out folder another user can put a file or a link in (exit 2): SQLite opens the hold's
 * file (and its -journal) by name, following a link and creating what it names. Until a security
 * review (2026-11-30), in a folder of mode 777 or 770 (a team's share) or a sticky one (/tmp), another
 * user's link there under that name had the operator's command (root's, say) create an empty file
 * wherever it pointed (an /etc/nologin), or hold a lock on a database it named; and SQLite takes a
 * -journal of theirs beside it for a hot journal to play back (not tried in the review).
 * So the folder, and those above it, as backup's (refuseSharedFolder); and the folder itself not
 * writable by others even with the sticky bit, which keeps them from replacing this command's
 * files, not from putting theirs there first. For a folder not made yet, the one it will be made in.
 */
function refuseSharedOut(dir: string, out: string): void {
  let there = dir;
  while (!existsSync(there) && dirname(there) !== there) there = dirname(there);
  try {
    const { mode } = statSync(there);
    // First: refuseSharedFolder's advice (a sticky folder will do) is for the folders above it.
    if (there === dir && (mode & 0o022) !== 0) {
      throw new Error(
        `the folder ${dir} can be written by other users (mode ${(mode & 0o7777).toString(8).padStart(4, '0')}), so one of them could put a file or a link of theirs where this command holds the folder (${FOLDER_HOLD}) before it does, sticky bit or not: give the claim a folder only this user can write to (chmod go-w ${dir}, or a new folder, which this command makes so)`,
      );
    }
    refuseSharedFolder(there, `where this command writes its files and holds the folder (${FOLDER_HOLD})`);
  } catch (err) {
    throw new UsageError(`--out ${out} cannot be used: ${(err as Error).message}.`);
  }
}

/** Refuses (exit 2) the hold's file, or its -journal, if it is a link or not a regular file of this user's: SQLite would follow it, or open it read-only and lock nothing. */
function refuseNotOwn(dir: string, out: string): void {
  for (const name of [FOLDER_HOLD, `${FOLDER_HOLD}-journal`]) {
    let there;
    try {
      there = lstatSync(join(dir, name));
    } catch {
      continue; // not there (SQLite makes it)
    }
    if (there.isSymbolicLink() || !there.isFile() || there.uid !== process.getuid?.()) {
      throw new UsageError(
        `--out ${out} holds ${name}, which is ${there.isSymbolicLink() ? 'a link' : "not a file of this user's"}: this command does not open it. Once no giftaid claim, files or schedule is running, remove it.`,
      );
    }
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Refuses a folder that holds a claim's schedule already: the next claim's files beside it are
 * uploaded with it, and after `giftaid mark N rejected` the next claim takes the rejected one's
 * donations again, so the two together claim them twice (a review: 44 donations). Until 2026-11-29
 * only a file of the very same name was refused, and only one at the folder's top level (reviews:
 * old/claim-1-1.ods, a linked folder, claims/c1/claim-1-1.ods for --out claims/c1/resubmit were not
 * seen). The folders within it are looked in, OTHER_CLAIMS_DEPTH deep, linked ones too, and the
 * one above it at its top level; one that cannot be read is passed over.
 */
async function refuseOtherClaims(dir: string): Promise<void> {
  const within = await schedulesWithin(dir, OTHER_CLAIMS_DEPTH).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return []; // a folder not made yet holds nothing; the one above it is looked in all the same
    throw new UsageError(`cannot read the --out folder ${dir} (${err.code ?? err.message}): it must be one this user can read and write.`);
  });
  const parent = dirname(dir);
  const above = parent === dir ? [] : (await schedulesWithin(parent, 0).catch(() => [])).map((name) => join('..', name));
  const taken = [...within.sort(), ...above.sort()];
  if (taken.length === 0) return;
  throw new UsageError(
    `${dir} already holds ${taken.join(', ')}, a claim's schedule: give each claim's files a folder of their own, so that no other schedule ` +
      `(a rejected claim's above all, whose donations a later claim takes again) is uploaded with them. Move ${taken.length === 1 ? 'it' : 'them'}, or choose another --out folder.`,
  );
}

/** How many folders down refuseOtherClaims looks: --out is a claim's own folder, not a whole disk. */
const OTHER_CLAIMS_DEPTH = 3;

/** The claim schedules (CLAIM_SCHEDULE) in `dir` and its folders `depth` deep, as paths relative to it. */
async function schedulesWithin(dir: string, depth: number, under = ''): Promise<string[]> {
  const entries = await readdir(join(dir, under), { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (under === '') throw err; // the folder itself: the claim's files go there
    return [];
  });
  const found: string[] = [];
  for (const e of entries) {
    const path = join(under, e.name);
    // A link is followed to what it names (a loop ends at the depth).
    const folder = e.isDirectory() || (e.isSymbolicLink() && (await stat(join(dir, path)).then((s) => s.isDirectory(), () => false)));
    if (!folder && CLAIM_SCHEDULE.test(e.name)) found.push(path);
    else if (folder && depth > 0) found.push(...(await schedulesWithin(dir, depth - 1, path)));
  }
  return found;
}

/**
 * Writes the files, all or none: each under a hidden temporary name, renamed into place once all
 * are written (and those renamed taken away again if a later one fails, or cannot be made: half a
 * claim's schedules uploaded would leave the rest held by the claim, never sent). A schedule file is never overwritten (an old one could be claimed with the new):
 * if any of these names, or any name `family` matches, is taken already, nothing is written.
 * The files are made one at a time, each written before the next is made.
 * Returns the names written.
 */
async function writeNewFiles(dir: string, files: NewFiles, { family, beforeWriting }: { family?: RegExp; beforeWriting?: () => Promise<void> } = {}): Promise<string[]> {
  const names = new Set(files.names);
  const taken = (await readdir(dir)).filter((name) => names.has(name) || family?.test(name)).sort();
  if (taken.length > 0) {
    throw new UsageError(
      `${dir} already holds ${taken.join(', ')}: move or delete ${taken.length === 1 ? 'it' : 'them'} first, or choose another --out folder, so that no old schedule is sent with the new.`,
    );
  }
  await beforeWriting?.(); // the audit entry: after the refusal above, which takes nothing out, and before any file
  // Named for this run: a file left by one killed mid-write is not in the way (it was: EEXIST), nor is another run's.
  const run = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const partial = (name: string) => join(dir, `.${name}.${run}.partial`);
  const placed: string[] = [];
  try {
    // Readable by their owner only, whatever the umask: they hold donors' names and addresses.
    let written = 0;
    for await (const bytes of files.contents()) {
      const name = files.names[written];
      if (name === undefined) throw new Error(`more files were made than the ${files.names.length} named`);
      await writeFile(partial(name), bytes, { flag: 'wx', mode: PRIVATE_FILE });
      written += 1;
    }
    // Rows read a page at a time (claimSpreadsheets) that fell short of those counted: never a claim's files short of one.
    if (written !== files.names.length) throw new Error(`${written} of the ${files.names.length} files were made`);
    for (const name of files.names) {
      await rename(partial(name), join(dir, name));
      placed.push(name);
    }
  } catch (err) {
    await Promise.all([...files.names.map((name) => partial(name)), ...placed.map((name) => join(dir, name))].map((path) => rm(path, { force: true })));
    throw err;
  }
  return [...files.names];
}

/** needs-attention's columns that hold a value, for a spreadsheet to read as one (a number, a date); the others are text (spreadsheetCell). */
const ATTENTION_VALUES = new Set<string>(['id', 'donation_date', 'amount']);

/**
 * The donations left out, as CSV that spreadsheets open cleanly: UTF-8 with a byte order mark
 * (without one, Excel reads UTF-8 as Windows-1252), a header row, RFC 4180 quoting, CRLF line
 * ends. It is a to-do list made afresh from the data, so it replaces one of the same name.
 */
async function writeAttention(dir: string, name: string, rows: readonly AttentionRow[]): Promise<void> {
  const path = join(dir, name);
  if (rows.length === 0) return void (await rm(path, { force: true })); // no stale to-do list left behind
  const cells = rows.map((r) => attentionCells(r).map((cell, i) => spreadsheetCell(cell, ATTENTION_VALUES.has(ATTENTION_COLUMNS[i]!))));
  const csv = stringify([[...ATTENTION_COLUMNS], ...cells], { bom: true, ...RFC_4180 });
  const partial = join(dir, `.${name}.${process.pid}-${randomBytes(4).toString('hex')}.partial`); // another run's is not this one's
  try {
    await writeFile(partial, csv, { flag: 'wx', mode: PRIVATE_FILE });
    await rename(partial, path);
  } finally {
    await rm(partial, { force: true });
  }
}

/** The donations in the schedule with a name or house cut to fit it (Shortened): HMRC gets them as cut. */
function printShortened({ shortened }: Assessed): void {
  if (shortened.length === 0) return;
  const shown = shortened.slice(0, 10).map((s) => `${s.id} (${s.columns.join(', ')})`);
  if (shortened.length > shown.length) shown.push(`${shortened.length - shown.length} more (--json lists them all)`);
  print(
    `  ${count(shortened.length, 'donation')} ${shortened.length === 1 ? 'has' : 'have'} a name or house longer than HMRC's schedule takes, cut to fit ` +
      `(names to ${NAME_MAX_LENGTH} characters, the house to ${HOUSE_MAX_LENGTH}): donation${shortened.length === 1 ? '' : 's'} ${shown.join(', ')}. Check HMRC can still tell ${shortened.length === 1 ? 'that donor' : 'those donors'}.`,
  );
}

/** What a claim or a preview left out: the donations that need attention, and those already claimed. */
function printLeftOut(assessed: Assessed, attentionPath: string | null, today: string, periodEnd?: string): void {
  const n = assessed.needsAttention.length;
  print(
    n === 0
      ? '  No Gift Aid donation needs attention.'
      : `  ${count(n, 'donation')} left out: ${n === 1 ? 'it needs' : 'they need'} attention before ${n === 1 ? 'it' : 'they'} can be claimed: ${attentionPath}`,
  );
  // Said of donations left out for their age alone: a line saying so of none read as if some had been (an operator's review).
  // Among those just counted, and said so: read alone, "1 donation left out" and "1 donation … left out" were two (an operator's review).
  const lateFor = (reason: string) => assessed.needsAttention.filter((r) => r.reasons.includes(reason)).length;
  const mayBeInTime = lateFor(REASONS.outOfTime(claimCutoff(today, periodEnd), periodEnd));
  // Too old for any accounting period (without --period-end): not sent to --period-end for them (a README walkthrough).
  const past = periodEnd === undefined ? lateFor(REASONS.pastEveryPeriod(pastEveryPeriodCutoff(today))) : 0;
  const tooOld = mayBeInTime + past;
  if (tooOld > 0) {
    const among = tooOld === n ? (n === 1 ? 'It is dated' : `All ${n} are dated`) : `Of those, ${count(tooOld, 'donation')} ${tooOld === 1 ? 'is' : 'are'} dated`;
    const pastSaid = `before ${dayMonthYear(pastEveryPeriodCutoff(today))}, more than five years ago: too late to claim, whatever your accounting period.`;
    if (periodEnd !== undefined) {
      print(`  ${among} before ${dayMonthYear(claimCutoff(today, periodEnd))}, in ${tooOld === 1 ? 'an accounting period' : 'accounting periods'} that ended more than four years ago: too late to claim.`);
    } else if (mayBeInTime === 0) {
      print(`  ${among} ${pastSaid}`);
    } else {
      print(
        `  ${among} before ${dayMonthYear(claimCutoff(today))}, more than four years ago. HMRC takes a claim up to four years ` +
          "after the end of the accounting period a donation fell in: give your period's end (--period-end MM-DD) to claim those still in time.",
      );
      if (past > 0) print(`  ${past === 1 ? '1 of them is' : `${past} of them are`} dated ${pastSaid}`);
    }
  }
  const claimed = assessed.claimedBefore;
  if (claimed > 0) print(`  ${count(claimed, 'donation')} already in a live claim ${claimed === 1 ? 'was' : 'were'} left out.`);
}

function claimJson(c: Claim) {
  return {
    id: c.id,
    charity: c.charity,
    status: c.status,
    donations: c.donation_count,
    total: formatPounds(c.total_minor),
    up_to: c.up_to,
    claim_date: c.claim_date,
    prepared_at: c.prepared_at,
    submitted_at: c.submitted_at,
    paid_at: c.paid_at,
    rejected_at: c.rejected_at,
  };
}

function claimIdArgument(value: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError('It must be a claim id (a whole number from 1).');
  return Number(value);
}


/** Refuses a claim (exit 2) while a restore left the claims made since its backup unsettled (audit.ts's claimsUnsettledBy). */
async function refuseAfterBlindRestore(store: Store): Promise<void> {
  const restore = claimsUnsettledBy(await store.auditTrail());
  if (!restore) return;
  throw new UsageError(
    `this database was restored at ${restore.at} from ${String(restore.summary.from)} without the database it came from, so the Gift Aid claims prepared or marked since that backup are not in it, ` +
      'and a claim now could take their donations again, under their numbers. If that database is at hand, keep its claims with bin/almoner keep-replaced --not-running THAT-DATABASE; ' +
      'else compare bin/almoner giftaid claims with what was sent to HMRC since the backup, mark or leave out what differs, and claim with --checked-since-backup',
  );
}
