// A request's logger (request.log), made only when something logs through it.
//
// Fastify gives every request a pino child bound to its id, and making one (its bindings turned
// into JSON) cost about 1.5 µs a request here, with the garbage. Most requests never use it: at
// `warn` nothing is written for a request that goes well, and the one line per request at `info`
// is written by the app's own logger with the id in it (app.ts). So the child is made on the first
// line a request writes through it, at a level that is on, and its lines are the same as before.
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilent, Logger } from 'pino';

type LogLevel = Exclude<LevelWithSilent, 'silent'>;
type LogArguments = Parameters<FastifyBaseLogger['info']>;

class LazyRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  private get child_(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings));
  }

  private write(level: LogLevel, args: LogArguments): void {
    if (this.parent.isLevelEnabled(level)) (this.child_[level] as (...a: LogArguments) => void)(...args);
  }

  get level(): string {
    return this.#child?.level ?? this.parent.level;
  }
  set level(level: string) {
    this.child_.level = level;
  }

  fatal(...args: LogArguments): void {
    this.write('fatal', args);
  }
  error(...args: LogArguments): void {
    this.write('error', args);
  }
  warn(...args: LogArguments): void {
    this.write('warn', args);
  }
  info(...args: LogArguments): void {
    this.write('info', args);
  }
  debug(...args: LogArguments): void {
    this.write('debug', args);
  }
  trace(...args: LogArguments): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.child_.child(bindings, options);
  }
}

/**
 * Fastify's childLoggerFactory. Without a logger (Fastify's silent stand-in, not pino), and for a
 * route with a log level or serializers of its own (Almoner has none), the child is made at once,
 * as Fastify would make it.
 */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  const pino = typeof (logger as Partial<Logger>).isLevelEnabled === 'function';
  if (!pino || options.level !== undefined || options.serializers !== undefined) return logger.child(bindings, options);
  return new LazyRequestLogger(logger as Logger, bindings);
}
