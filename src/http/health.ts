import type { CronqHealth } from '../cronq.ts';

/** The `/healthz` body; `status` is 'ok' exactly when no part is false. */
export interface HealthReport {
  status: 'ok' | 'unavailable';
  /** The database answers: the engine's statements succeed, or a ping just did. */
  database: boolean;
  /** The claim loop went round recently; null when this process runs no workers. */
  workers: boolean | null;
  /** The scheduler runs; null when this process runs none. */
  scheduler: boolean | null;
  /** Milliseconds since the claim loop last went round (null without workers). */
  claimLoopAgeMs: number | null;
  /** Milliseconds since a database statement (or health ping) last succeeded. */
  databaseOkAgeMs: number;
}

export interface HealthInputs {
  /** The engine's own view (cronq.health()). */
  health(): CronqHealth;
  /** Asks the database directly (SELECT 1); resolves false when it does not answer. */
  ping(): Promise<boolean>;
  /** The claim loop's poll interval: it goes round at least this often. */
  pollMs: number;
  now?: () => number;
}

/** Engine statements this recent vouch for the database without a ping. */
export const DATABASE_FRESH_MS = 10_000;
/** A health ping slower than this counts as the database being down. */
export const PING_TIMEOUT_MS = 2_000;

/** How long the claim loop may go without a round and still count as alive: max(3 × poll, 5 s). */
export function claimLoopLimitMs(pollMs: number): number {
  return Math.max(3 * pollMs, 5_000);
}

/**
 * Decides what `/healthz` says. Database: false while the engine's statements are
 * failing; true when one succeeded in the last DATABASE_FRESH_MS; otherwise (an idle
 * scheduler-only process runs few statements) a ping decides, at most one in flight and
 * bounded by PING_TIMEOUT_MS, and a successful one vouches for the next
 * DATABASE_FRESH_MS. Workers: started, not stopping, and the claim loop went round
 * within claimLoopLimitMs. Scheduler: started and not stopping.
 */
export class HealthCheck {
  private lastPingOkAt = 0;
  private pinging: Promise<boolean> | null = null;
  private readonly now: () => number;

  constructor(private readonly inputs: HealthInputs) {
    this.now = inputs.now ?? Date.now;
  }

  async report(): Promise<HealthReport> {
    const h = this.inputs.health();
    const now = this.now();
    const lastOk = Math.max(h.databaseLastOkAt, this.lastPingOkAt);
    let database = h.database;
    if (database && now - lastOk > DATABASE_FRESH_MS) database = await this.ping();
    const claimLoopAgeMs = h.lastClaimLoopAt === null ? null : Math.max(0, now - h.lastClaimLoopAt);
    const workers = h.workers === null ? null : h.workers && claimLoopAgeMs !== null && claimLoopAgeMs <= claimLoopLimitMs(this.inputs.pollMs);
    const scheduler = h.scheduler;
    const ok = database && workers !== false && scheduler !== false;
    return {
      status: ok ? 'ok' : 'unavailable',
      database,
      workers,
      scheduler,
      claimLoopAgeMs,
      databaseOkAgeMs: Math.max(0, this.now() - Math.max(h.databaseLastOkAt, this.lastPingOkAt)),
    };
  }

  private ping(): Promise<boolean> {
    this.pinging ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS)));
      try {
        const ok = await Promise.race([this.inputs.ping().catch(() => false), timeout]);
        if (ok) this.lastPingOkAt = this.now();
        return ok;
      } finally {
        clearTimeout(timer);
        this.pinging = null;
      }
    })();
    return this.pinging;
  }
}
