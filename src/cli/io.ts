// What every subcommand shares: the store DATABASE_URL names, and plain output.
import { databaseFromEnv } from '../config.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/store.js';

export async function withStore<T>(work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(databaseFromEnv());
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

export function print(text: string): void {
  process.stdout.write(`${text}\n`);
}
export function printJson(value: unknown): void {
  print(JSON.stringify(value));
}
