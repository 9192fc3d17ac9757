import { readFileSync } from 'node:fs';

/** True when `pid` no longer runs: gone, or a zombie waiting for its parent to reap it. */
export function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false;
  } catch {
    return true;
  }
}
