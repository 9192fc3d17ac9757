import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CRONQ_BIN = fileURLToPath(new URL('../../bin/cronq.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command args` to completion in `cwd` with `env` added to this process's, `stdin`
 * (if given) as its input; resolves with its exit code and output whatever the code, and
 * rejects (after SIGKILL) if it has not finished within `timeoutMs`. `stdoutFd`: the
 * child writes its stdout to that open file descriptor instead (the result's stdout is '').
 */
export function runProcess(
  command: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string | undefined>; timeoutMs: number; stdin?: string; stdoutFd?: number },
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const stdio = ['pipe', options.stdoutFd ?? 'pipe', 'pipe'] as const;
    const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: [...stdio] });
    if (options.stdin !== undefined) child.stdin!.end(options.stdin);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish in ${options.timeoutMs} ms\n${stdout}\n${stderr}`));
    }, options.timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs `cronq ARGS` to completion in the repo root with `env` added, `stdin` (if given) as its input. */
export function runCli(args: string[], env: Record<string, string | undefined> = {}, timeoutMs = 30_000, stdin?: string): Promise<CliResult> {
  return runProcess(process.execPath, [CRONQ_BIN, ...args], { cwd: REPO_ROOT, env, timeoutMs, stdin });
}

/** A running `cronq start` whose JSON log lines a test can wait on. */
export class DaemonProcess {
  readonly child: ChildProcess;
  readonly lines: Array<Record<string, any>> = [];
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(args: string[], env: Record<string, string | undefined>) {
    this.child = spawn(process.execPath, [CRONQ_BIN, 'start', ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env } });
    let buffer = '';
    this.child.stdout!.on('data', (d) => {
      buffer += d;
      const parts = buffer.split('\n');
      buffer = parts.pop()!;
      for (const line of parts) if (line.trim()) this.lines.push(JSON.parse(line));
    });
    this.child.stderr!.on('data', (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  events(name: string) {
    return this.lines.filter((l) => l.event === name);
  }

  async waitFor(event: string, count = 1, timeoutMs = 20_000): Promise<Array<Record<string, any>>> {
    const deadline = Date.now() + timeoutMs;
    while (this.events(event).length < count) {
      if (Date.now() > deadline || this.child.exitCode !== null) {
        throw new Error(`no ${event} (x${count}) from the daemon; saw: ${this.lines.map((l) => l.event).join(',')}\n${this.stderr}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.events(event);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async kill(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}
