#!/usr/bin/env node
// Entry point: TypeScript (ours and the schedule files) runs through tsx, no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
const code = await main(process.argv.slice(2));
process.exitCode = code;
// A pipe takes 64 KiB at once and Node queues the rest: exiting now would cut the output
// (`cronq schedules --json | jq` read truncated JSON). Wait until both streams have
// handed everything to the OS, then leave even if a pool or timer lingers.
await Promise.all([drained(process.stdout), drained(process.stderr)]);
process.exit(code);

/** Resolves once everything written to `stream` so far is flushed, or the reader is gone. */
function drained(stream) {
  // A reader that went away (`cronq ... | head`) is not our failure: nothing left to flush.
  stream.on('error', () => undefined);
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) resolve();
    // Callbacks run in write order, so this one runs after every earlier chunk is flushed.
    else stream.write('', () => resolve());
  });
}
