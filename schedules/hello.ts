import { defineTask } from 'cronq';

/**
 * An ad-hoc task: `cronq enqueue hello --key hello:ada --payload '{"name":"Ada"}'`.
 * With `{"fail":true}` it fails on purpose, retries once after about a second, and
 * ends in the dead-letter table (`cronq dead list`).
 */
export default defineTask({
  name: 'hello',
  maxAttempts: 2,
  backoff: { base: '1s', max: '5s' },
  async handle(job, ctx) {
    const { name = 'world', fail = false } = job.payload as { name?: string; fail?: boolean };
    if (fail) throw new Error(`asked to fail (attempt ${job.attempt} of ${job.maxAttempts})`);
    ctx.log.info({ event: 'hello', greeting: `hello, ${name}` }, 'said hello');
  },
});
