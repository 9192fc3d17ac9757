/**
 * CPU time of processes on this machine, from /proc (Linux): what a drain cost the worker
 * process and the database server, so a bench line can say where its time went. The
 * server is the one behind the bench's database (databaseServerPid); one that is not on
 * this machine is not seen.
 */
import { readdirSync, readFileSync } from 'node:fs';
import mysql from 'mysql2/promise';

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

const SERVER_NAMES = new Set(['mariadbd', 'mysqld']);

function isServer(pid: number): boolean {
  try {
    return SERVER_NAMES.has(readFileSync(`/proc/${pid}/comm`, 'utf8').trim());
  } catch {
    return false;
  }
}

/**
 * The pid of the MariaDB or MySQL server behind `url` when it runs on this machine: the
 * one its `@@pid_file` names, else the only mariadbd/mysqld process here. Null when it
 * cannot tell (no /proc, the server elsewhere, several servers here and no readable pid
 * file): a CPU figure for the wrong server would be worse than none.
 */
export async function databaseServerPid(url: string): Promise<number | null> {
  const conn = await mysql.createConnection(url);
  try {
    const [[row]] = (await conn.query('SELECT @@pid_file AS file')) as unknown as [[{ file: string | null }]];
    const pid = row.file ? Number(readFileSync(row.file, 'utf8').trim()) : NaN;
    if (Number.isInteger(pid) && isServer(pid)) return pid;
  } catch {
    // no pid file to read: fall back to the process list
  } finally {
    await conn.end();
  }
  try {
    const servers = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry) && isServer(Number(entry)));
    return servers.length === 1 ? Number(servers[0]) : null;
  } catch {
    return null; // no /proc
  }
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
