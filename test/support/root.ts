// Test support: the project's folder. `npm test` runs a compiled copy of test/ from .test-build/,
// whose other files are links to the project's own (scripts/test.mjs): a test that needs the folder
// itself (git's view of it, a copy of it, a cwd to run npm in) gets the real one from either copy.
import { realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = dirname(realpathSync(fileURLToPath(new URL('../../package.json', import.meta.url))));
