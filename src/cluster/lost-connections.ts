// WORKERS > 1, in a worker: a connection the primary hands on that this worker could not take for
// want of a file descriptor is answered for, so that the primary goes on handing it connections.
//
// Node's round-robin (lib/internal/cluster/round_robin_handle.js) sends a worker one connection,
// its descriptor attached (SCM_RIGHTS), and hands that worker nothing more until the worker answers
// ({ ack: seq, accepted }); the primary keeps its copy of the connection open until then. A worker
// whose descriptor table is full reads the message without the descriptor (recvmsg says
// MSG_CTRUNC): Node's IPC then answers NODE_HANDLE_NACK, and for a connection handed on by cluster
// (a 'net.Native' handle) nothing resends the descriptor and nothing answers for it, so the worker
// was out of the rotation for good, and the primary held that connection open. Once every worker
// had met it, the primary held every new connection unanswered until it was restarted (a review of
// 2026-11-30, with an open-files limit of 64: test/cluster-open-files.test.ts). Seen on Node 20.20;
// the later child_process.js and round_robin_handle.js read the same (no resend for net.Native).
//
// Here the worker answers for it as taken (`accepted: true`): the primary closes its copy, which
// drops the connection, as one process out of descriptors drops those it cannot take (libuv accepts
// and closes them), and hands this worker the next one. Not `accepted: false`, which the primary
// takes as "give it to another worker": with every worker's table full it would go round them
// as fast as the messages do.
//
// This reads Node's own messages between its processes ('internalMessage', NODE_HANDLE,
// NODE_CLUSTER), which its documentation says may change: a message of any other form is left alone,
// and with it the worker is as it was before.

interface HandleMessage {
  cmd: 'NODE_HANDLE';
  msg: { cmd: 'NODE_CLUSTER'; act: 'newconn'; seq: number };
}

function isLostConnection(m: unknown, handle: unknown): m is HandleMessage {
  if (handle) return false;
  const outer = m as { cmd?: unknown; msg?: { cmd?: unknown; act?: unknown; seq?: unknown } } | null;
  return outer?.cmd === 'NODE_HANDLE' && outer.msg?.cmd === 'NODE_CLUSTER' && outer.msg.act === 'newconn' && typeof outer.msg.seq === 'number';
}

/** In a worker: answers for each connection handed on without its descriptor. */
export function answerForLostConnections(): void {
  (process as NodeJS.EventEmitter).on('internalMessage', (m: unknown, handle: unknown) => {
    if (!isLostConnection(m, handle) || !process.connected) return;
    process.send!({ cmd: 'NODE_CLUSTER', ack: m.msg.seq, accepted: true }, undefined, undefined, () => {});
  });
}
