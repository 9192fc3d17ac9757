import { vi } from 'vitest';
import { main } from '../../src/cli.ts';

/**
 * Runs the CLI's `main` in this process, capturing what it writes to stdout and stderr.
 * Much faster than spawning `cronq`; meant for usage errors and other paths that end
 * before the database is opened (a spawned `runCli` stays the end-to-end check).
 */
export async function runMain(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const captured = { stdout: '', stderr: '' };
  const capture = (stream: 'stdout' | 'stderr') =>
    vi.spyOn(process[stream], 'write').mockImplementation((chunk: unknown) => {
      captured[stream] += String(chunk);
      return true;
    });
  const spies = [capture('stdout'), capture('stderr')];
  try {
    const code = await main(args, { ...process.env, ...env });
    return { code, ...captured };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}
