import { defineSchedule, PermanentError } from 'cronq';

/** Stand-in for your users table: in production, stream ids from your database. */
const ACTIVE_USERS = [1, 2, 3];

/**
 * Renews every active subscription once per calendar month (Berlin time). The cron runs
 * daily, so the later ticks of a month are a safety net: each user's key
 * `renewal:user:<id>:<yyyy-mm>` exists once, whatever fires or restarts.
 */
export default defineSchedule({
  name: 'renewal',
  cron: '0 2 * * *',
  timezone: 'Europe/Berlin',
  period: 'month',
  catchUp: { window: '40d', mode: 'all' },
  queue: 'billing',
  maxAttempts: 5,
  backoff: { base: '1m', max: '1h' },
  lease: '5m',
  async *jobs() {
    for (const userId of ACTIVE_USERS) yield { key: `user:${userId}`, payload: { userId } };
  },
  async handle(job, ctx) {
    const { userId } = job.payload as { userId: number };
    if (!Number.isInteger(userId)) throw new PermanentError('payload has no userId');
    // Charge through your payment provider with job.key as the idempotency key, then
    // record the renewal in the same transaction that marks the job done:
    ctx.effect(async (tx) => {
      void tx; // e.g. await tx.execute(sql`INSERT INTO renewals (job_key, user_id) VALUES (${job.key}, ${userId})`)
    });
    ctx.log.info({ event: 'renewed', user_id: userId, period: job.periodKey }, 'subscription renewed');
  },
});
