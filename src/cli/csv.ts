// How Almoner writes CSV, for every file it writes: RFC 4180.

/** csv-stringify's options for RFC 4180: CRLF record ends, and a field holding CR or LF quoted (csv-stringify quotes only one holding the whole CRLF). */
export const RFC_4180 = { record_delimiter: 'windows', quoted_match: /[\r\n]/ } as const;

/**
 * A cell for a spreadsheet: a formula's opener (=, +, - or @, or a tab or CR: OWASP's "CSV
 * injection") with an apostrophe before it, so that the spreadsheet shows it as text, at the cell's
 * start and after a separator within it (`;`, `,`, a tab or a line break: a spreadsheet set to split
 * on `;`, as in German or French Excel, starts a cell there; a review). A donor's name is whatever a
 * public form was sent: `=HYPERLINK(…)` was a live link in the operator's spreadsheet until 2026-11-29.
 */
export const asText = (cell: string): string => cell.replace(/(?<=^|[;,\t\r\n])(?=[=+\-@\t\r])/g, "'");
