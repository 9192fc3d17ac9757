import { isMainThread, Worker } from 'node:worker_threads';
import { IMPORT_TIMEOUT_MS } from '../defaults.ts';
import type { ModuleImport } from './esmImport.ts';

/** How long importing one schedule file may take by default (CRONQ_IMPORT_TIMEOUT). */
export const DEFAULT_IMPORT_TIMEOUT_MS = IMPORT_TIMEOUT_MS.default;
/** The longest CRONQ_IMPORT_TIMEOUT: a day, well short of where timers overflow (2^31-1 ms: node would fire at once). */
export const MAX_IMPORT_TIMEOUT_MS = IMPORT_TIMEOUT_MS.max;

/** After the bound, how long a blocked thread gets before the watchdog interrupts it. */
const INTERRUPT_AFTER_BOUND_MS = 1_000;

/** An import that did not settle within its bound. */
export class ImportTimeoutError extends Error {
  override name = 'ImportTimeoutError';
}

// The watchdog thread. A timer on the importing thread cannot fire while a schedule file
// loops at import (`while (true) {}`), and nothing in that thread can stop it, so this
// second thread watches: past the deadline it asks V8, through the inspector connected to
// the main thread, to terminate the JavaScript running there. That unwinds the loop; the
// event loop carries on, the main thread's own (overdue) timer fires and the import is
// refused like one that never settles. Without an inspector in this Node build it prints
// the refusal itself and kills the process: exit by signal, but never a silent hang.
const WATCHDOG_SOURCE = `
const { parentPort } = require('node:worker_threads');
let timer;
parentPort.on('message', ({ afterMs, message }) => {
  clearTimeout(timer);
  if (afterMs !== undefined) timer = setTimeout(() => interrupt(message), afterMs);
});
function interrupt(message) {
  try {
    const { Session } = require('node:inspector');
    const session = new Session();
    session.connectToMainThread();
    session.post('Runtime.terminateExecution');
    session.disconnect();
  } catch {
    require('node:fs').writeSync(2, 'cronq: ' + message + '\\n');
    process.kill(process.pid, 'SIGKILL');
  }
}
`;

/**
 * Imports modules one at a time, each within `boundMs`: an import still unsettled then
 * (a top-level await that never settles, an endless loop at import) rejects with
 * ImportTimeoutError. An endless synchronous loop is interrupted by a watchdog thread
 * (see above), on the main thread only: from a worker thread only the asynchronous case
 * is bounded. `close()` when done; the watchdog never keeps the process alive.
 */
export class BoundedImporter {
  private watchdog: Worker | null = null;

  constructor(
    private readonly boundMs: number,
    private readonly importModule: ModuleImport = (specifier) => import(specifier),
  ) {}

  async import(specifier: string, refusal: string): Promise<Record<string, unknown>> {
    if (isMainThread && !this.watchdog) {
      this.watchdog = new Worker(WATCHDOG_SOURCE, { eval: true });
      this.watchdog.unref();
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ImportTimeoutError(refusal)), this.boundMs);
    });
    this.watchdog?.postMessage({ afterMs: this.boundMs + INTERRUPT_AFTER_BOUND_MS, message: refusal });
    try {
      return await Promise.race([this.importModule(specifier), timedOut]);
    } finally {
      clearTimeout(timer);
      this.watchdog?.postMessage({});
    }
  }

  close(): void {
    void this.watchdog?.terminate();
    this.watchdog = null;
  }
}
