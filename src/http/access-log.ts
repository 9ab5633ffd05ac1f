// The access line: one JSON line per request at `info`, the line pino writes for
// `log.info({ reqId, method, route, status, ms, charity, charity_tried, client }, 'request')`, built as one template.
//
// pino builds a line by walking the object it is given, key by key, and checking each value's
// type; for this line, written for every request, that walk was most of its cost (docs/performance.md).
// The line's shape is fixed and its values are numbers and three strings, so it is put
// together directly, from the logger's own pieces (its level's prefix, its timestamp, its bindings:
// pid and hostname, its message key) and written to the logger's stream.
// test/http/request-log.test.ts holds it to pino's own line, byte for byte.
import { symbols, type Logger } from 'pino';

export interface AccessEntry {
  reqId: string;
  method: string;
  route: string;
  status: number;
  /** Milliseconds; the line gives them to a tenth. */
  ms: number;
  /** The charity's id, when the request authenticated. */
  charity: number | undefined;
  /** A 401's: the id of the charity whose username was given, when one has it (its password wrong or old, or it is disabled). */
  charityTried?: number | undefined;
  /** The client's address (the proxy's X-Forwarded-For behind TRUST_PROXY), given for a refused authentication only: see clientShown. */
  client?: string | undefined;
}

/**
 * Whether a line names its client's address: a 401 (credentials missing or wrong) or a 429 (guessing
 * throttled, or creates over their limit), so that an operator can see from the log who is guessing
 * and block them (fail2ban, a firewall); until 2026-11-30 no line named one (a security review).
 * Other lines do not: an authenticated request is traced by its charity, and an address is the
 * caller's, which for a page's form may be a person's.
 */
export const clientShown = (status: number): boolean => status === 401 || status === 429;

/** Writes an access line through `logger`'s stream at its `info` level, or undefined when `info` is off (or `logger` is not pino). */
export function accessLog(logger: unknown): ((entry: AccessEntry) => void) | undefined {
  const pino = logger as Partial<Logger> & Record<symbol, unknown>;
  if (typeof pino.isLevelEnabled !== 'function' || !pino.isLevelEnabled('info')) return undefined;
  const opening = (pino[symbols.lsCacheSym] as Record<number, string>)[pino.levels!.values.info!]!;
  const time = pino[symbols.timeSym] as () => string;
  const bindings = pino[symbols.chindingsSym] as string;
  const message = `,${JSON.stringify(pino[symbols.messageKeySym])}:"request"}\n`;
  const stream = pino[symbols.streamSym] as { write(line: string): void };
  return ({ reqId, method, route, status, ms, charity, charityTried, client }) => {
    const who =
      (charity === undefined ? '' : `,"charity":${charity}`) + (charityTried === undefined ? '' : `,"charity_tried":${charityTried}`) + (client === undefined ? '' : `,"client":${quoted(client)}`);
    stream.write(
      `${opening}${time()}${bindings},"reqId":${quoted(reqId)},"method":${quotedOften(method)},"route":${quotedOften(route)},"status":${status},"ms":${tenths(ms)}${who}${message}`,
    );
  };
}

/** Characters JSON.stringify escapes (surrogates: a lone one is escaped; a pair, left to it, comes out as it is). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A string as JSON: as it is, in quotes, unless it holds something to escape (a request id a client chose may hold `"` or `\\`). */
const quoted = (s: string): string => (ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`);

/** The few strings every line repeats (methods, routes' patterns), as JSON, each made once; bounded, as a method is the client's. */
const often = new Map<string, string>();
function quotedOften(s: string): string {
  let json = often.get(s);
  if (json === undefined) {
    json = JSON.stringify(s);
    if (often.size < 256) often.set(s, json);
  }
  return json;
}

/** A time in milliseconds, to a tenth, as JSON writes it (`12.3`, `7`), from small integers: V8 keeps their text, not that of a fraction. */
function tenths(ms: number): string {
  const whole = Math.round(ms * 10);
  const rest = whole % 10;
  return rest === 0 ? `${whole / 10}` : `${(whole - rest) / 10}.${rest}`;
}
