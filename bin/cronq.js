#!/usr/bin/env node
// Entry point. The published package runs its compiled dist/. A checkout of the repository
// (src/ beside this file; the tarball never holds src/) runs the TypeScript sources through
// tsx instead, with 'cronq' resolving to src/ (the cronq-source export condition), so it
// needs no build step and never runs a stale one.
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

/** Exit code when output could not be written (BSD sysexits EX_IOERR). */
const EXIT_IOERR = 74;

// Listening from the start: a write that fails while a command runs (a full disk under
// `> file`) is kept for the exit code instead of crashing with a stack trace.
const failures = { stdout: watchWrites(process.stdout), stderr: watchWrites(process.stderr) };

const checkout = existsSync(new URL('../src/cli.ts', import.meta.url));
if (checkout) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(new URL('./source-condition.js', import.meta.url));
}
const { main, cliLine, commandOf } = await import(checkout ? '../src/cli.ts' : '../dist/cli.js');
let code = await main(process.argv.slice(2));
process.exitCode = code;
// A pipe takes 64 KiB at once and Node queues the rest: exiting now would cut the output
// (`cronq schedules --json | jq` read truncated JSON). Wait until both streams have
// handed everything to the OS, then leave even if a pool or timer lingers.
await Promise.all([drained(process.stdout), drained(process.stderr)]);
const failed = failures.stdout.error ?? failures.stderr.error;
if (failed) {
  // Output that did not reach its file is a failure: a script must not read success.
  if (!failures.stderr.error) await write(process.stderr, `${cliLine(commandOf(process.argv.slice(2)), `cannot write output: ${oneLine(failed)}`)}\n`);
  code = EXIT_IOERR;
}
process.exit(code);

/**
 * Records the first error writing to `stream`, except EPIPE: a reader that went away
 * (`cronq ... | head`) is not our failure, and nothing is left to flush to it.
 */
function watchWrites(stream) {
  const seen = { error: undefined };
  stream.on('error', (error) => {
    if (error?.code !== 'EPIPE' && error?.code !== 'ERR_STREAM_DESTROYED') seen.error ??= error;
  });
  return seen;
}

/** Resolves once everything written to `stream` so far is flushed, or the stream has failed. */
function drained(stream) {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) resolve();
    // Callbacks run in write order, so this one runs after every earlier chunk is flushed.
    else stream.write('', () => resolve());
  });
}

/** Writes `text` to `stream` and resolves once it is flushed or the write failed. */
function write(stream, text) {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) resolve();
    else stream.write(text, () => resolve());
  });
}

/** `error` as one line: `ENOSPC: no space left on device, write`. */
function oneLine(error) {
  const text = String(error?.message ?? error).split('\n')[0];
  return error?.code && !text.includes(error.code) ? `${error.code}: ${text}` : text;
}
