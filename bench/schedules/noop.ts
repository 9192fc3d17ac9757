import { defineTask } from 'cronq';

/** Does nothing: what `npm run bench` drains through `cronq start` processes. */
export const noop = defineTask({ name: 'noop', handle: () => undefined });
