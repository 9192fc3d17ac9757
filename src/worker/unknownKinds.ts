import { formatDuration } from '../duration.ts';
import type { Logger } from '../logger.ts';
import type { ClaimedJob } from '../store/index.ts';
import type { WorkerStore } from './workerStore.ts';
import { HEARTBEAT_MS, UNKNOWN_KIND_GRACE_MS } from '../defaults.ts';

export const UNKNOWN_KIND_DEFAULTS = {
  /** How long a kind may go unserved before its jobs go dead. */
  graceMs: UNKNOWN_KIND_GRACE_MS,
  /** How often a daemon with workers refreshes its heartbeat_at (see DaemonHeartbeat). */
  heartbeatMs: HEARTBEAT_MS,
};

/** Bounds on how long a released job waits before it can be claimed again. */
const RETRY_MIN_MS = 1_000;
const RETRY_MAX_MS = 30_000;
/** Kinds this daemon remembers having logged (one line each); beyond that, no more lines. */
const LOGGED_KINDS_MAX = 1_000;
/** Jobs handed to live daemons that run their kind, kept out of this daemon's claims for a while. */
const PASSED_OVER_MAX = 1_000;
const PASSED_OVER_MS = 30_000;

/** What to do with a claimed job whose kind this daemon does not know. */
export type UnknownKindVerdict =
  | { dead: false; retryInMs: number; reason: string }
  | { dead: true; reason: string };

/**
 * The policy for jobs of kinds this daemon has no task for (another version's kinds
 * during a rolling deploy, or a kind no daemon runs any more).
 *
 * Such a job goes back for a daemon that knows it, its attempt restored. When a live
 * daemon serves the kind, the job is available again at once and this daemon leaves it
 * out of its own claims for 30 s (`passedOverIds`, at most 1,000 jobs; past that it is
 * held back 1–2 s instead). When none does, it is not claimable for a tenth of the time
 * the kind has gone unserved (1–30 s), so a kind that stays unserved costs ever fewer
 * claims. It goes dead only
 * when no daemon has served the kind on its queue for `graceMs`, measured from the
 * latest heartbeat of one that did, or from the job's creation when none ever did.
 * A daemon is alive while it is not stopped and was heard from within `aliveMs`.
 * Logs `job_kind_unknown` once per kind, not per claim.
 */
export class UnknownKinds {
  private readonly logged = new Set<string>();
  /** Job id → until when (Date.now()); insertion order is expiry order. */
  private readonly passedOver = new Map<number, number>();

  constructor(
    private readonly options: { graceMs: number; aliveMs: number; log: Logger },
  ) {}

  /** Reads who serves the job's kind (plain reads) and decides. */
  async judge(store: Pick<WorkerStore, 'servingOf'>, job: ClaimedJob): Promise<UnknownKindVerdict> {
    const { graceMs, aliveMs } = this.options;
    const serving = await store.servingOf({ jobId: job.id, kind: job.kind, queue: job.queue, aliveMs });
    this.logOnce(job, serving.alive);
    if (!serving.alive && serving.unservedForMs >= graceMs) {
      return { dead: true, reason: `unknown kind: no daemon has served '${job.kind}' on queue '${job.queue}' for ${formatDuration(graceMs)}` };
    }
    const jitter = 1 + Math.random();
    const retryInMs = serving.alive
      ? this.passOver(job.id) ? 0 : RETRY_MIN_MS * jitter
      : Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, serving.unservedForMs / 10) * jitter, graceMs - serving.unservedForMs + RETRY_MIN_MS);
    const reason = serving.alive
      ? `unknown kind '${job.kind}' in this daemon; released for a daemon that runs it`
      : `unknown kind '${job.kind}': no daemon runs it now; released (goes dead after ${formatDuration(graceMs)} unserved)`;
    return { dead: false, retryInMs: Math.round(retryInMs), reason };
  }

  /**
   * Jobs this daemon handed back for a live daemon that runs their kind, within the
   * last 30 s: its claims leave them out (the claim's excludeIds, store/claims.ts).
   */
  passedOverIds(now = Date.now()): number[] {
    for (const [id, until] of this.passedOver) {
      if (until > now) break;
      this.passedOver.delete(id);
    }
    return [...this.passedOver.keys()];
  }

  /** Remembers a job to leave out of claims; false when the memory is full. */
  private passOver(id: number): boolean {
    this.passedOverIds();
    if (this.passedOver.size >= PASSED_OVER_MAX) return false;
    this.passedOver.delete(id); // re-inserted last: the order stays the expiry order
    this.passedOver.set(id, Date.now() + PASSED_OVER_MS);
    return true;
  }

  private logOnce(job: ClaimedJob, servedElsewhere: boolean): void {
    if (this.logged.has(job.kind) || this.logged.size >= LOGGED_KINDS_MAX) return;
    this.logged.add(job.kind);
    this.options.log.warn(
      { event: 'job_kind_unknown', kind: job.kind, queue: job.queue, job_id: job.id, served_elsewhere: servedElsewhere, grace_ms: this.options.graceMs },
      servedElsewhere
        ? 'jobs of a kind this daemon does not know: released for the daemons that run it'
        : 'jobs of a kind no running daemon knows: released, and dead once unserved for the grace period',
    );
  }
}
