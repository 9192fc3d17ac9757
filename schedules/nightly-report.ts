import { defineSchedule } from 'cronq';

/**
 * A crontab line moved over unchanged: runs a shell command every night at 02:30
 * Berlin time, once per local day (period 'day'), catching up the latest missed night.
 */
export default defineSchedule({
  name: 'nightly-report',
  cron: '30 2 * * *',
  timezone: 'Europe/Berlin',
  period: 'day',
  catchUp: { mode: 'latest', window: '2d' },
  command: 'echo "report for $CRONQ_PERIOD_KEY (attempt $CRONQ_ATTEMPT)"',
  timeout: '10m',
  maxAttempts: 3,
});
