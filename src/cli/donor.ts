// bin/almoner donor ...: a donor's requests under UK GDPR. `export` answers a subject access
// request: every donation recorded with the donor's e-mail address, as JSON.
import { Command } from 'commander';
import { donorReference } from '../store/audit.js';
import { nowIso } from '../time.js';
import { exportRow } from './donations.js';
import { print, withStore } from './io.js';
import { emailArgument, unknownCharity } from './usage.js';

export function donorCommand(): Command {
  const donor = new Command('donor').description("answer a donor's requests about their data (UK GDPR)");

  donor
    .command('export')
    .description("print every donation recorded with this e-mail address (in any case), as JSON: a subject access request's answer")
    .requiredOption('--email <email>', "the donor's e-mail address", emailArgument)
    .option('--charity <username>', "only this charity's donations")
    .action(async (opts: { email: string; charity?: string }) => {
      const document = await withStore(async (store) => {
        if (opts.charity !== undefined && !(await store.findCredential(opts.charity))) throw unknownCharity(opts.charity);
        const donations = [];
        for await (const d of store.exportDonations({ charity: opts.charity, donorEmail: opts.email })) donations.push(exportRow(d));
        // The trail names the donor by a reference, never by the address.
        await store.audit({ action: 'donor export', target: donorReference(opts.email), summary: { charity: opts.charity ?? null, donations: donations.length } });
        return { donor_email: opts.email, charity: opts.charity ?? null, exported_at: nowIso(), donations };
      });
      print(JSON.stringify(document, null, 2));
    });

  return donor;
}
