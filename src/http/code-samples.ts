// The code samples of each operation, as the OpenAPI document's `x-codeSamples` (Redocly's
// extension, which the /docs page shows too). Each is a real file under examples/, run against a
// live server by test/examples/samples.test.ts: what integrators copy is what is tested.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export interface CodeSample {
  /** The language, as Redocly names it. */
  lang: string;
  label: string;
  source: string;
}

/** The languages, in the order the samples are shown, and each one's file extension. */
const LANGUAGES = [
  { lang: 'Shell', label: 'curl', file: (name: string) => `${name}.sh` },
  { lang: 'PHP', label: 'PHP (curl)', file: (name: string) => `${name}.php` },
  { lang: 'Python', label: 'Python (requests)', file: (name: string) => `${name}.py` },
  { lang: 'JavaScript', label: 'Node.js (fetch)', file: (name: string) => `${name}.mjs` },
  { lang: 'TypeScript', label: 'TypeScript (almoner/client)', file: (name: string) => `client-${name}.ts` },
] as const;

/** Each operation's samples are examples/<name>.<extension>. */
const FILE_NAMES = { testConnection: 'me', createDonation: 'create' } as const;

export type OperationId = keyof typeof FILE_NAMES;

/** Where the samples are: examples/ in Almoner's own folder (found by the package's name: this code runs from a bundle). */
export const EXAMPLES_DIR = join(dirname(createRequire(import.meta.url).resolve('almoner/package.json')), 'examples');

/** The files of an operation's samples, in the order they are shown. */
export function codeSampleFiles(operation: OperationId): { lang: string; label: string; path: string }[] {
  return LANGUAGES.map(({ lang, label, file }) => ({ lang, label, path: join(EXAMPLES_DIR, file(FILE_NAMES[operation])) }));
}

const read = new Map<OperationId, CodeSample[]>();

/** An operation's samples, read from their files on first use (the files are part of the package: they do not change while it runs). */
export function codeSamples(operation: OperationId): CodeSample[] {
  let samples = read.get(operation);
  if (!samples) {
    samples = codeSampleFiles(operation).map(({ lang, label, path }) => ({ lang, label, source: readFileSync(path, 'utf8') }));
    read.set(operation, samples);
  }
  return samples;
}
