// The production install on Node 22, fetched from the npm registry (package.json's engines: 20, 22
// and 24; CI runs the rest of the suite on the machine's Node): see test/support/production-install.ts.
import { describeProductionInstall } from '../support/production-install.js';

describeProductionInstall({ major: 22 });
