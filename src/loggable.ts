// What of an error goes to the log, wherever it is logged (the HTTP errors, the server, the store's
// hourly purge, the primary process).

/**
 * What of an error goes to the log: never the whole object, whose extra fields (a PostgreSQL
 * error's `detail`, say) can quote the row, and so a donor's personal data.
 */
export function loggable(err: unknown) {
  // Without a prototype: pino's serializer of `err` names an error-like object's type after its
  // constructor, and logged every error as "type":"Object" (before 2026-11-28); without one it
  // keeps this `type`: the error's name, or its class's where it has none of its own (ConfigError).
  const shaped = Object.create(null) as object;
  if (!(err instanceof Error)) return Object.assign(shaped, { type: typeof err, message: String(err) });
  const type = err.name === 'Error' ? err.constructor.name : err.name;
  return Object.assign(shaped, { type, code: (err as { code?: unknown }).code, message: err.message, stack: err.stack });
}
