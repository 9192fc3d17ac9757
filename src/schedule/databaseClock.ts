import { formatDuration } from '../duration.ts';
import type { Logger } from '../logger.ts';
import { sleep } from '../runtime/wakeup.ts';
import { sleepUntilBy, type Clock } from './clock.ts';

/** How often the database clock is read again. */
export const CLOCK_SYNC_EVERY_MS = 60_000;
/** How soon it is read again while the best reading so far took longer than PRECISE_ROUND_TRIP_MS. */
const IMPRECISE_RESYNC_MS = 1_000;
/** A precise reading older than this gives way to any new one, however slow (a carried clock drifts, and stops in a suspend). */
const STALE_READING_MS = 10 * 60_000;
/** A reading whose round trip took at most this long is precise enough to keep until the next sync. */
const PRECISE_ROUND_TRIP_MS = 1_000;
/** An offset from this host's clock at least this large is logged as `clock_skew` (warn)… */
export const CLOCK_SKEW_WARN_MS = 2_000;
/** …and its end, once it is below this, as `clock_skew_cleared` (no line per jitter around the threshold). */
export const CLOCK_SKEW_CLEAR_MS = 1_000;

export interface DatabaseClockOptions {
  /** The database's clock (store.now()). */
  readNow: () => Promise<Date>;
  log: Logger;
  /** This host's wall clock, epoch ms: only to report how far it is off (default Date.now; tests skew it). */
  wallNow?: () => number;
  /** A clock that never steps, ms (default performance.now; tests drive it). */
  monotonicNow?: () => number;
  everyMs?: number;
}

/**
 * The scheduler's clock on a daemon: the database's time, carried forward between
 * readings by a monotonic clock (performance.now), never by this host's wall clock.
 * Every daemon then decides which ticks are due by one clock, the one leases and
 * heartbeats already use: a host whose clock runs ahead, or is stepped (by NTP, by hand)
 * forward or back between readings, can never fan out or record as skipped a tick still
 * to come by the database's clock (its period key would be taken, and the real tick
 * would find it taken and enqueue nothing), and a host behind never ticks late.
 *
 * A reading is the database's `UTC_TIMESTAMP(6)` placed at the end of its round trip,
 * so the clock may lag the database's by up to that round trip but never leads it.
 * `sync()` reads once (see there for which reading is kept); `run(signal)`
 * reads every `everyMs` (every second while no precise reading was had) until aborted,
 * keeping the last reading through a failed one. The wall clock's offset from the
 * database's is logged as `clock_skew` (warn) once it reaches CLOCK_SKEW_WARN_MS (again
 * when it grows by that much more, or changes sign), and as `clock_skew_cleared` once
 * under CLOCK_SKEW_CLEAR_MS.
 */
export class DatabaseClock implements Clock {
  /** The database's clock minus this host's wall clock at the last reading, ms. */
  offsetMs = 0;
  /** The round trip of the reading in use, ms (Infinity before the first). */
  roundTripMs = Number.POSITIVE_INFINITY;
  /** The reading in use: the database's epoch ms at `anchorMonotonic`. */
  private anchorDb = 0;
  private anchorMonotonic = 0;
  private warnedAt: number | null = null;
  /** The waits of sleepUntil calls in progress, measured again when a reading moves the clock. */
  private readonly sleepers = new Set<() => void>();
  private readonly wallNow: () => number;
  private readonly monotonicNow: () => number;

  constructor(private readonly options: DatabaseClockOptions) {
    this.wallNow = options.wallNow ?? Date.now;
    this.monotonicNow = options.monotonicNow ?? (() => performance.now());
    // Until the first reading: this host's clock.
    this.anchorDb = this.wallNow();
    this.anchorMonotonic = this.monotonicNow();
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  sleepUntil(at: Date, signal: AbortSignal): Promise<void> {
    return sleepUntilBy(() => this.nowMs(), at, signal, (rearm) => {
      this.sleepers.add(rearm);
      return () => this.sleepers.delete(rearm);
    });
  }

  /**
   * Reads the database clock once. Returns whether the reading is now the one in use: it
   * is unless the one in use was precise and this one is not (its round trip over 1 s),
   * and that one is still recent (under STALE_READING_MS old). A reading that is not a
   * time throws and changes nothing. The sleepers measure their waits again at once.
   */
  async sync(): Promise<boolean> {
    const sentAt = this.monotonicNow();
    const db = (await this.options.readNow()).getTime();
    const receivedAt = this.monotonicNow();
    const wall = this.wallNow();
    if (!Number.isFinite(db) || !Number.isFinite(sentAt) || !Number.isFinite(receivedAt)) {
      throw new Error('the database clock read as no valid time; the last reading stands');
    }
    const roundTrip = receivedAt - sentAt;
    const inUseAge = receivedAt - this.anchorMonotonic;
    if (roundTrip > PRECISE_ROUND_TRIP_MS && roundTrip >= this.roundTripMs && inUseAge < STALE_READING_MS) return false;
    // Placed at its receipt: the server read its clock at some moment of the round trip,
    // so the clock carried from here is behind the database's by at most the round trip,
    // never ahead of it (a tick fires late by that at most, never early).
    this.anchorMonotonic = receivedAt;
    this.anchorDb = db;
    this.roundTripMs = roundTrip;
    this.offsetMs = Math.round(db - wall);
    this.report();
    for (const rearm of [...this.sleepers]) rearm();
    return true;
  }

  /** Reads again every `everyMs` (every second while the reading is imprecise) until `signal` aborts. Never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const every = this.options.everyMs ?? CLOCK_SYNC_EVERY_MS;
    while (!signal.aborted) {
      await sleep(this.roundTripMs > PRECISE_ROUND_TRIP_MS ? Math.min(every, IMPRECISE_RESYNC_MS) : every, signal);
      if (signal.aborted) return;
      // An unreachable database is reported by the parts that need it; the last reading stands.
      await this.sync().catch(() => undefined);
    }
  }

  private nowMs(): number {
    return this.anchorDb + (this.monotonicNow() - this.anchorMonotonic);
  }

  private report(): void {
    const off = Math.abs(this.offsetMs);
    const worse = this.warnedAt === null || Math.sign(this.offsetMs) !== Math.sign(this.warnedAt) || off >= Math.abs(this.warnedAt) + CLOCK_SKEW_WARN_MS;
    if (off >= CLOCK_SKEW_WARN_MS && worse) {
      this.warnedAt = this.offsetMs;
      this.options.log.warn(
        { event: 'clock_skew', offset_ms: this.offsetMs },
        `this host's clock is ${formatDuration(Math.round(off / 1000) * 1000)} ${this.offsetMs > 0 ? 'behind' : 'ahead of'} the database's; schedules tick by the database's clock`,
      );
    } else if (off < CLOCK_SKEW_CLEAR_MS && this.warnedAt !== null) {
      this.warnedAt = null;
      this.options.log.info({ event: 'clock_skew_cleared', offset_ms: this.offsetMs }, "this host's clock agrees with the database's again");
    }
  }
}
