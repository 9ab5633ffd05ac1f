// What of an error goes to the log, wherever it is logged (the HTTP errors, the server, the store's
// hourly purge, the primary process).

/**
 * What of an error goes to the log: never the whole object, whose extra fields (a PostgreSQL
 * error's `detail`, say) can quote the row, and so a donor's personal data.
 */
export function loggable(err: unknown) {
  if (!(err instanceof Error)) return { message: String(err) };
  return { type: err.name, code: (err as { code?: unknown }).code, message: err.message, stack: err.stack };
}
