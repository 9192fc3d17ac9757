import type { Logger } from '../logger.ts';
import { shownText } from '../shownText.ts';

/** UTF-16 units of a request target a log line shows (a target may be 16 KB). */
export const LOGGED_PATH_MAX = 120;

/** A request target as a log line shows it: its first LOGGED_PATH_MAX units, then `…`. */
export function loggedPath(target: string | undefined): string {
  return shownText(target ?? '', LOGGED_PATH_MAX);
}

/** How many lines of one kind may be logged per window. */
export interface LogLimit {
  lines: number;
  windowMs: number;
}

/** HTTP error lines logged per minute; the rest are counted (LogBudget). */
export const HTTP_ERROR_LOG_LIMIT: LogLimit = { lines: 10, windowMs: 60_000 };

/**
 * Bounds how much one kind of log line (errors a client can cause) the daemon writes:
 * at most `limit.lines` per window, the window starting at the first line. A line past
 * that is not written but counted, and when the window ends one `summary` line at warn
 * says how many were left out (`suppressed`), so no client can make the daemon write an
 * unbounded log and the operator still learns that lines were dropped. Its one timer is
 * unref'd (it never holds the process up); `close` cancels it, writing the summary due.
 */
export class LogBudget {
  private windowStart = -Infinity;
  private logged = 0;
  private suppressed = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: Logger,
    private readonly summary: string,
    private readonly limit: LogLimit = HTTP_ERROR_LOG_LIMIT,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a line may be written now; false (and counted) when this window's lines are spent. */
  take(): boolean {
    const now = this.now();
    if (this.timer === null && now - this.windowStart >= this.limit.windowMs) {
      this.windowStart = now;
      this.logged = 0;
    }
    if (this.logged < this.limit.lines) {
      this.logged += 1;
      return true;
    }
    this.suppressed += 1;
    this.timer ??= setTimeout(() => this.flush(), Math.max(0, this.windowStart + this.limit.windowMs - now)).unref();
    return false;
  }

  /** Writes the summary due (if any) and cancels the timer. */
  close(): void {
    this.flush();
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.suppressed === 0) return;
    this.log.warn({ event: this.summary, suppressed: this.suppressed, windowMs: this.limit.windowMs }, `${this.suppressed} more such lines were not logged`);
    this.suppressed = 0;
    // The next line starts a new window.
    this.windowStart = -Infinity;
  }
}
