/**
 * The two races of `overlap: 'skip'` between daemons fanning out ticks of one schedule,
 * driven by hand: two tickers on their own stores, one held at a chosen point by a gate,
 * the other run to its decision in between. No sleeps, no timing: the order of the
 * statements is fixed by the gates.
 */
import { describe, expect, it } from 'vitest';
import { defineSchedule } from '../src/index.ts';
import { systemClock } from '../src/schedule/clock.ts';
import { ScheduleTicker } from '../src/schedule/ticker.ts';
import { Store, type EncodedJobRow, type NewJobRow, type OverlapLock, type TickClaim } from '../src/store/index.ts';
import { connect } from '../src/db/client.ts';
import { useTestDatabase } from './support/db.ts';
import { EventLog } from './support/events.ts';

const t = useTestDatabase({ emptyBeforeEach: ['cronq_jobs', 'cronq_schedule_ticks'] });

/** A promise with its resolve, for handing control between a test and a store. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/** Holds `store` the first time it reaches `point`: `reached` opens there, and it goes on once `go` opens. */
function holdOnce(store: HeldStore, point: 'afterClaim' | 'beforeInsert') {
  const reached = gate();
  const go = gate();
  store[point] = async () => {
    store[point] = null;
    reached.open();
    await go.opened;
  };
  return { reached, go };
}

/** A Store whose fan-out statements can be held: after claiming a tick, before inserting jobs; and that tells when a lock is asked for. */
class HeldStore extends Store {
  afterClaim: (() => Promise<void>) | null = null;
  beforeInsert: (() => Promise<void>) | null = null;
  onLockAsked: (() => void) | null = null;

  override async claimTickFanout(claim: TickClaim): Promise<number | null> {
    const id = await super.claimTickFanout(claim);
    await this.afterClaim?.();
    return id;
  }

  override async insertJobs(batch: Array<NewJobRow | EncodedJobRow>): Promise<number> {
    await this.beforeInsert?.();
    return super.insertJobs(batch);
  }

  override async insertJob(row: NewJobRow): Promise<{ id: number; created: boolean }> {
    await this.beforeInsert?.();
    return super.insertJob(row);
  }

  override holdOverlapLock(scheduleName: string, waitS: number): Promise<OverlapLock | null> {
    this.onLockAsked?.();
    return super.holdOverlapLock(scheduleName, waitS);
  }
}

const every = (name: string, overlap: 'skip' | 'allow' = 'skip') =>
  defineSchedule({ name, cron: '* * * * *', timezone: 'UTC', overlap, handle() {} });

const T0 = '2030-01-01 10:00:00';
const T1 = new Date('2030-01-01T10:01:00.100Z'); // tick 10:01 due
const T2 = new Date('2030-01-01T10:02:00.100Z'); // tick 10:02 due

async function seed(name: string) {
  await t.sql(
    "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, started_at, finished_at) VALUES (?, ?, 'seed', 'enqueued', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    [name, T0],
  );
}

async function ledger(name: string) {
  const rows = await t.sql(
    "SELECT DATE_FORMAT(scheduled_at, '%H:%i') AS at, outcome, note, jobs_enqueued FROM cronq_schedule_ticks WHERE schedule_name = ? AND period_key <> 'seed' ORDER BY scheduled_at",
    [name],
  );
  return rows.map((r: any) => ({ at: r.at, outcome: r.outcome, note: r.note, jobs: Number(r.jobs_enqueued) }));
}

function daemon(schedule: ReturnType<typeof every>, name: string, overlapLockWaitS?: number) {
  const store = new HeldStore(t.database);
  const log = new EventLog('info');
  const ticker = new ScheduleTicker(schedule, { store, clock: systemClock, log: log.logger, claimedBy: `${name}:1`, overlapLockWaitS });
  return { store, ticker, log };
}

/** Why each tick was skipped by overlap, as logged. */
const skipReasons = (log: EventLog) => log.named('schedule_tick_skipped').map((e) => e.why);

/** The connection id holding the schedule's overlap lock, or null when it is free. */
async function lockHolder(name: string): Promise<number | null> {
  const [row] = await t.sql("SELECT IS_USED_LOCK(CONCAT('cronq_overlap_', SHA1(CONCAT(DATABASE(), '/', ?)))) AS holder", [name]);
  return row.holder === null ? null : Number(row.holder);
}

describe("overlap: 'skip' between daemons", () => {
  it('race 1: a later tick checked while an earlier tick is claimed but its job not yet committed is skipped', async () => {
    const s = every('race1');
    await seed(s.name);
    const a = daemon(s, 'a');
    const b = daemon(s, 'b');
    // A claims 10:01, finds nothing in flight and is held just before inserting its job.
    const { reached: aInserting, go: aGo } = holdOnce(a.store, 'beforeInsert');
    const aDone = a.ticker.catchUp(T1);
    await aInserting.opened;
    // B owns 10:02 (A's 10:01 row is in the ledger) and decides while A's job is not written:
    // it either decides at once (no lock to wait for) or asks for the lock A holds.
    const bAsked = gate();
    b.store.onLockAsked = bAsked.open;
    const bDone = b.ticker.catchUp(T2);
    await Promise.race([bDone, bAsked.opened]);
    aGo.open();
    await Promise.all([aDone, bDone]);

    expect(await ledger(s.name)).toEqual([
      { at: '10:01', outcome: 'enqueued', note: null, jobs: 1 },
      { at: '10:02', outcome: 'skipped', note: 'previous run still in progress', jobs: 0 },
    ]);
    // B waited for A's lock and then saw A's job (not: gave up waiting).
    expect(skipReasons(b.log)).toEqual(['a job of another tick is ready or running']);
    expect(await lockHolder(s.name)).toBeNull();
  });

  it('race 2: an earlier tick fanned out after a later one whose job is running is skipped', async () => {
    const s = every('race2');
    await seed(s.name);
    const a = daemon(s, 'a');
    const b = daemon(s, 'b');
    // A claims 10:01 and is held there, before deciding anything.
    const { reached: aClaimed, go: aGo } = holdOnce(a.store, 'afterClaim');
    const aDone = a.ticker.catchUp(T1);
    await aClaimed.opened;
    // B fans out 10:02 first, and its job starts running.
    await b.ticker.catchUp(T2);
    await t.sql("UPDATE cronq_jobs SET status = 'reserved' WHERE schedule_name = ?", [s.name]);
    aGo.open();
    await aDone;

    expect(await ledger(s.name)).toEqual([
      { at: '10:01', outcome: 'skipped', note: 'previous run still in progress', jobs: 0 },
      { at: '10:02', outcome: 'enqueued', note: null, jobs: 1 },
    ]);
    expect(await lockHolder(s.name)).toBeNull();
  });

  it('a tick taken over from a daemon that died before writing its job is decided afresh: skipped while another tick runs', async () => {
    const s = every('resumed');
    await seed(s.name);
    // A daemon claimed 10:01 and died before writing anything; its lease ran out.
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, claimed_by, fanout_until, started_at) VALUES (?, '2030-01-01 10:01:00', '2030-01-01T10:01:00Z', 'enqueued', 'dead:1', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6))",
      [s.name],
    );
    // Meanwhile B fanned out 10:02, and its job runs.
    const b = daemon(s, 'b');
    b.ticker['resumeCheckedAt'] = Number.POSITIVE_INFINITY; // B leaves 10:01 alone
    await b.ticker.catchUp(T2);
    await t.sql("UPDATE cronq_jobs SET status = 'reserved' WHERE schedule_name = ?", [s.name]);
    // A takes 10:01 over.
    await daemon(s, 'a').ticker.catchUp(T2);
    expect(await ledger(s.name)).toEqual([
      { at: '10:01', outcome: 'skipped', note: 'previous run still in progress', jobs: 0 },
      { at: '10:02', outcome: 'enqueued', note: null, jobs: 1 },
    ]);
  });

  it('a tick taken over after it wrote a job is finished, not re-decided', async () => {
    const s = every('resumed-partly');
    await seed(s.name);
    await t.sql(
      "INSERT INTO cronq_schedule_ticks (schedule_name, scheduled_at, period_key, outcome, claimed_by, fanout_until, started_at) VALUES (?, '2030-01-01 10:01:00', '2030-01-01T10:01:00Z', 'enqueued', 'dead:1', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6))",
      [s.name],
    );
    await t.sql(
      "INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, max_attempts, available_at, created_at, schedule_name, period_key, scheduled_at) VALUES ('default', ?, ?, '{}', 'reserved', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?, '2030-01-01T10:01:00Z', '2030-01-01 10:01:00')",
      [s.name, `${s.name}:2030-01-01T10:01:00Z`, s.name],
    );
    // And the job of 10:00 still runs too: were 10:01 decided afresh, it would be skipped with a job of its own running.
    await t.sql(
      "INSERT INTO cronq_jobs (queue, kind, job_key, payload, status, max_attempts, available_at, created_at, schedule_name, period_key, scheduled_at) VALUES ('default', ?, ?, '{}', 'reserved', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?, '2030-01-01T10:00:00Z', '2030-01-01 10:00:00')",
      [s.name, `${s.name}:2030-01-01T10:00:00Z`, s.name],
    );
    await daemon(s, 'a').ticker.catchUp(T1);
    expect(await ledger(s.name)).toEqual([{ at: '10:01', outcome: 'enqueued', note: null, jobs: 0 }]);
  });

  it("a tick whose schedule's lock another fan-out keeps is skipped; overlap 'allow' never takes it", async () => {
    const holder = new Store(t.database);
    const held = [];
    for (const overlap of ['skip', 'allow'] as const) {
      const s = every(`held-${overlap}`, overlap);
      await seed(s.name);
      const lock = await holder.holdOverlapLock(s.name, 0);
      expect(lock).not.toBeNull();
      held.push(lock!);
      // Taken already: a second holder (any connection) gets nothing.
      expect(await holder.holdOverlapLock(s.name, 0)).toBeNull();
      await daemon(s, 'a', 0).ticker.catchUp(T1);
    }
    expect(await ledger('held-skip')).toEqual([{ at: '10:01', outcome: 'skipped', note: 'previous run still in progress', jobs: 0 }]);
    expect(await ledger('held-allow')).toEqual([{ at: '10:01', outcome: 'enqueued', note: null, jobs: 1 }]);
    for (const lock of held) await lock.release();
    expect(await lockHolder('held-skip')).toBeNull();
  });

  it("gives up within its wait when every one of this process's lock connections is held by other fan-outs", async () => {
    const holder = new Store(t.database);
    const held = [];
    for (let i = 0; i < 4; i++) held.push((await holder.holdOverlapLock(`busy-${i}`, 0))!);
    expect(held.every((lock) => lock !== null)).toBe(true);
    try {
      // No fifth connection: without a bound on the pool wait this would never return.
      expect(await holder.holdOverlapLock('busy-5', 0)).toBeNull();
    } finally {
      for (const lock of held) await lock.release();
    }
    const after = await holder.holdOverlapLock('busy-5', 0);
    expect(after).not.toBeNull();
    await after!.release();
  }, 20_000);

  it('a lock whose holding connection died is free: the next tick runs', async () => {
    const s = every('died');
    await seed(s.name);
    // Another daemon's pool takes the lock, then its connection dies (killed by the server, as when its process is gone).
    const other = connect(t.url);
    try {
      expect(await new Store(other).holdOverlapLock(s.name, 0)).not.toBeNull();
      const holder = await lockHolder(s.name);
      expect(holder).not.toBeNull();
      expect(await new Store(t.database).holdOverlapLock(s.name, 0)).toBeNull();
      await t.sql(`KILL CONNECTION ${holder}`);
      const a = daemon(s, 'a');
      await a.ticker.catchUp(T1);
      expect(await ledger(s.name)).toEqual([{ at: '10:01', outcome: 'enqueued', note: null, jobs: 1 }]);
    } finally {
      await other.close().catch(() => undefined);
    }
  });

  it("databases on one server never share a schedule's lock", async () => {
    const s = every('shared-name');
    await seed(s.name);
    const [{ db }] = await t.sql('SELECT DATABASE() AS db');
    const elsewhere = `${db}_other`;
    await t.sql(`CREATE DATABASE IF NOT EXISTS \`${elsewhere}\``);
    const other = connect(t.url.replace(new RegExp(`/${db}$`), `/${elsewhere}`));
    try {
      const lock = await new Store(other).holdOverlapLock(s.name, 0);
      expect(lock).not.toBeNull();
      await daemon(s, 'a', 0).ticker.catchUp(T1);
      expect(await ledger(s.name)).toEqual([{ at: '10:01', outcome: 'enqueued', note: null, jobs: 1 }]);
      await lock!.release();
    } finally {
      await other.close().catch(() => undefined);
      await t.sql(`DROP DATABASE IF EXISTS \`${elsewhere}\``);
    }
  });
});
