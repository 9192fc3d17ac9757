import { Writable } from 'node:stream';
import pino from 'pino';
import { createCronq, defineSchedule, type Cronq } from '../src/index.ts';
import { fireTimesBetween } from '../src/schedule/period.ts';
import { fmt, percentile, truncateJobs, type BenchSection } from './util.ts';

const ENTITIES = 100_000;

/**
 * One tick of a monthly schedule fanning out to 100,000 entities, end to end through
 * the real fan-out path (generator → batches → enqueueRows), sampling the heap every
 * 50 ms; then the same tick again, which must insert nothing.
 */
export const fanout: BenchSection = {
  name: 'fanout',
  async run(context) {
    await truncateJobs(context.url);
    const schedule = defineSchedule({
      name: 'renewal',
      cron: '0 2 1 * *',
      timezone: 'Europe/Berlin',
      period: 'month',
      async *jobs() {
        for (let id = 0; id < ENTITIES; id++) yield { key: `user:${id}`, payload: { userId: id } };
      },
      handle: () => undefined,
    });
    const cronq = createCronq({ databaseUrl: context.url, logger: false, tasks: [schedule] });
    const at = new Date('2026-11-01T01:00:00Z');
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let heapPeak = heapBefore;
    const sampler = setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 50);
    let started = performance.now();
    const first = await ticked(cronq, schedule.name, at);
    const firstSeconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    global.gc?.();
    const heapAfter = process.memoryUsage().heapUsed;
    started = performance.now();
    const again = await ticked(cronq, schedule.name, at);
    const againSeconds = (performance.now() - started) / 1000;
    await cronq.stop();
    const rate = first.inserted / firstSeconds;
    context.results.push({
      label: `tick fan-out to ${fmt(ENTITIES)} entities`,
      value: `${fmt(rate)} jobs/s (${first.inserted} inserted in ${firstSeconds.toFixed(2)} s; heap +${((heapPeak - heapBefore) / 1e6).toFixed(1)} MB at peak, garbage included; +${((heapAfter - heapBefore) / 1e6).toFixed(1)} MB after GC)`,
      ratio: context.baseline ? rate / context.baseline : undefined,
      target: '≥ 30,000 jobs/s, memory flat',
    });
    context.results.push({
      label: 'the same tick again',
      value: `${againSeconds.toFixed(2)} s, ${again.inserted} inserted, ${again.existing} already present`,
      target: '< 3 s, 0 inserted',
    });
  },
};

/**
 * An idle daemon (scheduler and workers, in this process) with a schedule firing every
 * second: how late after its instant each tick's pass starts (the `lateness_ms` of the
 * `schedule_tick` log event), over 30 ticks.
 */
export const tickPrecision: BenchSection = {
  name: 'ticks',
  async run(context) {
    await truncateJobs(context.url);
    const lateness: number[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of chunk.toString().split('\n')) {
          if (line.includes('"schedule_tick"')) lateness.push(JSON.parse(line).lateness_ms);
        }
        done();
      },
    });
    const cronq = createCronq({
      databaseUrl: context.url,
      logger: pino({ level: 'info' }, sink),
      tasks: [
        defineSchedule({
          name: `precision-${Date.now()}`,
          cron: '* * * * * *',
          catchUp: false,
          handle: () => undefined,
        }),
      ],
    });
    await cronq.start();
    while (lateness.length < 31) await new Promise((r) => setTimeout(r, 200));
    await cronq.stop();
    const sorted = lateness.slice(1).sort((a, b) => a - b); // the first is the start-up tick
    context.results.push({
      label: 'tick precision, idle daemon (30 ticks)',
      value: `lateness p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted[sorted.length - 1]} ms`,
      target: 'p99 ≤ 50 ms',
    });
  },
};

/** Cron expressions of every family, for the "many schedules" figure: sparse and dense, both day rules, DST-prone times. */
const MIXED = ['0 0 1 1 *', '30 4 1 * *', '0 0 */2 * 1', '15 2 * * *', '0 0-23/2 * * *', '0 * * * *', '*/5 * * * *', '0 9 * * 1-5', '30 23 * * 6', '0 12 13 * 5'];
const ZONES = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'America/Nuuk', 'Asia/Tokyo', 'UTC'];

/**
 * Listing fire times, as `cronq schedules` does: a year of hourly fire times in Europe/Berlin
 * (8,760, through both DST changes), best of five; `--count 1000` of yearly schedules in six
 * zones (fire times per second); and 1,000 schedules of mixed expressions and zones, 1,000
 * fire times each, computed as the command computes them.
 */
export const periods: BenchSection = {
  name: 'periods',
  async run(context) {
    const from = new Date('2026-01-01T00:00:00Z');
    const to = new Date('2027-01-01T00:00:00Z');
    const end = new Date(8_640_000_000_000_000);
    fireTimesBetween('0 * * * *', 'Asia/Tokyo', from, new Date('2026-01-03T00:00:00Z')); // warm up
    let best = Number.POSITIVE_INFINITY;
    let count = 0;
    for (let run = 0; run < 5; run++) {
      const started = performance.now();
      count = fireTimesBetween('0 * * * *', 'Europe/Berlin', from, to).length;
      best = Math.min(best, performance.now() - started);
    }
    context.results.push({ label: `a year of hourly fire times (${fmt(count)})`, value: `${best.toFixed(1)} ms`, target: '< 200 ms' });

    let yearly = 0;
    let started = performance.now();
    for (const zone of ZONES) yearly += fireTimesBetween('0 0 1 1 *', zone, from, end, 1000).length;
    let seconds = (performance.now() - started) / 1000;
    context.results.push({
      label: `--count 1000 of a yearly schedule, ${ZONES.length} zones`,
      value: `${fmt(yearly / seconds)} fire times/s (${fmt(yearly)} in ${(seconds * 1000).toFixed(0)} ms)`,
      target: '≥ 10,000 fire times/s',
    });

    let listed = 0;
    started = performance.now();
    for (let i = 0; i < 1000; i++) {
      // Distinct text per schedule (a leading seconds field), so no compiled expression is shared.
      const expr = `${i % 60} ${MIXED[i % MIXED.length]}`;
      listed += fireTimesBetween(expr, ZONES[i % ZONES.length], from, end, 1000).length;
    }
    seconds = (performance.now() - started) / 1000;
    context.results.push({
      label: '1,000 schedules × --count 1000, mixed',
      value: `${seconds.toFixed(1)} s (${fmt(listed / seconds)} fire times/s)`,
      target: 'seconds',
    });
  },
};

/** One `cronq.admin.tick` of a loaded schedule at `at`: its fan-out counts. */
async function ticked(cronq: Cronq, schedule: string, at: Date): Promise<{ inserted: number; existing: number }> {
  const outcome = await cronq.admin.tick(schedule, { at });
  if (outcome.status !== 'enqueued') throw new Error(`bench: tick of ${schedule} found ${outcome.status}`);
  return outcome;
}
