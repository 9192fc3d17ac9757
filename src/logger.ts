import pino, { type Logger } from 'pino';

export type { Logger };

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * The root logger: pino JSON lines, one per event, each with an `event` field.
 * Payloads, tokens and passwords are never logged (they are not passed in).
 * `destination` 1 is stdout (the daemon), 2 is stderr (commands whose stdout is their result).
 */
export function createLogger(level = process.env.LOG_LEVEL ?? 'info', destination: 1 | 2 = 1): Logger {
  return pino(
    {
      level: LEVELS.includes(level) ? level : 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ['payload', '*.payload', 'password', '*.password', 'token', '*.token'], censor: '[redacted]' },
    },
    // Synchronous writes: the last lines before an exit (worker_stopped) must not be lost.
    pino.destination({ dest: destination, sync: true }),
  );
}

/** A logger that drops everything (library default when the caller passes none). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
