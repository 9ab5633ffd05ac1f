// The production install on this Node: see test/support/production-install.ts. The same on Node 22
// and 24, fetched from the npm registry: production-install-node22.test.ts and -node24.test.ts, each a
// file of its own so that each install has the test runner's limit on a file to itself.
import { describeProductionInstall } from '../support/production-install.js';

describeProductionInstall();
