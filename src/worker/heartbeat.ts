import type { Db } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import { deleteSilentDaemons, heartbeatDaemon, markDaemonStopped, registerDaemon, type DaemonRecord } from '../store/daemons.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import { sleep } from '../runtime/wakeup.ts';

/** How often silent daemons' rows are cleared (by each daemon; the DELETE is idempotent). */
const CLEANUP_EVERY_MS = 3_600_000;

/**
 * Keeps this daemon's `cronq_daemons` row current while its workers run: registered
 * by `start` (awaited, so its kinds count as served before it claims), heart-beaten every
 * `everyMs` from then on, marked stopped by `stop`. A failed heartbeat is reported
 * through DbHealth and retried at the next beat; it never ends the loop. Rows silent
 * for a day are deleted at start and hourly.
 */
export class DaemonHeartbeat {
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    private readonly options: { db: Db; log: Logger; health: DbHealth; record: DaemonRecord; everyMs: number },
  ) {}

  async start(): Promise<void> {
    if (this.loop) return;
    const { db, record, log } = this.options;
    await registerDaemon(db, record);
    await deleteSilentDaemons(db);
    log.info({ event: 'daemon_registered', daemon: record.id, kinds: record.kinds.length, queues: record.queues }, 'daemon registered');
    this.loop = this.beat();
  }

  /** Ends the loop, then records the clean stop (best effort: a stop must not hang on it). */
  async stop(): Promise<void> {
    if (!this.loop) return;
    this.stopping.abort();
    await this.loop;
    try {
      await markDaemonStopped(this.options.db, this.options.record.id);
    } catch (error) {
      this.options.health.trouble(error, 'heartbeat');
    }
  }

  private async beat(): Promise<void> {
    const { db, record, health, everyMs } = this.options;
    let cleanedAt = Date.now(); // start() just did
    for (;;) {
      await sleep(everyMs, this.stopping.signal);
      if (this.stopping.signal.aborted) return;
      const sentAt = Date.now();
      try {
        await heartbeatDaemon(db, record);
        if (sentAt - cleanedAt >= CLEANUP_EVERY_MS) {
          await deleteSilentDaemons(db);
          cleanedAt = sentAt;
        }
        health.ok(sentAt);
      } catch (error) {
        health.trouble(error, 'heartbeat');
      }
    }
  }
}
