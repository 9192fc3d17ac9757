import type { Db } from '../db/client.ts';
import { completeManyIfLeased, type Lease } from '../store/fenced.ts';

const MAX_BATCH = 500;

/**
 * Batches effect-free completions: every lease handed to `complete` while a flush is
 * in flight joins the next one, so N handlers finishing together cost one fenced
 * UPDATE and one commit, and a lone completion is written at once (no timer).
 * Each promise resolves true when that job was marked done, false when its lease was
 * lost, and rejects with the database error when the batch could not be written.
 */
/** Told what became of one completion handed to the completer. */
export interface CompletionReceiver {
  /** The batch was written: `done` true when this job was marked done, false when its lease was lost. */
  completionWritten(done: boolean): void;
  /** The batch could not be written (the database's error). */
  completionFailed(error: unknown): void;
}

export class Completer {
  private pending: Array<{ lease: Lease; receiver: CompletionReceiver }> = [];
  private flushing: Promise<void> | null = null;

  /** `onFlushed` is called after each batch is written (or fails): the backlog shrank. */
  constructor(
    private readonly db: Db,
    private readonly onFlushed: () => void = () => undefined,
  ) {}

  /** Completions handed in and not yet written. */
  get backlog(): number {
    return this.pending.length + this.inFlight;
  }

  private inFlight = 0;

  /** Hands in one completion; `receiver` hears how it went. No promise per job. */
  submit(lease: Lease, receiver: CompletionReceiver): void {
    this.pending.push({ lease, receiver });
    if (!this.flushing) this.flushing = this.drain();
  }

  /** `submit` as a promise: true when marked done, false when the lease was lost; rejects when the batch failed. */
  complete(lease: Lease): Promise<boolean> {
    return new Promise((resolve, reject) => this.submit(lease, { completionWritten: resolve, completionFailed: reject }));
  }

  /** Resolves once everything handed in so far has been written (or has failed). */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drain(): Promise<void> {
    // Let handlers that finish in this same turn join the first batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_BATCH);
      this.inFlight = batch.length;
      try {
        const done = await completeManyIfLeased(this.db, batch.map((b) => b.lease));
        for (const b of batch) b.receiver.completionWritten(done.has(b.lease.id));
      } catch (error) {
        for (const b of batch) b.receiver.completionFailed(error);
      }
      this.inFlight = 0;
      this.onFlushed();
    }
    this.flushing = null;
  }
}
