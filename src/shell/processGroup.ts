/**
 * A command's process group: stopping it as a whole (SIGTERM, then SIGKILL), so nothing a
 * command started outlives an abort.
 */
import type { Logger } from '../logger.ts';
import { sleep, within } from '../runtime/wakeup.ts';

/** How long a stopped command's process group has between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 2_000;

/** How often to look whether a signalled process group has emptied. */
const GROUP_POLL_MS = 50;

/** How the shell ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * SIGTERM to the whole group; once the group is empty we are done, otherwise SIGKILL after
 * KILL_GRACE_MS. Kept going after the shell exits, because a background child that ignores
 * SIGTERM is still in the group. Then waits (bounded) for the shell to be reaped.
 *
 * Polling the group id is safe from reuse: Linux never hands out a pid that is still some
 * live process's group id, and the shell (our child) is not reaped before 'exit' fires.
 * Zombies still count as members, so where PID 1 reaps orphans late or never (a container
 * without a proper init) the group looks alive until then, and at worst the full grace
 * passes before a harmless SIGKILL.
 */
export async function killGroup(pid: number, exited: Promise<Exit>, log: Logger): Promise<void> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + KILL_GRACE_MS;
  // The shell usually dies of the SIGTERM at once; until it is reaped the group is never empty.
  await within(exited, KILL_GRACE_MS);
  while (groupAlive(pid) && Date.now() < deadline) await sleep(Math.min(GROUP_POLL_MS, deadline - Date.now()));
  if (!groupAlive(pid)) return;
  log.warn({ event: 'command_sigkill', command_pid: pid, grace_ms: KILL_GRACE_MS }, 'command still running after SIGTERM; sending SIGKILL to its process group');
  signalGroup(pid, 'SIGKILL');
  const reaped = (await within(exited.then(() => true), KILL_GRACE_MS)) === true;
  if (!reaped) {
    // Uninterruptible sleep (a hung NFS mount, say): nothing more we can do; do not hold the worker slot.
    log.warn({ event: 'command_unkillable', command_pid: pid }, 'command did not exit after SIGKILL; giving up on it');
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error; // already gone: fine
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

