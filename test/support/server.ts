// Test support: a real `bin/almoner serve` process, as an operator starts it.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { BIN, childEnv, until } from './cli.js';

/** A running `bin/almoner serve` on this database, with everything it has written so far. */
export class ServerProcess {
  stdout = '';
  stderr = '';
  url = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Settles once every process writing to its stdout and stderr has ended: under WORKERS, the workers as well as the primary. */
  readonly closed: Promise<void>;
  private exitedYet = false;
  private readonly child: ChildProcess;
  /** What saying() waits for on stderr. */
  private readonly awaited: Array<{ pattern: RegExp; heard: () => void }> = [];

  constructor(databaseUrl: string, env: Record<string, string> = {}) {
    this.child = spawn(BIN, ['serve'], { env: childEnv(databaseUrl, { PORT: '0', ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (s: string) => (this.stdout += s));
    this.child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      this.stderr += s;
      for (const awaited of this.awaited.filter((a) => a.pattern.test(this.stderr))) {
        this.awaited.splice(this.awaited.indexOf(awaited), 1);
        awaited.heard();
      }
    });
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exitedYet = true;
        resolve({ code, signal });
      }),
    );
    this.closed = new Promise((resolve) => this.child.once('close', () => resolve()));
  }

  /**
   * Settles the moment stderr says `pattern` (at most `ms` from now), in the very callback that
   * reads it, where until()'s polls look up to 25 ms later: for a test that signals the server at
   * that moment.
   */
  saying(pattern: RegExp, ms: number): Promise<void> {
    if (pattern.test(this.stderr)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server did not say ${pattern} within ${ms / 1000} s\nstderr: ${this.stderr}`)), ms);
      this.awaited.push({ pattern, heard: () => (clearTimeout(timer), resolve()) });
    });
  }

  /** Waits for Fastify's "Server listening at http://127.0.0.1:NNNN" log line. */
  async listening(): Promise<this> {
    try {
      await until('the server says where it listens', 10_000, () => {
        if (this.exitedYet) assert.fail(`the server exited early\nstdout: ${this.stdout}\nstderr: ${this.stderr}`);
        const m = /Server listening at (https?:\/\/127\.0\.0\.1:\d+)/.exec(this.stdout);
        if (m) this.url = m[1]!;
        return m !== null;
      });
    } catch (err) {
      // Not left running: the test file would wait for it to the suite's timeout (a slow start on a loaded machine did so).
      this.child.kill('SIGKILL');
      throw err;
    }
    return this;
  }

  /** The process's id: under WORKERS, the primary's. */
  get pid(): number {
    return this.child.pid!;
  }

  logLines(): string[] {
    return this.stdout.split('\n').filter((line) => line !== '');
  }

  /** Stops reading the server's stdout and closes this end of its pipe, as a log reader that exits does: its writes then fail (EPIPE). */
  closeStdout(): void {
    this.child.stdout!.destroy();
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Sends the signal and waits (at most `ms`) for the process to exit. */
  stop(signal: NodeJS.Signals, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.signal(signal);
    return this.exit(ms, `of ${signal}`);
  }

  /** Waits (at most `ms`) for the process to exit; `after` says after what, in the failure. */
  async exit(ms: number, after = 'of the wait'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the server did not exit within ${ms / 1000} s ${after}`)), ms);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): void {
    if (!this.exitedYet) this.child.kill('SIGKILL');
  }
}
