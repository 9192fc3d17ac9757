import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import type { Logger } from '../logger.ts';
import type { Observer } from '../observe.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import type { Clock } from './clock.ts';
import type { Schedule } from './define.ts';
import { HealthWatch } from './healthWatch.ts';
import { OverlapGuard, type ListedDaemon } from './overlapGuard.ts';
import type { SchedulerStore } from './schedulerStore.ts';
import { ScheduleTicker } from './ticker.ts';

export interface SchedulerOptions {
  store: SchedulerStore;
  clock: Clock;
  log: Logger;
  schedules: Schedule[];
  toleranceMs?: number;
  onEnqueued?: () => void;
  /** Told about every tick fanned out (default: nobody). */
  observer?: Observer;
  /** Default host:pid:random. */
  claimedBy?: string;
  /** How often schedules with `expect` are checked for being overdue (default 60 s). */
  healthCheckEveryMs?: number;
  /**
   * This daemon as its DaemonHeartbeat records it (cronq_daemons id, heartbeat interval):
   * the connections of its overlap locks are listed in that row (OverlapGuard). Null or
   * left out: listed nowhere, so never ended by another daemon as stalled.
   */
  daemon?: ListedDaemon | null;
  /**
   * The daemon's database health: a pass that loses the connection reports the outage
   * there (logged once by whoever meets it first) instead of as a schedule_error per
   * schedule per retry. Left out: every failed pass logs schedule_error.
   */
  dbHealth?: DbHealth;
}

/**
 * Runs one ScheduleTicker loop per schedule, so a slow fan-out of one schedule never
 * delays another's tick, and one HealthWatch loop for the schedules with `expect`. `stop()` aborts every loop between steps (a fan-out at once,
 * not waiting for its jobs()) and resolves once they have all returned; a fan-out cut short is
 * handed back with its lease ended and finished by the next pass of any daemon (its keys
 * make that harmless).
 */
export class Scheduler {
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  readonly tickers: ScheduleTicker[];
  /** Logs schedule_overdue / schedule_recovered for schedules with `expect`. */
  readonly health: HealthWatch;
  /** When start() ran (host clock), or null before. */
  startedAt: number | null = null;

  constructor(private readonly options: SchedulerOptions) {
    // Every ticker and the health watch listen on this one signal: past ten schedules Node
    // would print a MaxListenersExceededWarning on stderr for what is no leak.
    setMaxListeners(0, this.abort.signal);
    const claimedBy = options.claimedBy ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    const overlapGuard = new OverlapGuard({ store: options.store, log: options.log, daemon: options.daemon ?? null });
    this.tickers = options.schedules.map(
      (schedule) =>
        new ScheduleTicker(schedule, {
          store: options.store,
          clock: options.clock,
          log: options.log,
          claimedBy,
          toleranceMs: options.toleranceMs,
          onEnqueued: options.onEnqueued,
          observer: options.observer,
          overlapGuard,
          dbHealth: options.dbHealth,
        }),
    );
    this.health = new HealthWatch(options.schedules, { store: options.store, clock: options.clock, log: options.log, everyMs: options.healthCheckEveryMs });
  }

  start(): void {
    if (this.startedAt !== null) return;
    this.startedAt = Date.now();
    this.options.log.info(
      { event: 'scheduler_started', schedules: this.tickers.map((t) => t.schedule.name) },
      'scheduler started',
    );
    this.loops = [...this.tickers.map((ticker) => ticker.run(this.abort.signal)), this.health.run(this.abort.signal)];
  }

  get running(): boolean {
    return this.startedAt !== null && !this.abort.signal.aborted;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.loops);
  }
}
