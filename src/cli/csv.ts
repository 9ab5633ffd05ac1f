// How Almoner writes CSV, for every file it writes: RFC 4180.

/** csv-stringify's options for RFC 4180: CRLF record ends, and a field holding CR or LF quoted (csv-stringify quotes only one holding the whole CRLF). */
export const RFC_4180 = { record_delimiter: 'windows', quoted_match: /[\r\n]/ } as const;

/**
 * A cell for a spreadsheet: one that would start a formula (=, +, - or @, or a tab or CR before
 * one: OWASP's "CSV injection") with an apostrophe first, so that the spreadsheet shows it as text.
 * A donor's name is whatever a public form was sent: `=HYPERLINK(…)` was a live link in the
 * operator's spreadsheet until 2026-11-29.
 */
export const asText = (cell: string): string => (/^[=+\-@\t\r]/.test(cell) ? `'${cell}` : cell);
