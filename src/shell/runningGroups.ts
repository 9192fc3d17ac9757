/**
 * The process groups of commands still running in this process, so that none outlives it.
 *
 * A command leads a detached process group of its own (see handler.ts), so when the daemon's
 * process ends without stopping it (a second signal exits at once, a handler calls
 * process.exit(), an uncaught exception) the command would keep running, orphaned, while its
 * job returns through lease recovery and runs again: the same command twice at once. On
 * process exit every group still registered gets SIGKILL (an exit handler cannot wait for a
 * SIGTERM to be honoured).
 *
 * A group is registered from its spawn until cronq is done with it: the shell exited on its
 * own (what it left running is deliberate, as under cron, and is left alone), or the abort
 * or timeout's killGroup has finished.
 */

const running = new Set<number>();
let hooked = false;

/** Registers the group led by `pid` until the returned function is called. */
export function trackGroup(pid: number): () => void {
  if (!hooked) {
    hooked = true;
    process.on('exit', killRunningGroups);
  }
  running.add(pid);
  return () => running.delete(pid);
}

/** How many command groups this process is running (for tests). */
export function runningGroupCount(): number {
  return running.size;
}

function killRunningGroups(): void {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone (ESRCH), or nothing more an exiting process can do about it.
    }
  }
  running.clear();
}
