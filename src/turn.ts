// What a busy server does once per event-loop turn rather than once per request: the turn's log
// lines are written together (log-output.ts), and its answers are sent together (app.ts).

/**
 * Gathers what one event-loop turn gives it and hands it to `hand` together, in order, at the
 * turn's end (a `setImmediate`, after the turn's I/O callbacks) or at flush().
 */
export function eachTurn<T>(hand: (items: T[]) => void): { add(item: T): void; flush(): void } {
  let items: T[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (items.length === 0) return;
    const turn = items;
    items = [];
    hand(turn);
  };
  return {
    add(item) {
      items.push(item);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
