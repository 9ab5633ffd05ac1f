// bin/almoner giftaid schedule: donations recorded through the real HTTP app (and, for volume,
// straight through the store) on a fresh database of each backend; the real executable writes the
// schedule files, which are parsed back as strict RFC 4180 CSV.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { DonationInput } from '../../src/client/index.js';
import { validateDonation } from '../../src/donations/validate.js';
import { exampleDonation, startTestApp, tempDir, type TestCharity, type TestContext } from '../support/app.js';
import { parseCsv as parseStrictCsv } from '../support/csv.js';
import { BACKENDS } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, type Run } from '../support/cli.js';

const SCHEDULE_HEADER = [
  'Title',
  'First name',
  'Last name',
  'House name or number',
  'Postcode',
  'Aggregated donations',
  'Sponsored event',
  'Donation date (DD/MM/YY)',
  'Amount',
];
const ATTENTION_HEADER = ['id', 'donor_first_name', 'donor_last_name', 'donor_email', 'donor_address', 'donor_city', 'donor_postcode', 'donation_date', 'amount', 'reason'];

/** Claimable donations recorded straight through the store: more than one schedule holds. */
const BULK = 1003;

/** Strict RFC 4180 after a UTF-8 byte order mark. */
function parseCsv(text: string): string[][] {
  assert.ok(text.startsWith('\uFEFF'), 'the file starts with a UTF-8 byte order mark');
  return parseStrictCsv(text.slice(1));
}

function readCsv(path: string, header: string[]): string[][] {
  const [head, ...rows] = parseCsv(readFileSync(path, 'utf8'));
  assert.deepEqual(head, header, `the header row of ${path}`);
  for (const row of rows) assert.equal(row.length, header.length, `every row of ${path} has ${header.length} cells`);
  return rows;
}

/** Today where the claim is made, as the command reckons it. */
function todayInUk(): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
}

/** A day `days` after `day` (YYYY-MM-DD), `years` added first. */
function shift(day: string, { years = 0, days = 0 }: { years?: number; days?: number }): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCFullYear(d.getUTCFullYear() + years);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}
const api = (day: string) => `${day.slice(8, 10)}-${day.slice(5, 7)}-${day.slice(0, 4)}`; // DD-MM-YYYY
const hmrc = (day: string) => `${day.slice(8, 10)}/${day.slice(5, 7)}/${day.slice(2, 4)}`; // DD/MM/YY

describe('bin/almoner giftaid schedule', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`bin/almoner giftaid schedule [${backend.name}]`, { concurrency: 1 }, () => {
      let ctx: TestContext;
      let other: TestCharity;
      let dir: string;
      let out: string;
      let run: Run;
      const today = todayInUk();
      const from = shift(today, { years: -4, days: -30 });
      const to = shift(today, { days: 30 });
      /** Every donation recorded, by a short name: its id, and how it was recorded. */
      const recorded = new Map<string, { id: number; body: Record<string, unknown> }>();
      /** The ids the claim must account for: this charity's Gift Aid donations dated from..to. */
      const inClaim = new Set<number>();
      /** Claimable donations by their (unique) last name as the schedule shows it, with the amount in pence. */
      const claimable = new Map<string, { id: number; pence: number }>();

      async function donate(name: string, charity: TestCharity, body: Record<string, unknown>): Promise<number> {
        const { id } = (await (await ctx.client(charity)).createDonation(body as unknown as DonationInput)).record;
        recorded.set(name, { id, body });
        return id;
      }

      function idOf(name: string): number {
        const r = recorded.get(name);
        assert.ok(r, `no donation ${name}`);
        return r.id;
      }

      before(async () => {
        assertBuilt();
        ctx = await startTestApp(backend);
        other = await ctx.signUp('Second Charity', 'second@charity.example');
        dir = tempDir();
        out = join(dir, 'claims', '2025'); // nested and missing: the command creates it

        const recent = shift(today, { days: -30 });
        // Claimable, each showing one rule on the way into the schedule.
        const yes = async (name: string, lastName: string, pence: number, body: Record<string, unknown>) => {
          const id = await donate(name, ctx.charity, exampleDonation({ donation_date: api(recent), ...body }));
          inClaim.add(id);
          claimable.set(lastName, { id, pence });
        };
        await yes('hyphenated', 'Smith Jones', 2500, { donor_last_name: 'Smith-Jones', donor_postcode: 'sw1a1aa', amount: '25.00' });
        await yes('flat', 'Flatley', 1050, { donor_last_name: 'Flatley', donor_address: 'Flat 3, 12 High St', amount: 10.5 });
        await yes('cottage', 'Cottager', 100000050, { donor_last_name: 'Cottager', donor_address: 'Rose Cottage, Lane End', amount: '1000000.50' });
        await yes('long', 'W'.repeat(35), 1, {
          donor_first_name: 'Wolfeschlegelsteinhausenbergerdorff Hubert',
          donor_last_name: 'W'.repeat(40),
          amount: '0.01',
        });
        await yes('onFrom', 'Onfrom', 700, { donor_last_name: 'Onfrom', donation_date: api(shift(today, { years: -4 })), amount: '7' });

        // Gift Aid donations that cannot be claimed as they stand.
        const attention = async (name: string, body: Record<string, unknown>, charity = ctx.charity) => {
          inClaim.add(await donate(name, charity, exampleDonation({ donation_date: api(recent), ...body })));
        };
        await attention('noLastName', { donor_last_name: null });
        await attention('noAddress', { donor_address: '' });
        await attention('noPostcode', { donor_postcode: undefined });
        await attention('tooOld', { donation_date: api(shift(today, { years: -4, days: -10 })) });
        await attention('future', { donation_date: api(shift(today, { days: 10 })) });
        await attention('tricky', { donor_first_name: null, donor_address: 'Flat 2, "The Old Mill"\nMill Lane', donor_postcode: '75008' });

        // Never in the claim: no Gift Aid, another charity, dated outside --from..--to.
        await donate('noGiftAid', ctx.charity, exampleDonation({ gift_aid: 'no', donation_date: api(recent) }));
        await donate('otherCharity', other, exampleDonation({ donation_date: api(recent) }));
        await donate('beforeFrom', ctx.charity, exampleDonation({ donation_date: api(shift(from, { days: -1 })) }));
        await donate('afterTo', ctx.charity, exampleDonation({ donation_date: api(shift(to, { days: 1 })) }));

        // Volume: straight through the store, 100 at a time, each with its own last name.
        for (let start = 0; start < BULK; start += 100) {
          await Promise.all(
            Array.from({ length: Math.min(100, BULK - start) }, async (_, k) => {
              const i = start + k;
              const v = validateDonation(exampleDonation({ donor_last_name: `Bulk-${i}`, amount: `${i + 1}.00`, donation_date: api(recent) }));
              assert.ok(v.ok);
              const d = await ctx.store.recordDonation(ctx.charity.id, v.donation);
              inClaim.add(d.id);
              claimable.set(`Bulk ${i}`, { id: d.id, pence: (i + 1) * 100 });
            }),
          );
        }

        run = await almoner(ctx.databaseUrl, ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', from, '--to', to, '--out', out]);
        assert.equal(run.code, 0, `giftaid schedule exited ${run.code}\nstderr: ${run.stderr}`);
      });

      after(async () => {
        await ctx?.close();
        if (dir) rmSync(dir, { recursive: true, force: true });
      });

      const claimableCount = () => claimable.size; // 5 + BULK
      const schedules = () => [readCsv(join(out, 'schedule-001.csv'), SCHEDULE_HEADER), readCsv(join(out, 'schedule-002.csv'), SCHEDULE_HEADER)];
      const needsAttention = () => readCsv(join(out, 'needs-attention.csv'), ATTENTION_HEADER);

      test('the folder is created and holds schedule-001.csv with 1,000 rows, schedule-002.csv with the rest, and needs-attention.csv', () => {
        assert.deepEqual(readdirSync(out).sort(), ['needs-attention.csv', 'schedule-001.csv', 'schedule-002.csv'], 'no other file, no temporary file left');
        const [first, second] = schedules();
        assert.equal(first!.length, 1000);
        assert.equal(second!.length, claimableCount() - 1000);
      });

      test('every Gift Aid donation in range is in exactly one schedule row or in needs-attention.csv; nothing else is', () => {
        const seen: number[] = [];
        for (const row of schedules().flat()) {
          const c = claimable.get(row[2]!);
          assert.ok(c, `a schedule row for no claimable donation: ${JSON.stringify(row)}`);
          seen.push(c.id);
        }
        for (const row of needsAttention()) seen.push(Number(row[0]));
        assert.equal(new Set(seen).size, seen.length, 'no donation twice');
        assert.deepEqual(new Set(seen), inClaim);
        for (const name of ['noGiftAid', 'otherCharity', 'beforeFrom', 'afterTo']) assert.ok(!seen.includes(idOf(name)), `${name} is not in the claim`);
      });

      test('schedule rows follow the rules: names, house, postcode, DD/MM/YY, pounds with two decimals, in id order', () => {
        const rows = schedules().flat();
        const byLastName = new Map(rows.map((r) => [r[2], r]));
        const recent = hmrc(shift(today, { days: -30 }));
        assert.deepEqual(byLastName.get('Smith Jones'), ['', 'Jane', 'Smith Jones', '12', 'SW1A 1AA', '', '', recent, '25.00']);
        assert.deepEqual(byLastName.get('Flatley'), ['', 'Jane', 'Flatley', 'Flat 3, 12', 'SW1A 1AA', '', '', recent, '10.50']);
        assert.deepEqual(byLastName.get('Cottager'), ['', 'Jane', 'Cottager', 'Rose Cottage', 'SW1A 1AA', '', '', recent, '1000000.50']);
        assert.deepEqual(byLastName.get('W'.repeat(35)), ['', 'Wolfeschlegelsteinhausenbergerdorff', 'W'.repeat(35), '12', 'SW1A 1AA', '', '', recent, '0.01']);
        assert.deepEqual(byLastName.get('Onfrom'), ['', 'Jane', 'Onfrom', '12', 'SW1A 1AA', '', '', hmrc(shift(today, { years: -4 })), '7.00']);
        assert.deepEqual(byLastName.get('Bulk 7'), ['', 'Jane', 'Bulk 7', '12', 'SW1A 1AA', '', '', recent, '8.00']);
        const ids = rows.map((r) => claimable.get(r[2]!)!.id);
        assert.deepEqual(
          ids,
          [...ids].sort((a, b) => a - b),
          'in id order',
        );
      });

      test('needs-attention.csv: each donation as recorded, with every reason', () => {
        const rows = new Map(needsAttention().map((r) => [Number(r[0]), r]));
        const reason = (name: string) => rows.get(idOf(name))?.[9];
        assert.equal(reason('noLastName'), 'no last name');
        assert.equal(reason('noAddress'), 'no house name or number (donor_address is empty)');
        assert.equal(reason('noPostcode'), 'no postcode');
        assert.match(reason('tooOld') ?? '', /^dated more than 4 years before the claim date \(before \d\d\/\d\d\/\d{4}\): too late to claim$/);
        assert.equal(reason('future'), 'dated after the claim date');
        assert.equal(reason('tricky'), 'no first name; postcode "75008" is not a UK postcode (use X for a donor living outside the UK)');
        const tricky = rows.get(idOf('tricky'));
        assert.deepEqual(tricky?.slice(0, 9), [
          String(idOf('tricky')),
          '',
          'Doe',
          'jane.doe@example.com',
          'Flat 2, "The Old Mill"\nMill Lane',
          'London',
          '75008',
          shift(today, { days: -30 }),
          '25.00',
        ]);
        assert.equal(rows.size, 6);
      });

      test('the summary on stdout: how many to claim, the total, the files, how many need attention', () => {
        const pence = [...claimable.values()].reduce((sum, c) => sum + c.pence, 0);
        const total = `£${Math.floor(pence / 100).toLocaleString('en-GB')}.${String(pence % 100).padStart(2, '0')}`;
        assert.ok(run.stdout.includes(`${claimableCount().toLocaleString('en-GB')} donations to claim, ${total} in all, in 2 schedule files:`), run.stdout);
        assert.ok(run.stdout.includes(`${join(out, 'schedule-001.csv')}  (1,000 rows)`), run.stdout);
        assert.ok(run.stdout.includes(`${join(out, 'schedule-002.csv')}  (${claimableCount() - 1000} rows)`), run.stdout);
        assert.ok(run.stdout.includes(`6 donations need attention before they can be claimed: ${join(out, 'needs-attention.csv')}`), run.stdout);
        assert.ok(run.stdout.includes('1 donation without Gift Aid was left out.'), run.stdout);
        assert.equal(run.stderr, '');
      });

      test('a folder that already holds a schedule is refused (exit 2) and left as it was', async () => {
        const r = await almoner(ctx.databaseUrl, ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', from, '--to', to, '--out', out]);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /already holds needs-attention\.csv, schedule-001\.csv, schedule-002\.csv/);
        assert.deepEqual(readdirSync(out).sort(), ['needs-attention.csv', 'schedule-001.csv', 'schedule-002.csv']);
      });

      test('without --out the files go to the current folder; with nothing claimable, only needs-attention.csv', async () => {
        const cwd = join(dir, 'cwd');
        mkdirSync(cwd);
        const r = await new Promise<Run>((resolve, reject) =>
          execFile(BIN, ['giftaid', 'schedule', '--charity', other.username, '--from', from, '--to', from], { cwd, env: childEnv(ctx.databaseUrl), timeout: 20_000 }, (err, stdout, stderr) => {
            if (err && typeof err.code !== 'number') return reject(err);
            resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
          }),
        );
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(readdirSync(cwd), ['needs-attention.csv']);
        assert.deepEqual(readCsv(join(cwd, 'needs-attention.csv'), ATTENTION_HEADER), []);
        assert.match(r.stdout, /No donations can be claimed: no schedule file was written\./);
      });

      test('bad arguments exit 2 with a message and write nothing', async () => {
        const base = ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', from, '--to', to];
        const cases: [string, string[], RegExp][] = [
          ['an unknown charity', ['giftaid', 'schedule', '--charity', 'no-such-charity', '--from', from, '--to', to], /no charity has the username "no-such-charity"/],
          ['--from after --to', ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', to, '--to', from], /--from must not be later than --to/],
          ['no --charity', ['giftaid', 'schedule', '--from', from, '--to', to], /required option '--charity <username>' not specified/],
          ['no --from', ['giftaid', 'schedule', '--charity', ctx.charity.username, '--to', to], /required option '--from <YYYY-MM-DD>' not specified/],
          ['no --to', ['giftaid', 'schedule', '--charity', ctx.charity.username, '--from', from], /required option '--to <YYYY-MM-DD>' not specified/],
          ['a malformed date', [...base.slice(0, 4), '--from', '2025-02-30', '--to', to], /must be a date as YYYY-MM-DD/],
        ];
        await Promise.all(
          cases.map(async ([what, args, message]) => {
            const target = join(dir, `bad-${what.replace(/\W+/g, '-')}`);
            const r = await almoner(ctx.databaseUrl, [...args, '--out', target]);
            assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
            assert.match(r.stderr, message, what);
            assert.equal(existsSync(target), false, `${what}: no folder created`);
          }),
        );
        const file = join(dir, 'a-file');
        writeFileSync(file, '');
        const r = await almoner(ctx.databaseUrl, [...base, '--out', file]);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /is not a folder/);
      });
    });
  }
});
