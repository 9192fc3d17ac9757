import pino, { type Logger as PinoLogger } from 'pino';
import { UsageError } from './errors.ts';
import { shownInLine, shownText } from './shownText.ts';

/** A pino logger: what cronq logs through (createCronq's `logger`, a handler's `ctx.log`). */
export type Logger = PinoLogger;

/** The levels LOG_LEVEL accepts (pino's), most severe first. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * LOG_LEVEL's value as a level: one of LOG_LEVELS in any case, 'info' when unset or
 * empty; anything else a UsageError naming LOG_LEVEL and the accepted values (a typo must
 * not quietly log at another level).
 */
export function parseLogLevel(value: string | undefined): string {
  if (value === undefined || value === '') return 'info';
  const level = value.toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new UsageError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got '${shownInLine(value)}')`);
  }
  return level;
}

/** The loggers cronq made itself (createLogger): libraryLogger takes them as they are. */
const OWN_LOGGERS = new WeakSet<Logger>();

/**
 * The root logger: pino JSON lines, one per event, each with an `event` field.
 * Payloads, tokens and passwords are never logged (they are not passed in).
 * `destination` 1 is stdout (the daemon), 2 is stderr (commands whose stdout is their result).
 * `level` defaults to LOG_LEVEL; an unknown one is a UsageError (parseLogLevel).
 */
export function createLogger(level = process.env.LOG_LEVEL, destination: 1 | 2 = 1): Logger {
  const logger = pino(
    {
      level: parseLogLevel(level),
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ['payload', '*.payload', 'password', '*.password', 'token', '*.token'], censor: '[redacted]' },
    },
    // Synchronous writes: the last lines before an exit (worker_stopped) must not be lost.
    pino.destination({ dest: destination, sync: true }),
  );
  OWN_LOGGERS.add(logger);
  return logger;
}

/**
 * createCronq's own logger when the app gives none: at LOG_LEVEL, or at info when LOG_LEVEL
 * holds a level cronq does not know. An app's process may use LOG_LEVEL for its own
 * logger, in that logger's words ('verbose', 'warning'): that must not stop the app, so it
 * is said once, as the logger's first line (`log_level_unknown`), not thrown. The daemon
 * (`cronq`), whose variable it is, refuses it (parseLogLevel).
 */
function defaultLibraryLogger(value: string | undefined): Logger {
  try {
    return createLogger(value);
  } catch {
    const log = createLogger('info');
    log.warn(
      { event: 'log_level_unknown', log_level: shownText(value ?? '') },
      `LOG_LEVEL is not one of ${LOG_LEVELS.join(', ')}; cronq logs at info (pass a logger to createCronq to choose)`,
    );
    return log;
  }
}

/** A logger that drops everything (library default when the caller passes none). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** The methods cronq calls on a logger: a logger lacking any of them is refused up front. */
const REQUIRED_METHODS = ['child', 'debug', 'info', 'warn', 'error', 'isLevelEnabled'] as const;

/**
 * The logger createCronq uses for its `logger` option: none given, one like the daemon's
 * (pino JSON lines on stdout, level from LOG_LEVEL, default info), so a failing job is
 * never silent (an unknown LOG_LEVEL: info, said once); `false`, nothing; one createLogger
 * made (the daemon's, the CLI's), as it is; else the given logger, which must be
 * pino-compatible, behind guardLogger.
 * Throws UsageError naming the missing methods (a `console` has no `child` or
 * `isLevelEnabled`), rather than failing at the first job.
 */
export function libraryLogger(option: Logger | false | undefined): Logger {
  if (option === undefined) return defaultLibraryLogger(process.env.LOG_LEVEL);
  if (option === false) return silentLogger();
  // The daemon's and the CLI's: pino as configured here, no guard to pay for on every call.
  if (OWN_LOGGERS.has(option)) return option;
  const missing = missingMethods(option);
  if (missing.length > 0) {
    throw new UsageError(
      `logger must be pino-compatible (${REQUIRED_METHODS.join(', ')}); the one given lacks ${missing.join(', ')}: pass a pino logger, leave it out for cronq's own (JSON on stdout, LOG_LEVEL), or false for none`,
    );
  }
  return guardLogger(option);
}

/** The REQUIRED_METHODS `logger` lacks (none: it is pino-compatible). */
function missingMethods(logger: unknown): string[] {
  return REQUIRED_METHODS.filter((m) => typeof (logger as Record<string, unknown> | null)?.[m] !== 'function');
}

/** What a logger is called through: a throw from any of them is dropped (guardLogger). */
const GUARDED_METHODS = new Set<string | symbol>(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent', 'child', 'isLevelEnabled']);

/**
 * An app's logger (createCronq's option) behind a guard: an exception from a logging
 * method, `child` or `isLevelEnabled` is dropped instead of reaching the engine, where it
 * ended work midway or the process (a `job_dead` line's throw escaped the finisher as an
 * unhandled rejection), and so is a rejection of the promise a method returns (an async
 * `error()`: nothing awaits it). Node is warned once per method (process.emitWarning, code
 * CRONQ_LOGGER_ERROR): the logger cannot say it. A child that cannot be made, or is no
 * logger (lacking a REQUIRED_METHODS), is this logger; a level that cannot be read is off.
 * Each call looks the method up anew (pino swaps them as its level changes); everything
 * else reads through unchanged.
 */
function guardLogger(logger: Logger, reported = new Set<string>()): Logger {
  const report = (method: string, error: unknown) => {
    if (reported.has(method)) return;
    reported.add(method);
    let reason: string;
    try {
      reason = shownText((error instanceof Error ? `${error.name}: ${error.message}` : String(error)).split('\n')[0]);
    } catch {
      reason = 'an unreadable error';
    }
    process.emitWarning(`cronq: the logger's ${method}() threw (${reason}); cronq goes on without that line`, { code: 'CRONQ_LOGGER_ERROR' });
  };
  const wrappers = new Map<string | symbol, (...args: unknown[]) => unknown>();
  const guarded: Logger = new Proxy(logger, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function' || !GUARDED_METHODS.has(property)) return value;
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        const name = String(property);
        wrapper = (...args: unknown[]) => {
          try {
            const result: unknown = (Reflect.get(target, property, target) as (...a: unknown[]) => unknown).apply(target, args);
            if (name === 'child') {
              const missing = missingMethods(result);
              if (missing.length > 0) throw new TypeError(`child() returned no logger (it lacks ${missing.join(', ')})`);
              return guardLogger(result as Logger, reported);
            }
            // An async method's failure comes later, as a rejection nothing else would handle.
            if (typeof (result as PromiseLike<unknown> | null)?.then === 'function') (result as PromiseLike<unknown>).then(undefined, (error: unknown) => report(name, error));
            return result;
          } catch (error) {
            report(name, error);
            return name === 'child' ? guarded : name === 'isLevelEnabled' ? false : undefined;
          }
        };
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
  return guarded;
}
