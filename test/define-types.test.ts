import { describe, expect, expectTypeOf, it } from 'vitest';
import { defineSchedule, defineTask, type Cronq, type FanOutItem, type Job, type Schedule, type Task } from '../src/index.ts';

/**
 * How the payload's type flows through a schedule: compiled by `npm run typecheck` (tsc
 * --noEmit), where each `@ts-expect-error` must meet an error and every other line none.
 * At run time these only define schedules; nothing is enqueued.
 */
interface Invoice {
  invoiceId: number;
}

const sendInvoice = defineTask<Invoice>({ name: 'send-invoice', handle: (job) => void job.payload.invoiceId });

/** Calls a Cronq would be given: type-checked, never run. */
const typeOnly = (run: () => unknown) => void run;

describe("a schedule's payload type", () => {
  it('defineSchedule<P> returns a Schedule<P>, whose enqueue takes a P and nothing else', () => {
    const digest = defineSchedule<Invoice>({ name: 'digest', cron: '0 8 * * *', handle: (job) => void job.payload.invoiceId });
    expectTypeOf(digest).toEqualTypeOf<Schedule<Invoice>>();
    expectTypeOf(digest).toExtend<Task<Invoice>>();
    typeOnly(() => (cronq: Cronq) => {
      void cronq.enqueue(digest, { key: 'digest:extra', payload: { invoiceId: 1 } });
      // @ts-expect-error the payload must be the schedule's type (it was any)
      void cronq.enqueue(digest, { key: 'digest:extra', payload: { invoice: 1 } });
    });
    expect(digest.name).toBe('digest');
  });

  it("a handler sees the type its fan-out yields, without naming it", () => {
    const renewals = defineSchedule({
      name: 'renewals',
      cron: '0 2 * * *',
      *jobs() {
        yield { key: 'user:1', payload: { userId: 1, plan: 'pro' } };
      },
      handle(job) {
        expectTypeOf(job.payload).toEqualTypeOf<{ userId: number; plan: string }>();
        const userId: number = job.payload.userId;
        void userId;
      },
    });
    expectTypeOf(renewals).toEqualTypeOf<Schedule<{ userId: number; plan: string }>>();
    // The same from an async fan-out reading its tick.
    const reminders = defineSchedule({
      name: 'reminders',
      cron: '0 2 * * *',
      async *jobs(tick) {
        yield { key: `day:${tick.periodKey}`, payload: { at: tick.scheduledAt.toISOString() } };
      },
      handle: (job) => void job.payload.at.toUpperCase(),
    });
    expectTypeOf(reminders.jobs).toEqualTypeOf<((tick: { scheduledAt: Date; periodKey: string }) => AsyncIterable<FanOutItem<{ at: string }>> | Iterable<FanOutItem<{ at: string }>>) | null>();
  });

  it('a fan-out must yield the payload its handler or its P takes', () => {
    defineSchedule<Invoice>({
      name: 'invoices',
      cron: '0 2 * * *',
      // @ts-expect-error a fan-out yielding another payload than the schedule's P
      *jobs() {
        yield { key: 'invoice:1', payload: { invoice: 1 } };
      },
      handle: (job) => void job.payload.invoiceId,
    });
    defineSchedule({
      name: 'invoices-annotated',
      cron: '0 2 * * *',
      // @ts-expect-error a fan-out yielding another payload than its handler takes
      *jobs() {
        yield { key: 'invoice:1', payload: { invoiceId: 'one' } };
      },
      handle: (job: Job<Invoice>) => void job.payload.invoiceId,
    });
  });

  it("a schedule of a typed task is of the task's payload type, its fan-out checked against it", () => {
    const nightly = defineSchedule({ ...sendInvoice, name: 'nightly-invoices', cron: '0 3 * * *' });
    expectTypeOf(nightly).toEqualTypeOf<Schedule<Invoice>>();
    defineSchedule({
      ...sendInvoice,
      name: 'invoice-fanout',
      cron: '0 3 * * *',
      *jobs() {
        yield { key: 'invoice:1', payload: { invoiceId: 1 } };
      },
    });
    defineSchedule({
      ...sendInvoice,
      name: 'invoice-fanout-typo',
      cron: '0 3 * * *',
      // @ts-expect-error a fan-out yielding another payload than the spread task's
      *jobs() {
        yield { key: 'invoice:1', payload: { invoiceID: 1 } };
      },
    });
    typeOnly(() => (cronq: Cronq) => {
      // @ts-expect-error and enqueue checks it as the task's
      void cronq.enqueue(nightly, { key: 'x', payload: { invoiceID: 1 } });
    });
  });

  it('an untyped schedule is still any to code that holds one (Schedule), and its handler sees unknown', () => {
    const schedules: Schedule[] = [defineSchedule({ name: 'plain', cron: '0 3 * * *', handle: () => undefined }), defineSchedule({ ...sendInvoice, cron: '0 3 * * *' })];
    const tasks: Task[] = schedules;
    expect(tasks).toHaveLength(2);
    defineSchedule({
      name: 'no-payload',
      cron: '0 3 * * *',
      *jobs() {
        yield { key: 'only-a-key' };
      },
      handle(job) {
        expectTypeOf(job.payload).toBeUnknown();
      },
    });
  });

  it('a defined task or schedule is read-only to the compiler as it is frozen at run time', () => {
    const nightly = defineSchedule({ name: 'readonly', cron: '0 3 * * *', handle: () => undefined });
    typeOnly(() => {
      // @ts-expect-error a task's fields are read-only
      sendInvoice.queue = 'other';
      // @ts-expect-error and its backoff's
      sendInvoice.backoff.baseMs = 1;
      // @ts-expect-error a schedule's fields are read-only
      nightly.cron = '* * * * *';
      // @ts-expect-error and its catch-up's
      nightly.catchUp.max = 1;
    });
    expect(Object.isFrozen(nightly)).toBe(true);
  });
});
