// LibreOffice Calc, headless, opening .ods and CSV files as a person's spreadsheet would: Debian's
// libreoffice-calc (`soffice`), which CI installs. SOFFICE_PATH overrides where it is.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseCsv } from './csv.js';

export const SOFFICE_PATH = process.env.SOFFICE_PATH ?? '/usr/bin/soffice';

/** Why LibreOffice cannot be used here, or undefined when it can. CI installs it, so there it always runs. */
export const noLibreOffice: string | undefined =
  existsSync(SOFFICE_PATH) || process.env.CI ? undefined : `no LibreOffice at ${SOFFICE_PATH} (apt-get install -y libreoffice-calc, or set SOFFICE_PATH)`;

/** Runs soffice with these arguments, failing with what it printed. */
function soffice(args: readonly string[]): Promise<void> {
  return new Promise<void>((resolve, reject) =>
    execFile(SOFFICE_PATH, args, { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(`soffice failed: ${err.message}\n${stdout}\n${stderr}`)) : resolve())),
  );
}

/**
 * The first sheet of each file as LibreOffice shows its cells: converted to CSV with the cells'
 * own formats applied ("as shown": dates as DD/MM/YY, amounts with two decimals), in UTF-8.
 * Rows and columns are 0-based, as in the file: cells[12][3] is D13.
 */
export async function cellsAsShown(paths: readonly string[]): Promise<string[][][]> {
  const work = mkdtempSync(join(tmpdir(), 'almoner-soffice-'));
  try {
    // Filter options: comma, double quote, UTF-8 (76), from line 1, default cell format, default
    // language, not all text quoted, special numbers detected, contents saved as shown.
    const filter = 'csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true';
    const args = [`-env:UserInstallation=${pathToFileURL(join(work, 'profile')).href}`, '--headless', '--convert-to', filter, '--outdir', work, ...paths];
    await soffice(args);
    return paths.map((p) => {
      const csv = join(work, basename(p).replace(/\.ods$/, '.csv'));
      if (!existsSync(csv)) throw new Error(`LibreOffice wrote no ${csv}: it could not open ${p}`);
      return parseCsv(readFileSync(csv, 'utf8'), '\n');
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Each file opened and saved again by LibreOffice as .ods, as a person does who checks a schedule
 * or fills in its over-claimed amount: the copies are written into `outDir`, under the same names.
 */
export async function savedByLibreOffice(paths: readonly string[], outDir: string): Promise<string[]> {
  const work = mkdtempSync(join(tmpdir(), 'almoner-soffice-'));
  try {
    const args = [`-env:UserInstallation=${pathToFileURL(join(work, 'profile')).href}`, '--headless', '--convert-to', 'ods', '--outdir', join(work, 'out'), ...paths];
    await soffice(args);
    return paths.map((p) => {
      const saved = join(work, 'out', basename(p));
      if (!existsSync(saved)) throw new Error(`LibreOffice wrote no ${saved}: it could not open ${p}`);
      const copy = join(outDir, basename(p));
      copyFileSync(saved, copy);
      return copy;
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** A cell as LibreOffice Calc read it: its type (`string`, `float`, `date`, `boolean`, …, or `empty`), its value for a number, its formula if it is one, and the text it shows. */
export interface OpenedCell {
  type: string;
  value?: number;
  formula?: string;
  text: string;
}

/**
 * CSV files opened in LibreOffice Calc as a person opens one: UTF-8, comma-separated, with "Detect
 * special numbers" on (so dates, times, percentages and booleans are read, as Excel reads them) in
 * `language`'s conventions (a Windows language id: 2057 en-GB, 1033 en-US, 1031 de-DE, 1036 fr-FR),
 * and formulas evaluated, as LibreOffice does by default. Each file's cells, row by row, 0-based.
 */
export async function csvAsOpened(paths: readonly string[], language = 2057): Promise<OpenedCell[][][]> {
  const work = mkdtempSync(join(tmpdir(), 'almoner-soffice-'));
  try {
    // Flat OpenDocument (.fods): one XML file that says each cell's type, value and text.
    const args = [
      `-env:UserInstallation=${pathToFileURL(join(work, 'profile')).href}`,
      '--headless',
      `--infilter=CSV:44,34,76,1,,${language},false,true`,
      '--convert-to',
      'fods',
      '--outdir',
      work,
      ...paths,
    ];
    await soffice(args);
    return paths.map((p) => {
      const fods = join(work, basename(p).replace(/\.csv$/, '.fods'));
      if (!existsSync(fods)) throw new Error(`LibreOffice wrote no ${fods}: it could not open ${p}`);
      return fodsCells(readFileSync(fods, 'utf8'));
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The first sheet's cells of a flat OpenDocument spreadsheet as LibreOffice writes one (its own output, so a reading of that form is enough). */
function fodsCells(xml: string): OpenedCell[][] {
  const table = /<table:table [^>]*>([\s\S]*?)<\/table:table>/.exec(xml)?.[1] ?? assert.fail('no table in the .fods');
  const rows: OpenedCell[][] = [];
  for (const [, rowAttrs, rowBody] of table.matchAll(/<table:table-row\b([^>]*?)(?:\/>|>([\s\S]*?)<\/table:table-row>)/g)) {
    const cells: OpenedCell[] = [];
    for (const [, attrs, body] of (rowBody ?? '').matchAll(/<table:table-cell\b([^>]*?)(?:\/>|>([\s\S]*?)<\/table:table-cell>)/g)) {
      const attr = (name: string) => new RegExp(`\\b${name}="([^"]*)"`).exec(attrs!)?.[1];
      const type = attr('office:value-type') ?? 'empty';
      const value = attr('office:value');
      const text = [...(body ?? '').matchAll(/<text:p>([\s\S]*?)<\/text:p>|<text:p\/>/g)].map(([, p]) => paragraphText(p ?? '')).join('\n');
      const formula = attr('table:formula');
      const cell: OpenedCell = { type, ...(value !== undefined && { value: Number(value) }), ...(formula !== undefined && { formula: paragraphText(formula) }), text };
      const repeat = Number(attr('table:number-columns-repeated') ?? 1);
      for (let i = 0; i < Math.min(repeat, 64); i++) cells.push(cell); // a row's trailing empty cells run to column 1024
    }
    const repeat = Number(/\btable:number-rows-repeated="(\d+)"/.exec(rowAttrs!)?.[1] ?? 1);
    for (let i = 0; i < Math.min(repeat, 64); i++) rows.push(cells);
  }
  // LibreOffice ends the sheet with its empty rows: drop them.
  while (rows.length > 0 && rows.at(-1)!.every((c) => c.type === 'empty' && c.text === '')) rows.pop();
  return rows;
}

/** A text:p's text: spaces (text:s), tabs and line breaks as the characters, spans' text, entities decoded. */
function paragraphText(p: string): string {
  return p
    .replace(/<text:s(?: text:c="(\d+)")?\/>/g, (_, n: string | undefined) => ' '.repeat(Number(n ?? 1)))
    .replace(/<text:tab\/>/g, '\t')
    .replace(/<text:line-break\/>/g, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&(?:#(\d+)|#x([0-9a-fA-F]+)|(amp|lt|gt|quot|apos));/g, (_, dec: string, hex: string, name: string) =>
      dec ? String.fromCodePoint(Number(dec)) : hex ? String.fromCodePoint(parseInt(hex, 16)) : { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }[name]!,
    );
}
