// LibreOffice Calc, headless, opening .ods files as a person's spreadsheet would: Debian's
// libreoffice-calc (`soffice`), which CI installs. SOFFICE_PATH overrides where it is.
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
    await new Promise<void>((resolve, reject) =>
      execFile(SOFFICE_PATH, args, { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(`soffice failed: ${err.message}\n${stdout}\n${stderr}`)) : resolve())),
    );
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
    await new Promise<void>((resolve, reject) =>
      execFile(SOFFICE_PATH, args, { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(`soffice failed: ${err.message}\n${stdout}\n${stderr}`)) : resolve())),
    );
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
