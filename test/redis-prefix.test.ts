// REDIS_PREFIX: two deployments sharing one Redis keep their counters apart. Each deployment's
// first charity has id 1, and the create limit is counted per charity id: with one prefix, one
// deployment's creates used up the other's allowance (429s for a charity that had made none).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { basic, exampleDonation } from './support/app.js';
import { BACKENDS, type TestDatabase } from './support/backends.js';
import { almoner, assertBuilt } from './support/cli.js';
import { ServerProcess } from './support/server.js';

const TEST_REDIS_URL = process.env.TEST_REDIS_URL || undefined;
const SQLITE = BACKENDS.find((b) => b.name === 'sqlite')!;
const LIMIT = 3;

describe('two deployments on one Redis', { skip: TEST_REDIS_URL ? false : 'TEST_REDIS_URL is not set' }, () => {
  const databases: TestDatabase[] = [];
  const servers: ServerProcess[] = [];
  const prefixes: string[] = [];

  after(async () => {
    await Promise.all(servers.map((s) => s.stop('SIGTERM', 10_000).catch(() => s.kill())));
    await Promise.all(databases.map((d) => d.drop()));
    const redis = new Redis(TEST_REDIS_URL!);
    for (const prefix of prefixes) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
    }
    redis.disconnect();
  });

  /** A deployment of its own (database, charity id 1, a server) on the shared Redis, with REDIS_PREFIX `prefix`. */
  async function deployment(prefix: string) {
    prefixes.push(prefix);
    const database = await SQLITE.createDatabase();
    databases.push(database);
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Deployment', '--email', 'd@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const charity = JSON.parse(made.stdout) as { id: number; username: string; password: string };
    assert.equal(charity.id, 1);
    const server = await new ServerProcess(database.url, { REDIS_URL: TEST_REDIS_URL!, REDIS_PREFIX: prefix, CREATE_RATE_LIMIT: String(LIMIT) }).listening();
    servers.push(server);
    const create = async () =>
      (
        await fetch(`${server.url}/api/v1/donation/create`, {
          method: 'POST',
          headers: { authorization: basic(charity.username, charity.password), 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify(exampleDonation()),
        })
      ).status;
    /** The statuses of LIMIT creates sent at once: all 200 within the allowance. */
    return async () => Promise.all(Array.from({ length: LIMIT }, create));
  }

  test('each with its own REDIS_PREFIX has its own allowance; one prefix shares it (the default did, for every deployment)', async () => {
    assertBuilt();
    const tag = randomBytes(4).toString('hex');
    // All three running first: starting a server takes longer than the second an allowance lasts.
    const [a, b, c] = [await deployment(`almoner-a-${tag}`), await deployment(`almoner-b-${tag}`), await deployment(`almoner-a-${tag}`)];
    assert.deepEqual(await a(), Array(LIMIT).fill(200));
    assert.deepEqual(await b(), Array(LIMIT).fill(200)); // 429s before REDIS_PREFIX: a had used charity 1's allowance
    // The same prefix is one set of counters, as for the instances of one deployment: c's creates right after
    // a's find the allowance spent, unless the second turned between the two (then tried again, three times at most).
    const tries: number[][] = [];
    for (let i = 0; i < 3 && !tries.at(-1)?.includes(429); i++) {
      await a();
      tries.push(await c());
    }
    assert.ok(tries.at(-1)!.includes(429), `c shares a's counters, whose allowance for this second is spent: ${JSON.stringify(tries)}`);
  });
});
