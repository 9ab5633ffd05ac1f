// How Almoner writes CSV, for every file it writes: RFC 4180.

/** csv-stringify's options for RFC 4180: CRLF record ends, and a field holding CR or LF quoted (csv-stringify quotes only one holding the whole CRLF). */
export const RFC_4180 = { record_delimiter: 'windows', quoted_match: /[\r\n]/ } as const;

/**
 * A cell for a spreadsheet: a formula's opener (=, +, - or @, or a tab or CR: OWASP's "CSV
 * injection") with an apostrophe before it, so that the spreadsheet shows it as text, at the cell's
 * start and after a separator within it (`;`, `,`, a tab or a line break: a spreadsheet set to split
 * on `;`, as in German or French Excel, starts a cell there; a review). A donor's name is whatever a
 * public form was sent: `=HYPERLINK(…)` was a live link in the operator's spreadsheet until 2026-11-29.
 * For every cell, whatever its column: see asText for a text column's.
 */
export const withoutFormula = (cell: string): string => cell.replace(/(?<=^|[;,\t\r\n])(?=[=+\-@\t\r])/g, "'");

/**
 * A text column's cell for a spreadsheet: withoutFormula, and an apostrophe first on text that a
 * spreadsheet would take for a number, date, time, boolean or error rather than the text it is:
 * LibreOffice and Excel make the phone `07700900123` the number 7700900123 and the reference
 * `12345678901234567890` 1.23456789012346E+19, and keep the loss when the sheet is saved (a review).
 * Opened from CSV, an apostrophe is the cell's first character, shown, as withoutFormula's are, and
 * the cell is text (LibreOffice 7.4, measured); `="…"` would be a formula, evaluated or not as the
 * spreadsheet is set, and a value again once saved as CSV. An apostrophe already first is left so.
 */
export function asText(cell: string): string {
  const safe = withoutFormula(cell);
  return safe.startsWith("'") || !readAsValue(cell) ? safe : `'${safe}`;
}

/** A cell for a spreadsheet: a value column's (an amount, an id, a date) as written, for the spreadsheet to read as the value; a text column's as text (asText). */
export const spreadsheetCell = (cell: string, value: boolean): string => (value ? withoutFormula(cell) : asText(cell));

/**
 * Whether a spreadsheet opening CSV may read this text as a value: spaces at the ends aside (they
 * are trimmed), a boolean or an error, or text with a digit and no letters but an exponent's `e`, a
 * time's `AM`/`PM` (`a`, `p`), ISO 8601's `T` and `Z`, and month and day names, whole or cut to
 * three letters or more (`5 Jan`, Excel's `SEPT1`, `Mon 5 January`), in the languages of the
 * spreadsheets most likely to open it (a German Calc reads `5 Mai` as a date). Any other word makes
 * it text to LibreOffice and Excel alike (`12 High Street`, `SW1A 1AA`, `PAY-123`): no apostrophe.
 * Digits and punctuation alone always count (`07700 900123`, `203.0.113.7`), whether or not a
 * given spreadsheet in a given language reads them: a rule an operator can predict.
 */
export function readAsValue(cell: string): boolean {
  const text = cell.trim();
  if (text.length <= LONGEST_WORD && (BOOLEANS.has(text.toLowerCase()) || ERRORS.has(text.toUpperCase()))) return true;
  // One pass by hand: matching words with regular expressions cost several times as much, on every text cell of an export.
  let digit = false;
  let word = -1; // where the run of letters being read began
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x20;
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c > 0x7f && LETTER.test(text[i]!))) {
      if (word < 0) word = i;
      continue;
    }
    if (word >= 0) {
      if (!VALUE_WORDS.has(text.slice(word, i).toLowerCase())) return false;
      word = -1;
    }
    if ((c >= 0x30 && c <= 0x39) || (c > 0x7f && DIGIT.test(text[i]!))) digit = true;
  }
  return digit;
}

/** A letter, and a digit, of any script, read one UTF-16 unit at a time (a character beyond U+FFFF is neither: one separates words as punctuation does). */
const LETTER = /\p{L}/u;
const DIGIT = /\p{Nd}/u;

/** TRUE and FALSE as English, German, French, Spanish, Italian, Dutch and Portuguese spreadsheets spell them. */
const BOOLEANS = new Set(['true', 'false', 'wahr', 'falsch', 'vrai', 'faux', 'verdadero', 'falso', 'vero', 'waar', 'onwaar', 'verdadeiro']);

/** The longest boolean or error: longer text is neither (an export reads every text cell). */
const LONGEST_WORD = 13;

/** Excel's error values, which it reads from CSV as errors. */
const ERRORS = new Set(['#NULL!', '#DIV/0!', '#VALUE!', '#REF!', '#NAME?', '#NUM!', '#N/A', '#GETTING_DATA', '#SPILL!', '#CALC!', '#FIELD!', '#BLOCKED!', '#UNKNOWN!', '#BUSY!', '#CONNECT!']);

/** Letters a number or time holds: an exponent (1e5), AM/PM (10AM, 10 p), ISO 8601's T and Z; German weekdays' two-letter names, and März's and maart's. */
const VALUE_LETTERS = new Set(['e', 'a', 'p', 'am', 'pm', 't', 'z', 'mo', 'di', 'mi', 'do', 'fr', 'sa', 'so', 'mrz', 'mrt']);

/** Months and weekdays in English, German, French, Spanish, Italian and Dutch. */
const CALENDAR_NAMES = [
  ...['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'],
  ...['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'],
  ...['januar', 'jänner', 'februar', 'märz', 'mai', 'juni', 'juli', 'oktober', 'dezember'],
  ...['montag', 'dienstag', 'mittwoch', 'donnerstag', 'freitag', 'samstag', 'sonntag'],
  ...['janvier', 'février', 'mars', 'avril', 'juin', 'juillet', 'août', 'septembre', 'octobre', 'novembre', 'décembre'],
  ...['lundi', 'mardi', 'mercredi', 'jeudi', 'vendredi', 'samedi', 'dimanche'],
  ...['enero', 'febrero', 'marzo', 'abril', 'mayo', 'junio', 'julio', 'agosto', 'septiembre', 'setiembre', 'octubre', 'noviembre', 'diciembre'],
  ...['lunes', 'martes', 'miércoles', 'jueves', 'viernes', 'sábado', 'domingo'],
  ...['gennaio', 'febbraio', 'aprile', 'maggio', 'giugno', 'luglio', 'settembre', 'ottobre', 'dicembre'],
  ...['lunedì', 'martedì', 'mercoledì', 'giovedì', 'venerdì', 'sabato', 'domenica'],
  ...['januari', 'februari', 'maart', 'mei', 'augustus'],
  ...['maandag', 'dinsdag', 'woensdag', 'donderdag', 'vrijdag', 'zaterdag', 'zondag'],
];

/** The words a value may hold: VALUE_LETTERS, and each calendar name cut to three letters or more (a set: an export reads every text cell). */
const VALUE_WORDS = new Set([...VALUE_LETTERS, ...CALENDAR_NAMES.flatMap((name) => Array.from({ length: name.length - 2 }, (_, i) => name.slice(0, i + 3)))]);
