/**
 * A daemon that stalls holding a schedule's overlap lock (SIGSTOP, a frozen VM, a blocked
 * event loop) keeps its connection open, so the lock: two daemons on their own pools
 * against the real server, the first held inside its fan-out with the lock taken and its
 * heartbeat frozen (the beat never arrives, its connections stay open), the second
 * deciding the next tick. And one whose heartbeat goes on while its fan-out's jobs()
 * hangs: it must give the lock up itself once its fan-out's lease runs out. Waits are on
 * the database's clock, the log and the fan-out's own promises, not sleeps.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Database } from '../src/db/client.ts';
import { defineSchedule } from '../src/index.ts';
import type { Schedule } from '../src/schedule/define.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { OverlapGuard } from '../src/schedule/overlapGuard.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store, type DaemonRecord, type EncodedJobRow, type HoldOptions, type NewJobRow, type OverlapLock } from '../src/store/index.ts';
import { DaemonHeartbeat } from '../src/worker/heartbeat.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog, eventually } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks', 'cronq_daemons'] });

/** Every daemon here beats this often: stale after three beats, 300 ms. */
const BEAT_MS = 100;

const T0 = '2030-01-01 10:00:00';
const T1 = new Date('2030-01-01T10:01:00.100Z'); // tick 10:01 due
const T2 = new Date('2030-01-01T10:02:00.100Z'); // tick 10:02 due
const T3 = new Date('2030-01-01T10:03:00.100Z'); // tick 10:03 due
const T4 = new Date('2030-01-01T10:04:00.100Z'); // tick 10:04 due

const every = (name: string) => defineSchedule({ name, cron: '* * * * *', timezone: 'UTC', overlap: 'skip', handle() {} });

/**
 * A Store whose heartbeat can be frozen (the beat is sent and never answered), whose
 * fan-out can be held before it inserts, and that runs `beforeRelease` as an overlap lock
 * it took is about to be released (the lock still held).
 */
class StallingStore extends Store {
  heartbeatFrozen = false;
  beforeInsert: (() => Promise<void>) | null = null;
  beforeRelease: (() => Promise<void>) | null = null;

  override async holdOverlapLock(scheduleName: string, waitS: number, options?: HoldOptions): Promise<OverlapLock | null> {
    const lock = await super.holdOverlapLock(scheduleName, waitS, options);
    if (lock === null) return null;
    return {
      connectionId: lock.connectionId,
      release: async () => {
        try {
          await this.beforeRelease?.();
        } finally {
          await lock.release();
        }
      },
    };
  }

  override heartbeatDaemon(daemon: DaemonRecord): Promise<void> {
    return this.heartbeatFrozen ? new Promise(() => undefined) : super.heartbeatDaemon(daemon);
  }

  override async insertJobs(batch: Array<NewJobRow | EncodedJobRow>): Promise<number> {
    await this.beforeInsert?.();
    return super.insertJobs(batch);
  }

  override async insertJob(row: NewJobRow): Promise<{ id: number; created: boolean }> {
    await this.beforeInsert?.();
    return super.insertJob(row);
  }
}

const opened: Database[] = [];
const heartbeats: DaemonHeartbeat[] = [];
afterEach(async () => {
  // A frozen heartbeat never ends its loop: it is left, and its pool closed under it.
  await Promise.all(heartbeats.splice(0).map((h) => Promise.race([h.stop(), new Promise((r) => setTimeout(r, 200))])));
  await Promise.all(opened.splice(0).map((d) => d.close().catch(() => undefined)));
});

/**
 * A daemon on a pool of its own: its heartbeat (registered and beating) and one ticker of
 * `schedule` whose overlap locks are listed as its own (fan-out lease: `fanoutLeaseMs`, or the default).
 */
async function daemon(id: string, schedule: Schedule, url = t.url, fanoutLeaseMs?: number) {
  const database = connect(url);
  opened.push(database);
  const store = new StallingStore(database);
  const log = new EventLog('info');
  const record = { id, host: 'test-host', pid: 1, kinds: [], queues: null };
  const heartbeat = new DaemonHeartbeat({ store, log: log.logger, health: new DbHealth(log.logger), record, everyMs: BEAT_MS });
  heartbeats.push(heartbeat);
  await heartbeat.start();
  const overlapGuard = new OverlapGuard({ store, log: log.logger, daemon: { id, heartbeatMs: BEAT_MS } });
  const ticker = new ScheduleTicker(schedule, { store, clock: systemClock, log: log.logger, claimedBy: `${id}:1`, overlapLockWaitS: 0, overlapGuard, fanoutLeaseMs });
  return { store, log, ticker };
}

/** A promise with its resolve. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/**
 * Runs `a`'s fan-out of 10:01 up to its first insert and holds it there (the lock taken,
 * the check made, nothing written); `go` lets it go on, `done` is its pass.
 */
async function holdingTheLock(a: Awaited<ReturnType<typeof daemon>>) {
  const reached = gate();
  const go = gate();
  a.store.beforeInsert = async () => {
    a.store.beforeInsert = null;
    reached.open();
    await go.opened;
  };
  const done = a.ticker.catchUp(T1);
  await reached.opened;
  return { go, done };
}

async function seed(name: string) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, T0],
  );
}

async function tick(name: string, at: string) {
  const [row] = await t.sql(
    "SELECT outcome, note, jobs_enqueued FROM cronq_schedule_ticks WHERE schedule_name = ? AND DATE_FORMAT(scheduled_at, '%H:%i') = ?",
    [name, at],
  );
  return row && { outcome: row.outcome, note: row.note, jobs: Number(row.jobs_enqueued) };
}

/** The connection id holding the schedule's overlap lock, or null when it is free. */
async function lockHolder(name: string): Promise<number | null> {
  const [row] = await t.sql("SELECT IS_USED_LOCK(CONCAT('cronq_overlap_', SHA1(CONCAT(DATABASE(), '/', ?)))) AS holder", [name]);
  return row.holder === null ? null : Number(row.holder);
}

/** Resolves once `id`'s row has been silent for more than `beats` heartbeats, by the database clock. */
function silentFor(id: string, beats: number) {
  return eventually(async () => {
    const [row] = await t.sql(`SELECT heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL ${beats * BEAT_MS * 1000} MICROSECOND AS silent FROM cronq_daemons WHERE id = ?`, [id]);
    return Number(row?.silent) === 1;
  }, 10_000, `${id} silent for ${beats} heartbeats`);
}

/** Resolves once the lock has been held on its connection for longer than `beats` of A's heartbeats, by the database clock. */
function listedFor(id: string, beats: number) {
  return eventually(async () => {
    const [row] = await t.sql(`SELECT overlap_listed_at < UTC_TIMESTAMP(6) - INTERVAL ${beats * BEAT_MS * 1000} MICROSECOND AS old FROM cronq_daemons WHERE id = ?`, [id]);
    return Number(row?.old) === 1;
  }, 10_000, `${id}'s lock listed for ${beats} heartbeats`);
}

describe('a daemon that stalls holding an overlap lock', () => {
  it("has its session ended by another daemon once its heartbeat is stale, and the schedule's next tick runs", async () => {
    const s = every('stalled');
    await seed(s.name);
    const a = await daemon('a', s);
    const b = await daemon('b', s);
    const held = await holdingTheLock(a);
    const holder = await lockHolder(s.name);
    const [row] = await t.sql("SELECT overlap_connections FROM cronq_daemons WHERE id = 'a'");
    const listed = typeof row.overlap_connections === 'string' ? JSON.parse(row.overlap_connections) : row.overlap_connections;
    expect(listed).toEqual([holder]);

    a.store.heartbeatFrozen = true; // stalled: no more beats, every connection still open
    await silentFor('a', 3);
    await b.ticker.catchUp(T2);

    expect(await tick(s.name, '10:02')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
    expect(b.log.named('overlap_lock_freed')).toMatchObject([{ schedule: s.name, daemon: 'a', connection_id: holder }]);
    expect(b.log.named('schedule_tick_skipped')).toEqual([]);
    expect(await lockHolder(s.name)).toBeNull();

    // Woken, the stalled daemon finishes its own tick; its lost lock connection costs it nothing.
    held.go.open();
    await held.done;
    expect(await tick(s.name, '10:01')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
  }, 30_000);

  it('is never ended while its heartbeat still beats, however long it holds the lock: the tick is skipped', async () => {
    const s = every('alive');
    await seed(s.name);
    const a = await daemon('a', s);
    const b = await daemon('b', s);
    const held = await holdingTheLock(a);
    const holder = await lockHolder(s.name);
    await listedFor('a', 3); // held longer than would make a silent daemon stale

    await b.ticker.catchUp(T2);

    expect(await tick(s.name, '10:02')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });
    expect(b.log.named('schedule_tick_skipped').map((e) => e.why)).toEqual(['another fan-out of this schedule holds its overlap lock']);
    expect(b.log.named('overlap_lock_freed')).toEqual([]);
    expect(await lockHolder(s.name)).toBe(holder);
    held.go.open();
    await held.done;
    expect(await tick(s.name, '10:01')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
  }, 30_000);

  it("is not ended when no daemon's row lists its session, nor when a stale row's listing of that id predates the server's start", async () => {
    const s = every('unlisted');
    await seed(s.name);
    const b = await daemon('b', s);
    // A holder no daemon lists (a daemon without a row, another version's).
    const other = connect(t.url);
    opened.push(other);
    const lock = await new Store(other).holdOverlapLock(s.name, 0);
    expect(lock).not.toBeNull();
    const holder = await lockHolder(s.name);
    await b.ticker.catchUp(T2);
    expect(await tick(s.name, '10:02')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });

    // A stale row that listed the same id before the server last started: another session then.
    await t.sql(
      `INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at, heartbeat_ms, overlap_connections, overlap_listed_at)
       VALUES ('ghost', 'h', 1, '[]', NULL, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, ?, ?, '2000-01-01')`,
      [BEAT_MS, JSON.stringify([holder])],
    );
    await b.ticker.catchUp(T3);
    expect(await tick(s.name, '10:03')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });
    expect(b.log.named('overlap_lock_freed')).toEqual([]);
    expect(await lockHolder(s.name)).toBe(holder);

    // The same row listing it since the server started does name it: then it is ended.
    await t.sql("UPDATE cronq_daemons SET overlap_listed_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = 'ghost'");
    await b.ticker.catchUp(T4);
    expect(await tick(s.name, '10:04')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
    expect(b.log.named('overlap_lock_freed')).toMatchObject([{ daemon: 'ghost', connection_id: holder }]);
    await lock!.release();
  }, 30_000);
});

/** The fan-out lease of the daemons whose jobs() hangs: short, so it runs out within the test. */
const LEASE_MS = 2_000;

/**
 * A fan-out schedule whose first jobs() call (the first daemon's fan-out) hangs until
 * `wake` opens and then yields `late`; every later call yields `e` at once. `closed`
 * opens when that first call's generator has ended (run to its end or closed).
 */
function hangingOnce(name: string) {
  const inJobs = gate();
  const wake = gate();
  const closed = gate();
  let calls = 0;
  const schedule = defineSchedule({
    name,
    cron: '* * * * *',
    timezone: 'UTC',
    overlap: 'skip',
    handle() {},
    async *jobs() {
      calls += 1;
      if (calls > 1) {
        yield { key: 'e' };
        return;
      }
      try {
        inJobs.open();
        await wake.opened;
        yield { key: 'late' };
      } finally {
        closed.open();
      }
    },
  });
  return { schedule, inJobs, wake, closed };
}

/** What `pass` settled as (its error, or 'finished'), or 'still hanging' when it has not within `ms`. */
async function settledWithin(pass: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise((resolve) => (timer = setTimeout(() => resolve('still hanging'), ms)));
  try {
    return await Promise.race([pass.then(() => 'finished', (error: unknown) => error), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** When the tick's fan-out lease ends, as the ledger has it now ('YYYY-MM-DD HH:MM:SS.ffffff'). */
async function leaseEndOf(name: string, scheduledAt: string): Promise<string> {
  const [row] = await t.sql("SELECT DATE_FORMAT(fanout_until, '%Y-%m-%d %H:%i:%s.%f') AS until FROM cronq_schedule_ticks WHERE schedule_name = ? AND scheduled_at = ?", [name, scheduledAt]);
  return row.until;
}

const jobKeys = async (name: string) =>
  (await t.sql('SELECT job_key FROM cronq_jobs WHERE schedule_name = ? ORDER BY job_key', [name])).map((r) => r.job_key);

describe('a daemon whose fan-out hangs in jobs() while its heartbeat still beats', () => {
  it("gives the schedule's overlap lock up once its fan-out's lease has run out, not before: the tick is taken over and decided afresh, later ticks run", async () => {
    const h = hangingOnce('hung');
    const { name } = h.schedule;
    await seed(name);
    const a = await daemon('a', h.schedule, t.url, LEASE_MS);
    const b = await daemon('b', h.schedule, t.url, LEASE_MS);
    try {
      const aPass = a.ticker.catchUp(T1);
      await h.inJobs.opened; // A owns 10:01, holds the lock, and its jobs() hangs
      const holder = await lockHolder(name);
      expect(holder).not.toBeNull();
      // The database clock as A is about to release the lock (still holding it), against the lease's end.
      const leaseEnd = await leaseEndOf(name, '2030-01-01 10:01:00');
      const releasing: Array<{ leaseOver: boolean }> = [];
      a.store.beforeRelease = async () => {
        const [row] = await t.sql('SELECT UTC_TIMESTAMP(6) >= ? AS ended', [leaseEnd]);
        releasing.push({ leaseOver: Number(row.ended) === 1 });
      };

      expect(await settledWithin(aPass, 10_000)).toMatchObject({ name: 'FanoutAbandonedError' });
      expect(releasing).toEqual([{ leaseOver: true }]); // released once, and not while the lease stood
      expect(await lockHolder(name)).toBeNull();

      // B takes 10:01 over with the lock free, so decides it (nothing in flight: enqueued);
      // 10:02 is skipped for 10:01's job, not for a lock A keeps.
      await b.ticker.catchUp(T2);
      expect(await tick(name, '10:01')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
      expect(await tick(name, '10:02')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });
      expect(b.log.named('schedule_tick_skipped').map((e) => e.why)).toEqual(['a job of another tick is ready or running']);
      await t.sql("UPDATE cronq_jobs SET status = 'done' WHERE schedule_name = ?", [name]);
      await b.ticker.catchUp(T3);
      expect(await tick(name, '10:03')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });

      // A's jobs() wakes up: what it yields now goes nowhere, and its generator is closed.
      h.wake.open();
      await h.closed.opened;
      expect(await jobKeys(name)).toEqual(['hung:e:2030-01-01T10:01:00Z', 'hung:e:2030-01-01T10:03:00Z']);
      expect(a.log.named('schedule_tick')).toEqual([]);
      expect(await lockHolder(name)).toBeNull();
    } finally {
      h.wake.open();
    }
  }, 30_000);

  it("alone, resumes the tick it abandoned at its next pass; the old jobs() waking later writes nothing and leaves the new fan-out's lock alone", async () => {
    const h = hangingOnce('lone');
    const { name } = h.schedule;
    await seed(name);
    const a = await daemon('a', h.schedule, t.url, LEASE_MS);
    try {
      const aPass = a.ticker.catchUp(T1);
      await h.inJobs.opened;
      expect(await settledWithin(aPass, 10_000)).toMatchObject({ name: 'FanoutAbandonedError' });
      expect(await lockHolder(name)).toBeNull();

      // The next pass (a failed pass looks for resumable ticks at once, as run() does) takes
      // 10:01 up again: held at its insert, with the lock taken on the same pool.
      a.ticker['resumeCheckedAt'] = Number.NEGATIVE_INFINITY;
      const { go, done: again } = await holdingTheLock(a);
      const holder = await lockHolder(name);
      expect(holder).not.toBeNull();
      h.wake.open();
      await h.closed.opened;
      expect(await lockHolder(name)).toBe(holder);
      go.open();
      await again;
      expect(await tick(name, '10:01')).toEqual({ outcome: 'enqueued', note: null, jobs: 1 });
      expect(await jobKeys(name)).toEqual(['lone:e:2030-01-01T10:01:00Z']);
      expect(await lockHolder(name)).toBeNull();
    } finally {
      h.wake.open();
    }
  }, 30_000);

  it('keeps its lease past its length while jobs() yields slowly but steadily: never abandoned', async () => {
    const LEASE = 1_500;
    const s = defineSchedule({
      name: 'slow',
      cron: '* * * * *',
      timezone: 'UTC',
      overlap: 'skip',
      handle() {},
      async *jobs() {
        // A fifth of the lease between entities, 6 of them: longer than the lease in all, and all in one batch.
        for (let i = 0; i < 6; i++) {
          await new Promise((resolve) => setTimeout(resolve, LEASE / 5));
          yield { key: `e${i}` };
        }
      },
    });
    await seed(s.name);
    const a = await daemon('a', s, t.url, LEASE);
    const startedAt = performance.now();
    await a.ticker.catchUp(T1);
    expect(performance.now() - startedAt).toBeGreaterThan(LEASE);
    expect(await tick(s.name, '10:01')).toEqual({ outcome: 'enqueued', note: null, jobs: 6 });
  }, 30_000);
});

describe("a stalled daemon's row", () => {
  it("is kept for 30 days of silence while it lists overlap connections, so a daily schedule's next tick can still attribute the lock; other silent rows go after a day", async () => {
    const row = (id: string, silentDays: number, listed: string | null) =>
      t.sql(
        `INSERT INTO cronq_daemons (id, host, pid, kinds, queues, started_at, heartbeat_at, heartbeat_ms, overlap_connections, overlap_listed_at)
         VALUES (?, 'h', 1, '[]', NULL, UTC_TIMESTAMP(6) - INTERVAL ? DAY, UTC_TIMESTAMP(6) - INTERVAL ? DAY, 10000, ?, UTC_TIMESTAMP(6) - INTERVAL ? DAY)`,
        [id, silentDays, silentDays, listed, silentDays],
      );
    await row('stalled-listing', 2, '[41]');
    await row('silent-unlisted', 2, null);
    await row('silent-empty-list', 2, '[]');
    await row('gone-for-a-month', 31, '[42]');
    await row('alive', 0, null);
    expect(await new Store(t.database).deleteSilentDaemons()).toBe(3);
    expect((await t.sql('SELECT id FROM cronq_daemons ORDER BY id')).map((r) => r.id)).toEqual(['alive', 'stalled-listing']);
  });
});

describe('a stalled holder whose session the other daemon may not end (another database user)', () => {
  const user = `cronq_stall_${randomBytes(3).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  let restricted = '';

  beforeAll(async () => {
    await t.sql(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
    await t.sql(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${t.name}\`.* TO '${user}'@'%'`);
    const u = new URL(t.url);
    u.username = user;
    u.password = password;
    restricted = u.toString();
  });
  afterAll(async () => {
    await t.sql(`DROP USER IF EXISTS '${user}'@'%'`);
  });

  it('logs the refused KILL once and skips its ticks, without failing a pass', async () => {
    const s = every('refused');
    await seed(s.name);
    const a = await daemon('a', s); // the administrative user
    const b = await daemon('b', s, restricted);
    const held = await holdingTheLock(a);
    const holder = await lockHolder(s.name);
    a.store.heartbeatFrozen = true;
    await silentFor('a', 3);

    await b.ticker.catchUp(T2);
    await b.ticker.catchUp(T3);

    expect(await tick(s.name, '10:02')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });
    expect(await tick(s.name, '10:03')).toEqual({ outcome: 'skipped', note: 'previous run still in progress', jobs: 0 });
    const refused = b.log.named('overlap_lock_kill_refused');
    expect(refused).toMatchObject([{ schedule: s.name, daemon: 'a', connection_id: holder }]);
    expect(refused[0].error).toMatch(/not owner of thread/i);
    expect(await lockHolder(s.name)).toBe(holder);
    held.go.open();
    await held.done;
  }, 30_000);
});
