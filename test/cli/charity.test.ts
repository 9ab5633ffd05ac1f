// bin/almoner charity ...: the real executable, spawned as an operator would run it, on a fresh
// database of each backend that an in-process app also serves (as a running server would).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { basic, HONOURED_WITHIN_MS } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, type Run } from '../support/cli.js';
import { TestClock } from '../support/clock.js';
import { watchConformance } from '../support/openapi.js';

interface Created {
  id: number;
  name: string;
  email: string;
  username: string;
  password: string;
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

function assertStrongPassword(password: string): void {
  assert.match(password, BASE64URL, 'the password is base64url');
  // 22 base64url characters carry 132 bits; anything shorter cannot hold 128 bits of entropy.
  assert.ok(password.length >= 22, `password ${JSON.stringify(password)} is too short for 128 bits`);
}

// The backends are independent (each has its own database), so they run side by side; within one,
// the suites run in order as before (concurrency: 1, since a suite inherits its parent's setting).
describe('bin/almoner charity', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`bin/almoner charity [${backend.name}]`, { concurrency: 1 }, () => {
      let database: TestDatabase | undefined;
      let store: Store;
      let app: FastifyInstance;
      const clock = new TestClock(); // the app's: moved on instead of waiting for a change to be honoured
      /** Every password the CLI has shown on this database: none may ever show up in `charity list`. */
      const passwordsSeen = new Set<string>();

      before(async () => {
        assertBuilt();
        database = await backend.createDatabase();
        store = await openStore(database.location);
        app = await buildApp({ store, clock: clock.now });
        watchConformance(app);
        await app.ready();
      });

      after(async () => {
        try {
          await app?.close(); // fails if an exchange did not conform to the OpenAPI document
        } finally {
          await store?.close();
          await database?.drop();
        }
      });

      /** Runs bin/almoner on this database (with any extra environment); never rejects on a non-zero exit. */
      function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
        assert.ok(database, 'no database: the before hook failed');
        return almoner(database.url, args, env);
      }

      /** Runs a command that must succeed, and returns its standard output. */
      async function ok(args: string[]): Promise<string> {
        const r = await run(args);
        assert.equal(r.code, 0, `almoner ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
        return r.stdout;
      }

      async function createCharity(name: string, email: string): Promise<Created> {
        return JSON.parse(await ok(['charity', 'create', '--name', name, '--email', email, '--json'])) as Created;
      }

      async function meStatus(username: string, password: string): Promise<number> {
        const res = await app.inject({
          method: 'POST',
          url: '/api/v1/me',
          headers: { authorization: basic(username, password), accept: 'application/json' },
        });
        return res.statusCode;
      }

      /** /me answers `status` for these credentials once the 5 seconds the spec gives a running server have passed. */
      async function eventuallyMe(username: string, password: string, status: number): Promise<void> {
        clock.advance(HONOURED_WITHIN_MS);
        assert.equal(await meStatus(username, password), status, `POST /api/v1/me as ${username} ${HONOURED_WITHIN_MS / 1000} s later`);
      }

      describe('charity create', () => {
        test('--json prints exactly id, name, email, username and a strong password', async () => {
          const out = await ok(['charity', 'create', '--name', 'Helping Hands', '--email', 'info@helpinghands.example', '--json']);
          assert.equal(out.trim().split('\n').length, 1, 'one line of JSON');
          const created = JSON.parse(out) as Record<string, unknown>;
          assert.deepEqual(Object.keys(created).sort(), ['email', 'id', 'name', 'password', 'username']);
          assert.equal(created.name, 'Helping Hands');
          assert.equal(created.email, 'info@helpinghands.example');
          assert.ok(Number.isInteger(created.id), 'id is an integer');
          assert.equal(typeof created.username, 'string');
          assert.ok((created.username as string).length > 0);
          assert.ok(!(created.username as string).includes(':'), 'a Basic username cannot hold a colon');
          assert.equal(typeof created.password, 'string');
          assertStrongPassword(created.password as string);
          passwordsSeen.add(created.password as string);

          // The credentials are real: the service accepts them.
          await eventuallyMe(created.username as string, created.password as string, 200);
        });

        test('two charities get different usernames and passwords, even with the same name', async () => {
          const a = await createCharity('Twin Trust', 'a@twin.example');
          const b = await createCharity('Twin Trust', 'b@twin.example');
          passwordsSeen.add(a.password).add(b.password);
          assert.notEqual(a.id, b.id);
          assert.notEqual(a.username, b.username);
          assert.notEqual(a.password, b.password);
        });

        test('plain output shows the username and the password, which work', async () => {
          const out = await ok(['charity', 'create', '--name', 'Plain Output Fund', '--email', 'plain@fund.example']);
          const username = /username:\s*(\S+)/.exec(out)?.[1];
          const password = /password:\s*(\S+)/.exec(out)?.[1];
          assert.ok(username, `no username in:\n${out}`);
          assert.ok(password, `no password in:\n${out}`);
          assertStrongPassword(password);
          passwordsSeen.add(password);
          const listed = (await store.listCharities()).find((c) => c.username === username);
          assert.ok(listed, `${username} is not in the store`);
          assert.equal(listed.name, 'Plain Output Fund');
          assert.equal(listed.email, 'plain@fund.example');
          await eventuallyMe(username, password, 200);
        });
      });

      describe('charity list', () => {
        test('--json is an array of exactly id, name, email, username, active, created_at', async () => {
          const mine = await createCharity('Listed Charity', 'listed@charity.example');
          passwordsSeen.add(mine.password);
          const list = JSON.parse(await ok(['charity', 'list', '--json'])) as Record<string, unknown>[];
          assert.ok(Array.isArray(list));
          assert.ok(list.length >= 1);
          for (const c of list) {
            assert.deepEqual(Object.keys(c).sort(), ['active', 'created_at', 'email', 'id', 'name', 'old_password_until', 'username']);
            assert.ok(Number.isInteger(c.id));
            assert.equal(typeof c.name, 'string');
            assert.equal(typeof c.email, 'string');
            assert.equal(typeof c.username, 'string');
            assert.equal(typeof c.active, 'boolean');
            assert.equal(typeof c.created_at, 'string');
            assert.ok(!Number.isNaN(Date.parse(c.created_at as string)), `created_at ${String(c.created_at)} is a timestamp`);
          }
          const entry = list.find((c) => c.username === mine.username);
          assert.deepEqual(
            entry && { id: entry.id, name: entry.name, email: entry.email, active: entry.active },
            { id: mine.id, name: 'Listed Charity', email: 'listed@charity.example', active: true },
          );
          assert.equal(entry?.old_password_until, null, 'no old password works: it was never rotated');
        });

        test('neither form shows a password or a password hash', async () => {
          const json = await ok(['charity', 'list', '--json']);
          const plain = await ok(['charity', 'list']);
          const charities = await store.listCharities();
          assert.ok(passwordsSeen.size >= 1 && charities.length >= 1);
          for (const password of passwordsSeen) {
            assert.ok(!json.includes(password), 'a password in `charity list --json`');
            assert.ok(!plain.includes(password), 'a password in `charity list`');
          }
          for (const c of charities) {
            assert.ok(plain.includes(c.username), `${c.username} is missing from \`charity list\``);
            const hash = (await store.findCredential(c.username))?.password_hash;
            assert.ok(hash, `no hash stored for ${c.username}`);
            assert.ok(!json.includes(hash), 'a password hash in `charity list --json`');
            assert.ok(!plain.includes(hash), 'a password hash in `charity list`');
          }
          assert.doesNotMatch(json.replaceAll('"old_password_until":', ''), /password|hash/i);
        });
      });

      describe('charity rotate, disable and enable', () => {
        test('rotate --json prints exactly username and a new password; the old one stops working within 5 s', async () => {
          const c = await createCharity('Rotating Relief', 'rotate@relief.example');
          passwordsSeen.add(c.password);
          await eventuallyMe(c.username, c.password, 200); // the server has seen the old password working

          const out = await ok(['charity', 'rotate', c.username, '--json']);
          const rotated = JSON.parse(out) as Record<string, unknown>;
          assert.deepEqual(Object.keys(rotated).sort(), ['old_password_until', 'password', 'username']);
          assert.equal(rotated.username, c.username);
          assert.equal(rotated.old_password_until, null, 'without --grace no old password works');
          assert.equal(typeof rotated.password, 'string');
          const fresh = rotated.password as string;
          passwordsSeen.add(fresh);
          assertStrongPassword(fresh);
          assert.notEqual(fresh, c.password);

          await eventuallyMe(c.username, c.password, 401);
          await eventuallyMe(c.username, fresh, 200);
        });

        test('plain rotate prints the new password, which replaces the previous one', async () => {
          const c = await createCharity('Plain Rotation', 'plain@rotation.example');
          passwordsSeen.add(c.password);
          const out = await ok(['charity', 'rotate', c.username]);
          const fresh = /(?<![A-Za-z0-9_-])([A-Za-z0-9_-]{22,})(?![A-Za-z0-9_-])/.exec(out.replace(c.username, ''))?.[1];
          assert.ok(fresh, `no password in:\n${out}`);
          passwordsSeen.add(fresh);
          assert.notEqual(fresh, c.password);
          await eventuallyMe(c.username, c.password, 401);
          await eventuallyMe(c.username, fresh, 200);
        });

        test('rotate --grace 24h: both passwords work, the old one until the time it prints (listed, audited); end-grace stops it within 5 s', async () => {
          const c = await createCharity('Graceful Giving', 'grace@giving.example');
          passwordsSeen.add(c.password);
          await eventuallyMe(c.username, c.password, 200);
          const before = Date.now();
          const rotated = JSON.parse(await ok(['charity', 'rotate', c.username, '--grace', '24h', '--json'])) as { password: string; old_password_until: string };
          passwordsSeen.add(rotated.password);
          const until = Date.parse(rotated.old_password_until);
          assert.ok(until >= before + 24 * 3_600_000 && until <= Date.now() + 24 * 3_600_000, `old_password_until ${rotated.old_password_until} is 24 h on`);
          assert.match(rotated.old_password_until, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);

          clock.advance(HONOURED_WITHIN_MS); // past anything remembered: each password is judged afresh
          assert.equal(await meStatus(c.username, c.password), 200, 'the old password works in its grace');
          assert.equal(await meStatus(c.username, rotated.password), 200, 'the new one works');
          clock.advance(HONOURED_WITHIN_MS);
          assert.equal(await meStatus(c.username, c.password), 200, 'and still does, after anything remembered has run out');

          const listed = (JSON.parse(await ok(['charity', 'list', '--json'])) as { username: string; old_password_until: string | null }[]).find((x) => x.username === c.username);
          assert.equal(listed?.old_password_until, rotated.old_password_until);
          assert.ok((await ok(['charity', 'list'])).includes(`active (old password until ${rotated.old_password_until})`));
          const audited = (await store.auditTrail()).filter((e) => e.target === c.username && e.action === 'charity rotate');
          assert.deepEqual(audited.at(-1)?.summary, { old_password_until: rotated.old_password_until });

          const ended = await ok(['charity', 'end-grace', c.username]);
          assert.match(ended, /no longer works/);
          await eventuallyMe(c.username, c.password, 401);
          assert.equal(await meStatus(c.username, rotated.password), 200);
          assert.match(await ok(['charity', 'end-grace', c.username]), /nothing changed/, 'a second end-grace changes nothing');
          assert.deepEqual(
            (await store.auditTrail()).filter((e) => e.target === c.username && e.action === 'charity end-grace').length,
            1,
            'audited once: the second changed nothing',
          );
          const relisted = (JSON.parse(await ok(['charity', 'list', '--json'])) as { username: string; old_password_until: string | null }[]).find((x) => x.username === c.username);
          assert.equal(relisted?.old_password_until, null);
        });

        test('a rotate without --grace ends an old password still in its grace; one with keeps only the password it replaces', async () => {
          const c = await createCharity('Twice Rotated', 'twice@rotated.example');
          passwordsSeen.add(c.password);
          const second = (JSON.parse(await ok(['charity', 'rotate', c.username, '--grace', '7d', '--json'])) as { password: string }).password;
          const third = (JSON.parse(await ok(['charity', 'rotate', c.username, '--grace', '30m', '--json'])) as { password: string }).password;
          passwordsSeen.add(second).add(third);
          clock.advance(HONOURED_WITHIN_MS);
          assert.equal(await meStatus(c.username, c.password), 401, 'the first password: two rotations ago');
          assert.equal(await meStatus(c.username, second), 200, 'the one the last rotation replaced');
          assert.equal(await meStatus(c.username, third), 200);
          const fourth = (JSON.parse(await ok(['charity', 'rotate', c.username, '--json'])) as { password: string }).password;
          passwordsSeen.add(fourth);
          await eventuallyMe(c.username, second, 401);
          await eventuallyMe(c.username, third, 401);
          assert.equal(await meStatus(c.username, fourth), 200);
        });

        test('an old password in its grace does not get past a disable', async () => {
          const c = await createCharity('Graceful Pause', 'pause@giving.example');
          passwordsSeen.add(c.password);
          const fresh = (JSON.parse(await ok(['charity', 'rotate', c.username, '--grace', '1h', '--json'])) as { password: string }).password;
          passwordsSeen.add(fresh);
          await ok(['charity', 'disable', c.username]);
          await eventuallyMe(c.username, c.password, 401);
          await eventuallyMe(c.username, fresh, 401);
          await ok(['charity', 'enable', c.username]);
          await eventuallyMe(c.username, c.password, 200);
        });

        test('disable locks a charity out within 5 s and enable lets it back in, its password unchanged', async () => {
          const c = await createCharity('Switchable Support', 'switch@support.example');
          passwordsSeen.add(c.password);
          await eventuallyMe(c.username, c.password, 200);

          const disabled = await run(['charity', 'disable', c.username]);
          assert.equal(disabled.code, 0, disabled.stderr);
          assert.ok(disabled.stdout.includes(c.username), 'disable says which charity it disabled');
          await eventuallyMe(c.username, c.password, 401);
          let listed = (JSON.parse(await ok(['charity', 'list', '--json'])) as { username: string; active: boolean }[]).find(
            (x) => x.username === c.username,
          );
          assert.equal(listed?.active, false);

          // Disabling twice is harmless.
          assert.equal((await run(['charity', 'disable', c.username])).code, 0);

          const enabled = await run(['charity', 'enable', c.username]);
          assert.equal(enabled.code, 0, enabled.stderr);
          assert.ok(enabled.stdout.includes(c.username), 'enable says which charity it enabled');
          await eventuallyMe(c.username, c.password, 200);
          listed = (JSON.parse(await ok(['charity', 'list', '--json'])) as { username: string; active: boolean }[]).find(
            (x) => x.username === c.username,
          );
          assert.equal(listed?.active, true);
        });

        test('a disabled charity can be rotated; the new password works once it is enabled again', async () => {
          const c = await createCharity('Dormant Donations', 'dormant@donations.example');
          passwordsSeen.add(c.password);
          await ok(['charity', 'disable', c.username]);
          const fresh = (JSON.parse(await ok(['charity', 'rotate', c.username, '--json'])) as { password: string }).password;
          passwordsSeen.add(fresh);
          await eventuallyMe(c.username, fresh, 401); // still disabled
          await ok(['charity', 'enable', c.username]);
          await eventuallyMe(c.username, fresh, 200);
          await eventuallyMe(c.username, c.password, 401);
        });
      });

      describe('an unknown username', { concurrency: true }, () => {
        for (const args of [
          ['charity', 'rotate', 'no-such-charity-000000', '--json'],
          ['charity', 'disable', 'no-such-charity-000000'],
          ['charity', 'enable', 'no-such-charity-000000'],
          ['charity', 'rotate', 'no-such-charity-000000', '--grace', '24h'],
          ['charity', 'end-grace', 'no-such-charity-000000'],
        ]) {
          test(`${args.join(' ')}: exit 2 with a message naming it, and nothing changes`, async () => {
            const unchanged = await store.listCharities();
            const r = await run(args);
            assert.equal(r.code, 2, `exit ${r.code}; stderr: ${r.stderr}`);
            assert.equal(r.stdout, '', 'nothing on standard output (in particular no password)');
            assert.ok(r.stderr.includes('no-such-charity-000000'), `stderr does not name the username: ${r.stderr}`);
            assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
            assert.deepEqual(await store.listCharities(), unchanged, 'nothing changed');
          });
        }
      });

      describe('bad arguments', { concurrency: true }, () => {
        const cases: { what: string; args: string[]; stderr: RegExp; env?: Record<string, string>; sqliteOnly?: true }[] = [
          { what: 'create without --name', args: ['charity', 'create', '--email', 'x@y.example'], stderr: /--name/ },
          { what: 'create without --email', args: ['charity', 'create', '--name', 'No Email'], stderr: /--email/ },
          { what: 'create with an invalid --email', args: ['charity', 'create', '--name', 'Bad Email', '--email', 'not-an-email'], stderr: /email/i },
          { what: 'create with an empty --name', args: ['charity', 'create', '--name', '  ', '--email', 'x@y.example'], stderr: /name/i },
          { what: 'create with a control character in --name', args: ['charity', 'create', '--name', 'Helping\u000bHands', '--email', 'x@y.example'], stderr: /--name.*control characters \(U\+000B at character 8\)/ },
          { what: 'create with an unknown option', args: ['charity', 'create', '--name', 'N', '--email', 'x@y.example', '--colour', 'red'], stderr: /colour/ },
          { what: 'an unknown charity subcommand', args: ['charity', 'frobnicate'], stderr: /frobnicate/ },
          { what: 'an unknown top-level command', args: ['frobnicate'], stderr: /frobnicate/ },
          { what: 'rotate without a username', args: ['charity', 'rotate'], stderr: /username/i },
          { what: 'disable without a username', args: ['charity', 'disable'], stderr: /username/i },
          { what: 'rotate --grace without a unit', args: ['charity', 'rotate', 'no-such-charity-000000', '--grace', '24'], stderr: /--grace.*30m, 24h or 7d/ },
          { what: 'rotate --grace of a fraction', args: ['charity', 'rotate', 'no-such-charity-000000', '--grace', '1.5h'], stderr: /--grace.*whole number/ },
          { what: 'rotate --grace of nothing', args: ['charity', 'rotate', 'no-such-charity-000000', '--grace', '0d'], stderr: /--grace.*leave --grace out/ },
          { what: 'rotate --grace over a week', args: ['charity', 'rotate', 'no-such-charity-000000', '--grace', '169h'], stderr: /--grace.*at most 7d/ },
          { what: 'export --from in the API DD-MM-YYYY form', args: ['donations', 'export', '--from', '25-02-2021'], stderr: /--from/ },
          { what: 'export --from on a day that does not exist', args: ['donations', 'export', '--from', '2021-02-30'], stderr: /--from/ },
          { what: 'export --to that is not a date', args: ['donations', 'export', '--to', '2021-13-01'], stderr: /--to/ },
          { what: 'export --format xml', args: ['donations', 'export', '--format', 'xml'], stderr: /--format|xml/ },
          // SQLite-only: it replaces DATABASE_URL, so it runs on neither backend; once is enough.
          {
            what: 'a DATABASE_URL that is neither sqlite: nor postgres:',
            args: ['charity', 'list'],
            stderr: /DATABASE_URL/,
            env: { DATABASE_URL: 'redis://operator:s3cr3t@db.example/0' },
            sqliteOnly: true,
          },
        ];

        for (const c of cases.filter((c) => backend.name === 'sqlite' || !c.sqliteOnly)) {
          test(`${c.what}: exit 2 with a message on stderr`, async () => {
            const r = await run(c.args, c.env);
            assert.equal(r.code, 2, `almoner ${c.args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
            assert.match(r.stderr, c.stderr);
            assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
            assert.equal(r.stdout, '', 'nothing on standard output');
            if (c.env?.DATABASE_URL) assert.ok(!r.stderr.includes('s3cr3t'), 'the message does not repeat a password from DATABASE_URL');
            if (c.args[1] === 'create') {
              const names = (await store.listCharities()).map((x) => x.name);
              assert.ok(!names.includes(c.args[3]!), 'a refused create stores nothing');
            }
          });
        }
      });

      describe('--help', () => {
        // Each command, and the options its help must mention.
        const commands: [string[], string[]][] = [
          [[], []],
          [['serve'], []],
          [['charity'], []],
          [['charity', 'create'], ['--name', '--email', '--json']],
          [['charity', 'list'], ['--json']],
          [['charity', 'rotate'], ['--grace', '--json']],
          [['charity', 'end-grace'], []],
          [['charity', 'disable'], []],
          [['charity', 'enable'], []],
          [['donations'], []],
          [['donations', 'export'], ['--charity', '--from', '--to', '--format']],
        ];

        test('every command and subcommand has --help: exit 0, its usage and its options on stdout', async () => {
          const runs = await Promise.all(commands.map(([args]) => run([...args, '--help'])));
          runs.forEach((r, i) => {
            const [args, options] = commands[i]!;
            const name = ['almoner', ...args].join(' ');
            assert.equal(r.code, 0, `${name} --help exited ${r.code}\nstderr: ${r.stderr}`);
            assert.match(r.stdout, /Usage:/, `${name} --help prints no usage`);
            const last = args.at(-1);
            if (last) assert.ok(r.stdout.includes(last), `${name} --help does not name the command`);
            for (const option of options) assert.ok(r.stdout.includes(option), `${name} --help does not mention ${option}`);
          });
        });
      });
    });
  }
});
