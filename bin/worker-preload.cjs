// Not a command: the first lines of every worker under WORKERS, which src/cluster/primary.ts has
// node load with --require, before Node's own start in the worker goes on. CommonJS, as a --require
// runs at once, where an ES module (even bin/almoner's first line) runs only after Node has handed
// on the 'error' below.
//
// A worker whose primary is gone (killed with SIGKILL, by the OOM killer) ends, quietly:
// - Node's start in a worker sends the primary its first message ('online') before any module runs,
//   and a send without a callback (that one, Node's own for a listen, rate-limiter-flexible's) that
//   meets the closed channel fails as an 'error' event on cluster.worker. With no listener, the
//   worker died of it printing `Error: write EPIPE` and Node's stack trace (a review: every primary
//   killed as its worker started). Here it is taken for what it is, the primary's going, whose
//   'disconnect' follows.
// - That 'disconnect' ended the worker with Node's exit status 0 (node:cluster's child), saying
//   nothing: here it ends with 1, as a worker whose work was not done. A worker serving says why
//   in its log first (src/server.ts: its listener, prepended after this one, runs before it).
'use strict';
const cluster = require('node:cluster');

/** What a send to a primary that is gone fails with: its end of the channel closed, or the channel already known closed. */
const PRIMARY_GONE = new Set(['EPIPE', 'ECONNRESET', 'ERR_IPC_CHANNEL_CLOSED']);

if (cluster.isWorker) {
  const worker = cluster.worker;
  worker.on('error', (err) => {
    if (!PRIMARY_GONE.has(err.code)) throw err; // anything else fails the worker as it did
  });
  // Not when the primary asked this worker to disconnect (worker.disconnect(), which Almoner does not use): node:cluster then ends it as it should.
  process.prependOnceListener('disconnect', () => worker.exitedAfterDisconnect || process.exit(1));
}
