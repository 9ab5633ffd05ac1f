// What bin/almoner kept of the signals that came while `serve` started, before the server (or the
// primary of its workers) had handlers of its own: its first lines count them, for these to hand on.

/** The SIGHUPs bin/almoner counted from its first line, for `serve` (undefined when the server was started otherwise). */
export const hangupsBeforeStart = (): number => (globalThis as Record<symbol, { count: number } | undefined>)[Symbol.for('almoner.hangupsBeforeStart')]?.count ?? 0;

interface StopBeforeStart {
  signal: NodeJS.Signals | undefined;
  listeners: Array<[NodeJS.Signals, () => void]>;
}

/**
 * The SIGTERM or SIGINT that came while `serve` started, if one did, for the caller to stop on now
 * that it has its own handlers: bin/almoner's are removed here. Call it just after installing them,
 * in the same turn: a signal Node has received but not yet handed to a listener then reaches the
 * caller's. Removed first, the last listener's removal stopped Node watching for the signal, and one
 * pending was lost (a server went on serving, its SIGTERM gone: seen here in a trial).
 */
export function takeStopBeforeStart(): NodeJS.Signals | undefined {
  const kept = (globalThis as Record<symbol, StopBeforeStart | undefined>)[Symbol.for('almoner.stopBeforeStart')];
  if (!kept) return undefined;
  for (const [signal, listener] of kept.listeners) process.removeListener(signal, listener);
  kept.listeners = [];
  return kept.signal;
}
