import { defineSchedule } from 'cronq';

/** Every minute: one job per minute, whatever the number of daemons; shows the scheduler is alive. */
export default defineSchedule({
  name: 'heartbeat',
  cron: '* * * * *',
  period: 'minute',
  catchUp: { mode: 'latest', window: '10m' },
  maxAttempts: 1,
  handle(job, ctx) {
    ctx.log.info({ event: 'heartbeat', period: job.periodKey, scheduled_at: job.scheduledAt }, 'heartbeat');
  },
});
