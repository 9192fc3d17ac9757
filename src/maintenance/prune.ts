/**
 * Retention: the pass that walks old done jobs and tick rows out in small batches, and
 * the loop that runs it in a daemon (the SQL is store/prune.ts).
 */
import type { Logger } from '../logger.ts';
import { uniformMs } from '../runtime/backoff.ts';
import { DB_ERROR_TEXT_MAX, errorText } from '../runtime/errorText.ts';
import { sleep } from '../runtime/wakeup.ts';
import { parseDbTime, type DbTime, type PruneTarget, type Store } from '../store/index.ts';
import { PRUNE_DEFAULTS } from '../defaults.ts';

export interface PruneOptions {
  /** Done jobs finished, and tick rows finished, more than this long ago (database clock) go. */
  olderThanMs: number;
  /** Count what would go; delete nothing. */
  dryRun?: boolean;
  /** Rows per DELETE (default 500). */
  batchSize?: number;
  /** Pause after each DELETE, so replicas and other writers keep up (default 20 ms). */
  pauseMs?: number;
  /** Rows of primary key looked at per candidate search (default 10,000). */
  scanSpan?: number;
  /** Ends a pass early, between batches. */
  signal?: AbortSignal;
}

/** What one pass did (or, dry, would do). */
export interface PruneResult {
  /** The cutoff instant, by the database clock. */
  cutoff: Date;
  /** Done jobs deleted (dry run: that would be). */
  jobs: number;
  /** Tick-ledger rows deleted (dry run: that would be). */
  ticks: number;
  /** DELETE statements run. */
  batches: number;
  /** True when nothing was deleted: the counts are what a real pass would delete. */
  dryRun: boolean;
}


/**
 * One retention pass: deletes `done` and `cancelled` jobs whose finished_at is older than the cutoff,
 * and finished tick-ledger rows older than it except each schedule's latest, in
 * batches of `batchSize` rows per autocommit DELETE with a pause between batches.
 * Never touches ready, reserved or dead jobs, dead letters, unfinished ticks or a
 * schedule's latest tick. The caller checks the retention against the schedules first
 * (checkRetention). Safe to run in several processes at once: a row deleted by one is
 * simply not counted by the other.
 */
export async function pruneOnce(store: Store, options: PruneOptions): Promise<PruneResult> {
  const cutoff = await store.cutoffBefore(options.olderThanMs);
  const result: PruneResult = { cutoff: parseDbTime(cutoff)!, jobs: 0, ticks: 0, batches: 0, dryRun: options.dryRun === true };
  if (options.dryRun) {
    result.jobs = await store.countPrunable('doneJobs', cutoff);
    result.ticks = await store.countPrunable('ticks', cutoff);
    return result;
  }
  for (const target of ['doneJobs', 'ticks'] as const) {
    const { deleted, batches } = await pruneTable(store, target, cutoff, options);
    if (target === 'doneJobs') result.jobs = deleted;
    else result.ticks = deleted;
    result.batches += batches;
  }
  return result;
}

async function pruneTable(store: Store, target: PruneTarget, cutoff: DbTime, options: PruneOptions): Promise<{ deleted: number; batches: number }> {
  const batchSize = options.batchSize ?? PRUNE_DEFAULTS.batchSize;
  const pauseMs = options.pauseMs ?? PRUNE_DEFAULTS.pauseMs;
  const span = Math.max(batchSize, options.scanSpan ?? PRUNE_DEFAULTS.scanSpan);
  let deleted = 0;
  let batches = 0;
  let pending: number[] = [];
  const flush = async () => {
    deleted += await store.deletePrunable(target, pending, cutoff);
    batches += 1;
    pending = [];
    await sleep(pauseMs, options.signal);
  };
  let after = await store.scanStart(target);
  while (after !== null && !options.signal?.aborted) {
    const through = await store.windowEnd(target, after, span);
    if (through === null) break;
    const limit = batchSize - pending.length;
    const ids = await store.findPrunable(target, { cutoff, afterId: after, throughId: through, limit });
    pending.push(...ids);
    // A full batch may have left candidates in this window: go on from its last id.
    after = ids.length === limit ? ids[ids.length - 1] : through;
    if (pending.length >= batchSize) await flush();
  }
  if (pending.length > 0) await flush();
  return { deleted, batches };
}

export interface PruneLoopOptions extends PruneOptions {
  store: Store;
  log: Logger;
  /** Time between passes (default 5 min); each wait is jittered by ±10%. */
  everyMs?: number;
}

/**
 * Runs `pruneOnce` now and then every `everyMs` until `signal` aborts, logging
 * `pruned` when a pass deleted anything and `prune_failed` (then carrying on) when one
 * failed. Never throws.
 */
export async function pruneLoop(options: PruneLoopOptions, signal: AbortSignal): Promise<void> {
  const everyMs = options.everyMs ?? PRUNE_DEFAULTS.everyMs;
  while (!signal.aborted) {
    try {
      const started = performance.now();
      const result = await pruneOnce(options.store, { ...options, dryRun: false, signal });
      if (result.jobs + result.ticks > 0) {
        options.log.info(
          {
            event: 'pruned',
            jobs: result.jobs,
            ticks: result.ticks,
            batches: result.batches,
            cutoff: result.cutoff.toISOString(),
            elapsed_ms: Math.round(performance.now() - started),
          },
          'old done jobs and tick rows pruned',
        );
      }
    } catch (error) {
      options.log.warn({ event: 'prune_failed', error: errorText(error, DB_ERROR_TEXT_MAX) }, 'pruning failed; trying again next time');
    }
    await sleep(uniformMs(everyMs * 0.9, everyMs * 1.1), signal);
  }
}
