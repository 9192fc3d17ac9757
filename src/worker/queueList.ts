/** A pool serving every queue re-reads which queues have ready jobs at least this often. */
export const QUEUES_MAX_AGE_MS = 1_000;

/**
 * The queues a pool claims from: the configured list, or, with none configured, the
 * queues last seen with ready jobs (readQueues: a loose index scan), re-read when asked
 * (`stale()`: an idle poll, a failed claim, an enqueue whose queue is unknown) and at
 * least every QUEUES_MAX_AGE_MS. A local enqueue naming its queue adds it at once, and
 * the claim it prompts goes ahead without the re-read (the next one does it), so
 * same-process pickup never waits for one.
 */
export class QueueList {
  private seen: string[] = [];
  private seenAt = 0;
  private reread = true;
  /** A local enqueue named a queue since the last claim: claim now, re-read later. */
  private announced = false;

  constructor(
    private readonly configured: string[],
    private readonly readQueues: () => Promise<string[]>,
  ) {}

  /** The queue list may be out of date: re-read it before the next claim. */
  stale(): void {
    this.reread = true;
  }

  /** A job was just enqueued into `queue`. */
  enqueuedInto(queue: string): void {
    if (this.configured.length > 0) return;
    if (!this.seen.includes(queue)) this.seen = [...this.seen, queue];
    this.announced = true;
  }

  /** The queues to claim from now. */
  async current(): Promise<string[]> {
    if (this.configured.length > 0) return this.configured;
    const announced = this.announced;
    this.announced = false;
    if (!announced && (this.reread || Date.now() - this.seenAt > QUEUES_MAX_AGE_MS)) {
      this.reread = false;
      this.seenAt = Date.now();
      this.seen = await this.readQueues();
    }
    return this.seen;
  }
}
