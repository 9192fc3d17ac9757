/** A pool serving every queue re-reads which queues have ready jobs at least this often. */
export const QUEUES_MAX_AGE_MS = 1_000;

import type { Logger } from '../logger.ts';

/** Where the paused queues come from, and how old the last read may get before a claim. */
export interface PausedQueues {
  /** The names of the paused queues (one read of the tiny cronq_pauses table). */
  read: () => Promise<string[]>;
  /** At most this old when a claim uses it: the poll interval, so a pause applies within one poll. */
  maxAgeMs: number;
  /** Told `queue_paused` / `queue_resumed` once per queue when this pool first sees a pause begin or end. */
  log?: Logger;
}

/**
 * The queues a pool claims from: the configured list, or, with none configured, the
 * queues last seen with ready jobs (readQueues: a loose index scan), re-read when asked
 * (`stale()`: an idle poll, a failed claim, an enqueue whose queue is unknown) and at
 * least every QUEUES_MAX_AGE_MS. A local enqueue naming its queue adds it at once, and
 * the claim it prompts goes ahead without the re-read (the next one does it; one that
 * finds the list older than QUEUES_MAX_AGE_MS starts it in the background), so
 * same-process pickup never waits for one, and a stream of local enqueues never keeps
 * the list from being read. Either way paused queues are left out; a
 * claim never uses a paused set read longer than `paused.maxAgeMs` ago, so a pool obeys
 * a pause within one poll interval. A claim that finds the set that old waits for a
 * fresh read (an idle pool's poll); one that finds it half that old starts the next read
 * and goes ahead without it, so claims prompted one after another by local enqueues
 * never wait for one. At most one read is in flight; a pool reads the set at most about
 * twice per poll interval, not once per claim. When a claim needs both reads they go out
 * together, so it waits for one round trip, not two.
 */
export class QueueList {
  private seen: string[] = [];
  private seenAt = 0;
  private reread = true;
  /** A local enqueue named a queue since the last claim: claim now, re-read later. */
  private announced = false;
  /** The read of the queues with work in flight, if any. */
  private seenRead: Promise<void> | null = null;
  /** Queues local enqueues named while that read was in flight (it may not have seen them). */
  private namedDuringRead = new Set<string>();

  private paused = new Set<string>();
  /** When the read that gave `paused` was sent. */
  private pausedAt = Number.NEGATIVE_INFINITY;
  /** The read of the paused set in flight, if any. */
  private pausedRead: Promise<void> | null = null;

  constructor(
    private readonly configured: string[],
    private readonly readQueues: () => Promise<string[]>,
    private readonly pausedQueues: PausedQueues,
  ) {}

  /** The queue list may be out of date: re-read it before the next claim. */
  stale(): void {
    this.reread = true;
  }

  /** A job was just enqueued into `queue`. */
  enqueuedInto(queue: string): void {
    if (this.configured.length > 0) return;
    if (!this.seen.includes(queue)) this.seen = [...this.seen, queue];
    if (this.seenRead) this.namedDuringRead.add(queue);
    this.announced = true;
  }

  /** The queues to claim from now. */
  async current(): Promise<string[]> {
    const announced = this.announced;
    this.announced = false;
    const age = Date.now() - this.pausedAt;
    let pausedRead: Promise<void> | undefined;
    if (age >= this.pausedQueues.maxAgeMs) pausedRead = this.readPaused();
    else if (age >= this.pausedQueues.maxAgeMs / 2) this.readPaused().catch(() => undefined); // a claim that needs it will retry and see the error
    // Both reads at once when both are due (a fresh pool's first claim, an idle poll):
    // one round trip before the claim, not two.
    const [, candidates] = await Promise.all([pausedRead, this.candidates(announced)]);
    return this.unpaused(candidates);
  }

  /** Reads the paused set, or joins the read in flight. */
  private readPaused(): Promise<void> {
    this.pausedRead ??= (async () => {
      const sentAt = Date.now();
      try {
        this.notePaused(new Set(await this.pausedQueues.read()));
        this.pausedAt = sentAt;
      } finally {
        this.pausedRead = null;
      }
    })();
    return this.pausedRead;
  }

  private async candidates(announced: boolean): Promise<string[]> {
    if (this.configured.length > 0) return this.configured;
    const old = Date.now() - this.seenAt > QUEUES_MAX_AGE_MS;
    if (!announced && (this.reread || old)) {
      this.reread = false;
      await this.readSeen();
    } else if (old) {
      // Prompted by a local enqueue: go ahead on the list as it is, and read it again for
      // the next claims (else a steady stream of local enqueues would keep a queue only
      // other processes fill out of the list for good).
      this.readSeen().catch(() => undefined); // a claim that needs it will read again and see the error
    }
    return this.seen;
  }

  /** Reads the queues with work, or joins the read in flight; queues named meanwhile stay in. */
  private readSeen(): Promise<void> {
    this.seenRead ??= (async () => {
      this.seenAt = Date.now();
      this.namedDuringRead = new Set();
      try {
        const read = await this.readQueues();
        this.seen = [...read, ...[...this.namedDuringRead].filter((queue) => !read.includes(queue))];
      } finally {
        this.seenRead = null;
      }
    })();
    return this.seenRead;
  }

  private notePaused(now: Set<string>): void {
    const { log } = this.pausedQueues;
    for (const queue of now) if (!this.paused.has(queue)) log?.info({ event: 'queue_paused', queue }, 'queue paused: no claims from it until resumed');
    for (const queue of this.paused) if (!now.has(queue)) log?.info({ event: 'queue_resumed', queue }, 'queue resumed');
    this.paused = now;
  }

  private unpaused(queues: string[]): string[] {
    return this.paused.size === 0 ? queues : queues.filter((queue) => !this.paused.has(queue));
  }
}
