import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

export type LogEvent = Record<string, any> & { event?: string };

/**
 * A real pino logger whose lines tests can wait on: `waitFor('job_completed', 3)`
 * resolves once three such events were logged, instead of sleeping and hoping.
 */
export class EventLog {
  readonly events: LogEvent[] = [];
  private waiters: Array<() => void> = [];
  readonly logger: Logger;

  constructor(level = 'debug') {
    const sink = new Writable({
      write: (chunk, _enc, done) => {
        for (const line of chunk.toString().split('\n')) {
          if (line.trim()) this.events.push(JSON.parse(line));
        }
        for (const wake of this.waiters.splice(0)) wake();
        done();
      },
    });
    this.logger = pino({ level }, sink);
  }

  named(event: string): LogEvent[] {
    return this.events.filter((e) => e.event === event);
  }

  /** Resolves with the matching events once at least `count` exist; rejects after `timeoutMs`. */
  async waitFor(event: string, count = 1, timeoutMs = 15_000, where: (e: LogEvent) => boolean = () => true): Promise<LogEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.named(event).filter(where);
      if (found.length >= count) return found;
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${count} × ${event}; saw ${found.length}. Events: ${this.events.map((e) => e.event).join(',')}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 100);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/** Polls `check` until it returns a truthy value (for state only the database can tell). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
