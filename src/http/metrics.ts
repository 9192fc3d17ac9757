import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Observer } from '../observe.ts';
import { COUNT_CAPS, DEAD_LETTER_COUNT_CAP, JOB_STATUSES, TICK_OUTCOMES, type ScheduleHealth, type Stats } from '../admin.ts';
import { within } from '../runtime/wakeup.ts';

/** What one scrape answers: the Prometheus text and its content type. */
export interface Scrape {
  contentType: string;
  body: string;
}

export interface MetricsOptions {
  /**
   * Reads the queue's state from the database (cronq.admin.stats). Called at most once per
   * scrape; concurrent scrapes share one call.
   */
  collect: () => Promise<Stats & { health?: ScheduleHealth[] }>;
  /** A collect slower than this counts as the database being down (default 5s). */
  collectTimeoutMs?: number;
  /** How long the oldest job running in this process has run, in seconds (0 when none; default: not reported). */
  oldestRunningJobAgeSeconds?: () => number;
}

/**
 * Most distinct `kind` label values a process keeps series for. Kinds are not bounded by
 * the daemon's tasks (`--allow-unknown-kind` enqueues any text, and such jobs go dead here
 * after the unknown-kind grace): each new one would add series for good. The first this
 * many kinds seen keep their own; the rest count under OTHER_KINDS.
 */
export const MAX_KIND_SERIES = 500;
/** The `kind` label of every kind past MAX_KIND_SERIES (no task can have this name). */
export const OTHER_KINDS = '(other kinds)';

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const LATENESS_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 3600, 86_400];

/**
 * cronq's Prometheus metrics, on a registry of its own (never prom-client's global one),
 * every name prefixed `cronq_`. As an Observer it counts what this process does (claims,
 * results, recoveries, shutdown releases, ticks); at scrape time it adds the database's
 * view (jobs by queue and status, oldest ready age, dead letters awaiting review, each
 * schedule's latest tick) from
 * one `collect` call. When that call fails or times out the scrape still answers: the
 * counters as they are, `cronq_database_up 0`, and no database gauges (absent, not stale).
 */
export class CronqMetrics implements Observer {
  readonly registry = new Registry();
  private readonly claimed: Counter;
  private readonly completed: Counter<'kind'>;
  private readonly failed: Counter<'kind' | 'retry'>;
  private readonly dead: Counter<'kind'>;
  private readonly leasesLost: Counter<'kind'>;
  private readonly leasesRecoveredTotal: Counter<'outcome'>;
  private readonly released: Counter;
  private readonly duration: Histogram<'kind'>;
  private readonly ticks: Counter<'schedule'>;
  private readonly tickEnqueued: Counter<'schedule'>;
  private readonly ticksFailed: Counter<'schedule'>;
  private readonly tickLateness: Histogram<'schedule'>;
  private readonly jobs: Gauge<'queue' | 'status'>;
  private readonly oldestReady: Gauge<'queue'>;
  private readonly deadLetters: Gauge;
  private readonly lastTickAt: Gauge<'schedule'>;
  private readonly lastTickLateness: Gauge<'schedule'>;
  private readonly lastTickOutcome: Gauge<'schedule' | 'outcome'>;
  private readonly paused: Gauge<'target' | 'name'>;
  private readonly pausesUnknownTarget: Gauge;
  private readonly pausesEmptyName: Gauge;
  private readonly databaseUp: Gauge;
  private readonly overdue: Gauge<'schedule'>;
  private readonly lastSuccessAt: Gauge<'schedule'>;
  /** The kinds that have series of their own (MAX_KIND_SERIES at most). */
  private readonly kindsLabelled = new Set<string>();
  /** The scrape in flight (collection and rendering), which concurrent scrapes share. */
  private scraping: Promise<Scrape> | null = null;
  /** The collect call in flight, until it settles: a scrape that gave up on it at the bound does not end it. */
  private collecting: Promise<Stats & { health?: ScheduleHealth[] }> | null = null;

  constructor(private readonly options: MetricsOptions) {
    const registers = [this.registry];
    this.claimed = new Counter({ name: 'cronq_jobs_claimed_total', help: 'Jobs claimed by this process.', registers });
    this.completed = new Counter({
      name: 'cronq_jobs_completed_total',
      help: 'Jobs this process marked done, by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.failed = new Counter({
      name: 'cronq_jobs_failed_total',
      help: 'Handler failures recorded by this process, by kind; retry="false" when the job went dead.',
      labelNames: ['kind', 'retry'],
      registers,
    });
    this.dead = new Counter({
      name: 'cronq_jobs_dead_total',
      help: 'Jobs this process moved to dead after a failure, by kind (lease-expiry deaths: cronq_leases_recovered_total{outcome="dead"}).',
      labelNames: ['kind'],
      registers,
    });
    this.leasesLost = new Counter({
      name: 'cronq_leases_lost_total',
      help: 'Running jobs whose lease was lost and whose result was discarded, by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.leasesRecoveredTotal = new Counter({
      name: 'cronq_leases_recovered_total',
      help: 'Expired leases recovered by this process: returned to ready, or dead with no attempts left.',
      labelNames: ['outcome'],
      registers,
    });
    this.released = new Counter({
      name: 'cronq_jobs_released_on_shutdown_total',
      help: 'Jobs handed back (attempt restored) during shutdown.',
      registers,
    });
    this.duration = new Histogram({
      name: 'cronq_job_duration_seconds',
      help: 'From the start of a run to its job being marked done, by kind.',
      labelNames: ['kind'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.ticks = new Counter({
      name: 'cronq_schedule_ticks_total',
      help: 'Schedule ticks fanned out by this process, by schedule.',
      labelNames: ['schedule'],
      registers,
    });
    this.tickEnqueued = new Counter({
      name: 'cronq_schedule_jobs_enqueued_total',
      help: 'New jobs enqueued by schedule ticks of this process, by schedule.',
      labelNames: ['schedule'],
      registers,
    });
    this.ticksFailed = new Counter({
      name: 'cronq_schedule_ticks_failed_total',
      help: 'Schedule ticks this process recorded as failed (the fan-out kept failing), by schedule.',
      labelNames: ['schedule'],
      registers,
    });
    this.tickLateness = new Histogram({
      name: 'cronq_schedule_tick_lateness_seconds',
      help: 'How long after its instant a tick was fanned out, by schedule (caught-up ticks are the long tail).',
      labelNames: ['schedule'],
      buckets: LATENESS_BUCKETS,
      registers,
    });
    this.jobs = new Gauge({
      name: 'cronq_jobs',
      help: `Jobs in the database by queue and status, as of this scrape; counted up to ${COUNT_CAPS.ready} (ready, reserved) or ${COUNT_CAPS.done} (done, dead, cancelled), so a value at its cap means at least that many ('cronq stats' says whether there are more).`,
      labelNames: ['queue', 'status'],
      registers,
    });
    this.oldestReady = new Gauge({
      name: 'cronq_queue_oldest_ready_age_seconds',
      help: 'How long the oldest runnable ready job of each queue has waited (0 when none), as of this scrape.',
      labelNames: ['queue'],
      registers,
    });
    this.deadLetters = new Gauge({
      name: 'cronq_dead_letters_awaiting_review',
      help: `Dead letters not yet reviewed, as of this scrape; counted up to ${DEAD_LETTER_COUNT_CAP} (a value at the cap means at least that many; 'cronq stats' says whether there are more).`,
      registers,
    });
    this.lastTickAt = new Gauge({
      name: 'cronq_schedule_last_tick_timestamp_seconds',
      help: "The instant of each schedule's latest tick ledger row (enqueued or skipped), by any daemon, as of this scrape.",
      labelNames: ['schedule'],
      registers,
    });
    this.lastTickLateness = new Gauge({
      name: 'cronq_schedule_last_tick_lateness_seconds',
      help: "How late, by any daemon, each schedule's latest enqueued tick was fanned out, as of this scrape.",
      labelNames: ['schedule'],
      registers,
    });
    this.lastTickOutcome = new Gauge({
      name: 'cronq_schedule_last_tick_outcome',
      help: "1 for the outcome (enqueued, skipped, failed) of each schedule's latest tick ledger row, 0 for the others, as of this scrape.",
      labelNames: ['schedule', 'outcome'],
      registers,
    });
    this.paused = new Gauge({
      name: 'cronq_paused',
      help: "1 for each schedule and queue paused (cronq pause) as of this scrape; absent when not paused.",
      labelNames: ['target', 'name'],
      registers,
    });
    this.pausesUnknownTarget = new Gauge({
      name: 'cronq_pauses_unknown_target',
      help: "Pause rows whose target is none of cronq's (written from SQL with strict mode off), as of this scrape: they pause nothing; 'cronq stats' lists them, 'cronq resume --unknown-target NAME' ends one.",
      registers,
    });
    this.pausesEmptyName = new Gauge({
      name: 'cronq_pauses_empty_name',
      help: "Pause rows of a schedule or queue with an empty name (written from SQL), as of this scrape: they pause nothing; 'cronq stats' lists them as '', 'cronq resume ''' or 'cronq resume --queue ''' ends one.",
      registers,
    });
    this.overdue = new Gauge({
      name: 'cronq_schedule_overdue',
      help: "1 when a schedule with expect: { within } is overdue (a tick's jobs not all done within that time of it), else 0, as of this scrape.",
      labelNames: ['schedule'],
      registers,
    });
    this.lastSuccessAt = new Gauge({
      name: 'cronq_schedule_last_success_timestamp_seconds',
      help: "The fire time of each schedule's latest tick whose jobs are all done (absent when none among its latest ticks), as of this scrape.",
      labelNames: ['schedule'],
      registers,
    });
    this.databaseUp = new Gauge({
      name: 'cronq_database_up',
      help: '1 when this scrape could read the queue state from the database, else 0.',
      registers,
    });
    const oldestRunning = options.oldestRunningJobAgeSeconds;
    if (oldestRunning) {
      // Read at scrape time from this process, whether or not the database answers.
      new Gauge({
        name: 'cronq_oldest_running_job_age_seconds',
        help: 'How long the oldest job running in this process has run (0 when none); a handler past its timeout no longer counts.',
        registers,
        collect() {
          this.set(oldestRunning());
        },
      });
    }
    for (const outcome of ['returned', 'dead']) this.leasesRecoveredTotal.inc({ outcome }, 0);
  }

  jobClaimed(count: number): void {
    this.claimed.inc(count);
  }

  jobCompleted(kind: string, seconds: number): void {
    const label = this.kindLabel(kind);
    this.completed.inc({ kind: label });
    this.duration.observe({ kind: label }, seconds);
  }

  jobFailed(kind: string, willRetry: boolean): void {
    this.failed.inc({ kind: this.kindLabel(kind), retry: String(willRetry) });
  }

  jobDead(kind: string): void {
    this.dead.inc({ kind: this.kindLabel(kind) });
  }

  leaseLost(kind: string): void {
    this.leasesLost.inc({ kind: this.kindLabel(kind) });
  }

  /** `kind` as its series' label: itself, unless MAX_KIND_SERIES other kinds came first (OTHER_KINDS). */
  private kindLabel(kind: string): string {
    if (this.kindsLabelled.has(kind)) return kind;
    if (this.kindsLabelled.size >= MAX_KIND_SERIES) return OTHER_KINDS;
    this.kindsLabelled.add(kind);
    return kind;
  }

  leasesRecovered(returned: number, dead: number): void {
    if (returned > 0) this.leasesRecoveredTotal.inc({ outcome: 'returned' }, returned);
    if (dead > 0) this.leasesRecoveredTotal.inc({ outcome: 'dead' }, dead);
  }

  shutdownReleased(count: number): void {
    this.released.inc(count);
  }

  tick(schedule: string, latenessMs: number, enqueued: number): void {
    this.ticks.inc({ schedule });
    this.tickEnqueued.inc({ schedule }, enqueued);
    this.tickLateness.observe({ schedule }, Math.max(0, latenessMs) / 1000);
  }

  tickFailed(schedule: string): void {
    this.ticksFailed.inc({ schedule });
  }

  /**
   * Reads the database and renders every metric. Scrapes while one is in flight share it:
   * its one collect call and its one rendered body. Never rejects for a database error.
   */
  scrape(): Promise<Scrape> {
    this.scraping ??= (async () => {
      await this.refresh();
      return { contentType: this.registry.contentType, body: await this.registry.metrics() };
    })().finally(() => (this.scraping = null));
    return this.scraping;
  }

  /**
   * Waits up to collectTimeoutMs for the database's state and sets the gauges from it.
   * At most one collect call runs at a time: one still running after an earlier scrape
   * gave up on it is waited for again, never run beside a new one on the engine's pool.
   */
  private async refresh(): Promise<void> {
    let stats: (Stats & { health?: ScheduleHealth[] }) | null = null;
    try {
      this.collecting ??= this.options.collect().finally(() => (this.collecting = null));
      // Unanswered within the bound: the database gauges are left out, not stale.
      stats = (await within(this.collecting, this.options.collectTimeoutMs ?? 5_000)) ?? null;
    } catch {
      stats = null;
    }
    this.jobs.reset();
    this.oldestReady.reset();
    this.lastTickAt.reset();
    this.lastTickLateness.reset();
    this.lastTickOutcome.reset();
    this.paused.reset();
    this.overdue.reset();
    this.lastSuccessAt.reset();
    this.deadLetters.remove({}); // absent, not 0, when unknown
    this.pausesUnknownTarget.remove({});
    this.pausesEmptyName.remove({});
    this.databaseUp.set(stats ? 1 : 0);
    if (!stats) return;
    for (const q of stats.queues) {
      for (const status of JOB_STATUSES) this.jobs.set({ queue: q.queue, status }, q[status]);
      this.oldestReady.set({ queue: q.queue }, q.oldestReadyAgeSeconds ?? 0);
    }
    this.deadLetters.set(stats.deadLetters.awaitingReview);
    for (const s of stats.schedules ?? []) {
      this.lastTickAt.set({ schedule: s.schedule }, Date.parse(s.lastTick.scheduledAt) / 1000);
      for (const outcome of TICK_OUTCOMES) this.lastTickOutcome.set({ schedule: s.schedule, outcome }, s.lastTick.outcome === outcome ? 1 : 0);
      if (s.latenessMs !== null) this.lastTickLateness.set({ schedule: s.schedule }, s.latenessMs / 1000);
    }
    // A row of no known target (target '') or of no name pauses nothing, and an empty label is
    // no label to Prometheus: each is counted apart, the first's name (any text, hand-written)
    // never a label. A row with neither is counted once, as of no known target.
    const pauses = stats.pauses ?? [];
    for (const p of pauses) if (p.target !== '' && p.name !== '') this.paused.set({ target: p.target, name: p.name }, 1);
    this.pausesUnknownTarget.set(pauses.filter((p) => p.target === '').length);
    this.pausesEmptyName.set(pauses.filter((p) => p.target !== '' && p.name === '').length);
    for (const h of stats.health ?? []) {
      if (h.expectWithinMs !== null) this.overdue.set({ schedule: h.schedule }, h.overdue ? 1 : 0);
      if (h.lastSuccessAt) this.lastSuccessAt.set({ schedule: h.schedule }, h.lastSuccessAt.getTime() / 1000);
    }
  }
}
