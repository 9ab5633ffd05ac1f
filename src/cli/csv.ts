// How Almoner writes CSV, for every file it writes: RFC 4180.

/** csv-stringify's options for RFC 4180: CRLF record ends, and a field holding CR or LF quoted (csv-stringify quotes only one holding the whole CRLF). */
export const RFC_4180 = { record_delimiter: 'windows', quoted_match: /[\r\n]/ } as const;
