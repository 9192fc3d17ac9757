/**
 * CPU time of processes on this machine, from /proc (Linux): what a drain cost the worker
 * process and the database server, so a bench line can say where its time went. The
 * server is found by its process name; one that is not on this machine is not seen.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

/** User plus system CPU time of process `pid` so far, in ms (null once it is gone or on a system without /proc). */
export function cpuMsOf(pid: number): number | null {
  try {
    // The fields after the command name, which is in parentheses and may hold spaces.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** The write system calls process `pid` has made so far (/proc/PID/io syscw; null once it is gone or unreadable). */
export function writeCallsOf(pid: number): number | null {
  try {
    const line = readFileSync(`/proc/${pid}/io`, 'utf8').split('\n').find((l) => l.startsWith('syscw:'));
    return line === undefined ? null : Number(line.slice(6));
  } catch {
    return null;
  }
}

/** The pid of a local MariaDB or MySQL server (mariadbd, mysqld), or null when none runs here. */
export function databaseServerPid(): number | null {
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const name = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
        if (name === 'mariadbd' || name === 'mysqld') return Number(entry);
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    // no /proc
  }
  return null;
}

/** Starts counting the CPU of `pids` (nulls skipped); `perJob(n)` then reads µs of CPU per job for each since. */
export function cpuMeter(pids: Record<string, number | null>): { perJob(jobs: number): string } {
  const start = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid === null ? null : cpuMsOf(pid)]));
  return {
    perJob(jobs) {
      return Object.entries(pids)
        .map(([name, pid]) => {
          const before = start[name];
          const after = pid === null ? null : cpuMsOf(pid);
          return before === null || after === null ? `${name} not seen` : `${name} ${(((after - before) * 1000) / jobs).toFixed(0)} µs`;
        })
        .join(', ');
    },
  };
}
