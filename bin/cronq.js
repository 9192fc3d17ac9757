#!/usr/bin/env node
// Entry point. The published package runs its compiled dist/. A checkout of the repository
// (src/ beside this file; the tarball never holds src/) runs the TypeScript sources through
// tsx instead, with 'cronq' resolving to src/ (the cronq-source export condition), so it
// needs no build step and never runs a stale one.
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

const checkout = existsSync(new URL('../src/cli.ts', import.meta.url));
if (checkout) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(new URL('./source-condition.js', import.meta.url));
}
const { main } = await import(checkout ? '../src/cli.ts' : '../dist/cli.js');
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
