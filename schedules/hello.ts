import { defineTask } from 'cronq';

/** An ad-hoc task: `cronq enqueue hello --key hello:1 --payload '{"name":"Ada"}'`. */
export default defineTask({
  name: 'hello',
  async handle(job, ctx) {
    const name = (job.payload as { name?: string }).name ?? 'world';
    ctx.log.info({ event: 'hello', greeting: `hello, ${name}` }, 'said hello');
  },
});
