/**
 * A daemon that stalls holding a schedule's overlap lock (SIGSTOP, a frozen VM, a blocked
 * event loop) keeps its connection open, so the lock: two daemons on their own pools
 * against the real server, the first held inside its fan-out with the lock taken and its
 * heartbeat frozen (the beat never arrives, its connections stay open), the second
 * deciding the next tick. Waits are on the database's clock and the log, not sleeps.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Database } from '../src/db/client.ts';
import { defineSchedule } from '../src/index.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { OverlapGuard } from '../src/schedule/overlapGuard.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store, type DaemonRecord, type EncodedJobRow, type NewJobRow } from '../src/store/index.ts';
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

/** A Store whose heartbeat can be frozen (the beat is sent and never answered) and whose fan-out can be held before it inserts. */
class StallingStore extends Store {
  heartbeatFrozen = false;
  beforeInsert: (() => Promise<void>) | null = null;

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

/** A daemon on a pool of its own: its heartbeat (registered and beating) and one ticker of `schedule` whose overlap locks are listed as its own. */
async function daemon(id: string, schedule: ReturnType<typeof every>, url = t.url) {
  const database = connect(url);
  opened.push(database);
  const store = new StallingStore(database);
  const log = new EventLog('info');
  const record = { id, host: 'test-host', pid: 1, kinds: [], queues: null };
  const heartbeat = new DaemonHeartbeat({ store, log: log.logger, health: new DbHealth(log.logger), record, everyMs: BEAT_MS });
  heartbeats.push(heartbeat);
  await heartbeat.start();
  const overlapGuard = new OverlapGuard({ store, log: log.logger, daemon: { id, heartbeatMs: BEAT_MS } });
  const ticker = new ScheduleTicker(schedule, { store, clock: systemClock, log: log.logger, claimedBy: `${id}:1`, overlapLockWaitS: 0, overlapGuard });
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
