import type { Logger } from '../logger.ts';
import { sleep } from '../runtime/wakeup.ts';
import { sleepUntilBy, type Clock } from './clock.ts';

/** How often the offset to the database clock is measured again. */
export const CLOCK_SYNC_EVERY_MS = 60_000;
/** An offset at least this large is logged as `clock_skew` (warn). */
export const CLOCK_SKEW_WARN_MS = 2_000;
/** A reading whose round trip took longer than this is too imprecise to use, and is dropped. */
const MAX_ROUND_TRIP_MS = 1_000;

export interface DatabaseClockOptions {
  /** The database's clock (store.now()). */
  readNow: () => Promise<Date>;
  log: Logger;
  /** This host's clock, epoch ms (default Date.now; tests skew it). */
  hostNow?: () => number;
  everyMs?: number;
}

/**
 * The scheduler's clock on a daemon: the database's time, read as this host's time plus
 * an offset measured against the database (the midpoint of a `UTC_TIMESTAMP(6)` round
 * trip). Every daemon then decides which ticks are due by one clock, the one leases and
 * heartbeats already use: a host whose clock runs ahead can never fan out, or record as
 * skipped, a tick that is still to come by the database's clock (its period key would
 * be taken, and the real tick would find it taken and enqueue nothing), and a host
 * behind never ticks late.
 *
 * `sync()` measures once (throws what the read throws); `run(signal)` measures every
 * `everyMs` until aborted, keeping the last offset through a failed or slow read. An
 * offset of CLOCK_SKEW_WARN_MS or more is logged once as `clock_skew` (warn) and again
 * when it changes by that much; its end is logged as `clock_skew_cleared` (info).
 */
export class DatabaseClock implements Clock {
  /** Database time minus this host's time, ms. */
  offsetMs = 0;
  /** Whether an offset has been measured. */
  synced = false;
  private warnedAt: number | null = null;
  private readonly hostNow: () => number;

  constructor(private readonly options: DatabaseClockOptions) {
    this.hostNow = options.hostNow ?? Date.now;
  }

  now(): Date {
    return new Date(this.hostNow() + this.offsetMs);
  }

  sleepUntil(at: Date, signal: AbortSignal): Promise<void> {
    return sleepUntilBy(() => this.hostNow() + this.offsetMs, at, signal);
  }

  /** Measures the offset once. Returns whether the reading was used (false: its round trip was too slow). */
  async sync(): Promise<boolean> {
    const sentAt = this.hostNow();
    const db = await this.options.readNow();
    const receivedAt = this.hostNow();
    if (receivedAt - sentAt > MAX_ROUND_TRIP_MS && this.synced) return false;
    this.offsetMs = Math.round(db.getTime() - (sentAt + receivedAt) / 2);
    this.synced = true;
    this.report();
    return true;
  }

  /** Re-measures every `everyMs` until `signal` aborts. Never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const every = this.options.everyMs ?? CLOCK_SYNC_EVERY_MS;
    while (!signal.aborted) {
      await sleep(every, signal);
      if (signal.aborted) return;
      // An unreachable database is reported by the parts that need it; the last offset stands.
      await this.sync().catch(() => undefined);
    }
  }

  private report(): void {
    const skewed = Math.abs(this.offsetMs) >= CLOCK_SKEW_WARN_MS;
    if (skewed && (this.warnedAt === null || Math.abs(this.offsetMs - this.warnedAt) >= CLOCK_SKEW_WARN_MS)) {
      this.warnedAt = this.offsetMs;
      this.options.log.warn(
        { event: 'clock_skew', offset_ms: this.offsetMs },
        `this host's clock is ${Math.abs(this.offsetMs / 1000).toFixed(1)} s ${this.offsetMs > 0 ? 'behind' : 'ahead of'} the database's; schedules tick by the database's clock`,
      );
    } else if (!skewed && this.warnedAt !== null) {
      this.warnedAt = null;
      this.options.log.info({ event: 'clock_skew_cleared', offset_ms: this.offsetMs }, "this host's clock agrees with the database's again");
    }
  }
}
