import type { Logger } from '../logger.ts';
import type { DaemonRecord } from '../store/index.ts';
import type { HeartbeatStore } from './workerStore.ts';
import type { DbHealth } from '../runtime/dbHealth.ts';
import { sleep } from '../runtime/wakeup.ts';

/** How often silent daemons' rows are cleared (by each daemon; the DELETE is idempotent). */
const CLEANUP_EVERY_MS = 3_600_000;

/**
 * Keeps this daemon's `cronq_daemons` row current while its workers or its scheduler run:
 * registered by `start` (awaited, so its kinds count as served before it claims, and its
 * overlap locks can be listed in the row from its first tick), heart-beaten every
 * `everyMs` from then on, marked stopped by `stop`. A failed heartbeat is reported
 * through DbHealth and retried at the next beat; it never ends the loop. Silent rows
 * are deleted at start and hourly (deleteSilentDaemons), both best effort.
 */
export class DaemonHeartbeat {
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    private readonly options: { store: HeartbeatStore; log: Logger; health: DbHealth; record: DaemonRecord; everyMs: number },
  ) {}

  async start(): Promise<void> {
    if (this.loop) return;
    const { store, record, log } = this.options;
    await store.registerDaemon(record);
    // Best effort, like the hourly one: a start must not fail on housekeeping (nor, from
    // code, on a schema that migrate() has yet to bring up to date).
    await store.deleteSilentDaemons().catch((error: unknown) => this.options.health.backoffAfter(error, 'heartbeat'));
    log.info({ event: 'daemon_registered', daemon: record.id, kinds: record.kinds.length, queues: record.queues }, 'daemon registered');
    this.loop = this.beat();
  }

  /** Ends the loop, then records the clean stop (best effort: a stop must not hang on it). */
  async stop(): Promise<void> {
    if (!this.loop) return;
    this.stopping.abort();
    await this.loop;
    try {
      await this.options.store.markDaemonStopped(this.options.record.id);
    } catch (error) {
      this.options.health.backoffAfter(error, 'heartbeat');
    }
  }

  private async beat(): Promise<void> {
    const { store, record, health, everyMs } = this.options;
    let cleanedAt = Date.now(); // start() just did
    for (;;) {
      await sleep(everyMs, this.stopping.signal);
      if (this.stopping.signal.aborted) return;
      const sentAt = Date.now();
      try {
        await store.heartbeatDaemon(record);
        if (sentAt - cleanedAt >= CLEANUP_EVERY_MS) {
          await store.deleteSilentDaemons();
          cleanedAt = sentAt;
        }
        health.ok(sentAt);
      } catch (error) {
        health.backoffAfter(error, 'heartbeat', sentAt);
      }
    }
  }
}
