// bin/almoner donor ...: a donor's requests under UK GDPR. `export` answers a subject access
// request: every donation recorded with the donor's e-mail address, and what Gift Aid claims sent
// to HMRC about them, as JSON.
import { Command, InvalidArgumentError } from 'commander';
import { ERASED_EMAIL } from '../donations/erasure.js';
import { foldEmail } from '../donations/donation.js';
import { donorReference, donorReferences } from '../store/donation-query.js';
import { DONATION_FIELDS } from '../donations/fields.js';
import type { ClaimRowErasure, DonationErasure, TracesLeft } from '../store/donors.js';
import type { DonorClaimRow } from '../store/claims.js';
import { formatPounds } from '../giftaid/schedule.js';
import { nowIso, ukDay } from '../time.js';
import { exportRow } from './donations.js';
import { checkCharity, print, withStore } from './io.js';
import { emailArgument } from './usage.js';

/**
 * A donor's own address. The placeholder erased donations carry is nobody's: asked for, it gave
 * every erased donor's kept details as one donor's (until 2026-11-28).
 */
function donorEmail(value: string): string {
  const email = emailArgument(value);
  if (foldEmail(email) === ERASED_EMAIL) {
    throw new InvalidArgumentError(`It is what Almoner puts in place of an erased address, not a donor's: give the donor's own address (their erased donations still kept for Gift Aid are found by it).`);
  }
  return email;
}

export function donorCommand(): Command {
  const donor = new Command('donor').description("answer a donor's requests about their data (UK GDPR)");

  donor
    .command('export')
    .description("print every donation recorded with this e-mail address (in any case), and the Gift Aid claim rows sent to HMRC about its donor, as JSON: a subject access request's answer")
    .requiredOption('--email <email>', "the donor's e-mail address", donorEmail)
    .option('--charity <username>', "only this charity's donations")
    .action(async (opts: { email: string; charity?: string }) => {
      const document = await withStore(async (store) => {
        await checkCharity(store, opts.charity);
        const donations = [];
        for await (const d of store.exportDonations({ charity: opts.charity, donorEmail: opts.email })) donations.push(exportRow(d));
        const reference = donorReference(opts.email);
        const sent = await store.claims.ofDonor({ donationIds: donations.map((d) => d.id), references: donorReferences(opts.email), charity: opts.charity });
        const claimRows = sent.map(claimRowExport);
        // The trail names the donor by a reference, never by the address.
        await store.audit({
          action: 'donor export',
          target: reference,
          summary: { charity: opts.charity ?? null, donations: donations.length, ...(claimRows.length > 0 && { gift_aid_claim_rows: claimRows.length }) },
        });
        return { donor_email: opts.email, charity: opts.charity ?? null, exported_at: nowIso(), donations, gift_aid_claim_rows: claimRows };
      });
      print(JSON.stringify(document, null, 2));
    });

  donor
    .command('erase')
    .description("erase the donor's personal data (UK GDPR Article 17), keeping what Gift Aid requires until its retention period ends")
    .requiredOption('--email <email>', "the donor's e-mail address", donorEmail)
    .option('--charity <username>', "only this charity's donations")
    .option('--dry-run', 'say what would be erased and kept, and change nothing')
    .action(async (opts: { email: string; charity?: string; dryRun?: boolean }) => {
      const dryRun = opts.dryRun === true;
      const found = await withStore(async (store) => {
        await checkCharity(store, opts.charity);
        return store.donors.erase({ email: opts.email, charity: opts.charity, today: ukDay(new Date()), dryRun });
      });
      for (const line of describeErasures(found.donations, dryRun)) print(line);
      for (const line of describeClaimRows(found.claimRows, dryRun)) print(line);
      sayTracesLeft(found.tracesLeft);
    });

  return donor;
}

/**
 * What an erasure could not clear from the SQLite file, said after what it erased (printed first:
 * an operator answering the donor needs those lines, which a failure before them left unsaid until
 * 2026-11-30): exit 1 when this run erased something, a warning alone when only an earlier run's
 * traces may be left (a reader unrelated to it failed the daily retention timer).
 */
export function sayTracesLeft(left: TracesLeft | undefined): void {
  if (left === undefined) return;
  if (left.erasedNow) throw new Error(left.message);
  process.stderr.write(`almoner: warning: ${left.message}\n`);
}

/**
 * A row of a Gift Aid claim as a donor's export shows it: what was sent (or is to be sent) to HMRC
 * about them, in which claim, and whether its donation is still here (a restore may keep a claim's
 * row whose donation went with the database it replaced).
 */
function claimRowExport(r: DonorClaimRow) {
  return {
    claim: r.claimId,
    claim_status: r.status,
    charity: r.charity,
    position: r.position,
    donation_id: r.donationHere ? r.donationId : null,
    first_name: r.firstName,
    last_name: r.lastName,
    house_name_or_number: r.houseNameOrNumber,
    postcode: r.postcode,
    donation_day: r.donationDay,
    amount: formatPounds(r.amountMinor),
  };
}

/** What a donor's erasure did (or would do) to the claim rows a restore kept without their donation. */
function describeClaimRows(rows: ClaimRowErasure[], dryRun: boolean): string[] {
  return rows.map(({ claimId, position, charity, day, keptUntil }) =>
    `claim ${claimId}, row ${position} (${charity}, ${day}; its donation was recorded after the backup a restore brought back, and is not in this database): ` +
      (keptUntil === null
        ? `${dryRun ? 'would erase' : 'erased'} first name, last name, house name or number, postcode: its Gift Aid retention has ended`
        : `kept as sent to HMRC (first name, last name, house name or number, postcode) until ${keptUntil}, as its donation's would be`),
  );
}

/** What an erasure did (or would do) to each donation, and why it kept what it kept. */
export function describeErasures(found: DonationErasure[], dryRun: boolean): string[] {
  return [...erasureLines(found, dryRun), erasureSummary(found.length, dryRun)];
}

/** A line for each donation: what was erased (or would be), and what is kept until when. */
export function erasureLines(found: DonationErasure[], dryRun: boolean): string[] {
  const label = (name: string) => DONATION_FIELDS.find((f) => f.name === name)!.label;
  return found.map(({ id, charity, day, giftAid, erasure }) => {
    // In the table's order; an address cut to its house said too (until 2026-12-02 its street and the rest went unsaid: a README walkthrough).
    const erased: readonly string[] = erasure.erased;
    const cut: readonly string[] = erasure.cut;
    const gone = DONATION_FIELDS.flatMap((f) => (erased.includes(f.name) ? [f.label] : cut.includes(f.name) ? [`${f.label} but its house name or number`] : []));
    const said = gone.length ? `${dryRun ? 'would erase' : 'erased'} ${gone.join(', ')}` : 'nothing left to erase';
    const kept = erasure.keptUntil
      ? `; kept ${erasure.kept.map((n) => (n === 'donor_address' ? 'house name or number' : label(n))).join(', ')} until ${erasure.keptUntil}: HMRC requires Gift Aid records for six years after the end of the accounting period or tax year of the donation`
      : '';
    return `donation ${id} (${charity}, ${day}, ${giftAid ? 'Gift Aid' : 'no Gift Aid'}): ${said}${kept}`;
  });
}

/** The line after them: how many, and what is kept. */
export function erasureSummary(n: number, dryRun: boolean): string {
  return (
    `${n} donation${n === 1 ? '' : 's'}${dryRun ? ' (a dry run: nothing was changed)' : ''}. ` +
    'Amounts, dates, Gift Aid and zakat flags, payment methods and confirmation numbers are kept, so totals and claims still add up.'
  );
}
