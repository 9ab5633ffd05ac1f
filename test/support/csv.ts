// Test support: a strict RFC 4180 reader, to check what the CSV writers produce.
import assert from 'node:assert/strict';

/**
 * Strict RFC 4180: records end with CRLF (the last one too); fields are bare or quoted with ""
 * escapes. `recordEnd` reads another line end the same strict way (LibreOffice writes LF).
 */
export function parseCsv(text: string, recordEnd = '\r\n'): string[][] {
  const records: string[][] = [];
  let i = 0;
  while (i < text.length) {
    const record: string[] = [];
    for (;;) {
      let field = '';
      if (text[i] === '"') {
        i++;
        for (;;) {
          const q = text.indexOf('"', i);
          assert.ok(q >= 0, 'an unterminated quoted field');
          field += text.slice(i, q);
          if (text[q + 1] === '"') {
            field += '"';
            i = q + 2;
          } else {
            i = q + 1;
            break;
          }
        }
      } else {
        const m = /^[^",\r\n]*/.exec(text.slice(i))!;
        field = m[0];
        i += field.length;
      }
      record.push(field);
      if (text[i] === ',') {
        i++;
        continue;
      }
      assert.equal(text.slice(i, i + recordEnd.length), recordEnd, `a record must end with ${JSON.stringify(recordEnd)} (at offset ${i}: ${JSON.stringify(text.slice(i, i + 20))})`);
      i += recordEnd.length;
      break;
    }
    records.push(record);
  }
  return records;
}
