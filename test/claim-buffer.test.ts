import { describe, expect, it, vi } from 'vitest';
import { ClaimBuffer } from '../src/worker/claimBuffer.ts';
import { QueueList } from '../src/worker/queueList.ts';
import { claimedJob } from './support/jobs.ts';

const job = claimedJob;

describe('claim buffer', () => {
  it('hands jobs out oldest first, with the instant they were claimed', () => {
    const buffer = new ClaimBuffer();
    buffer.add([job(1), job(2)], 1_000);
    buffer.add([job(3)], 2_000);
    // Exactly what next() promises (its type): the job and when it was claimed.
    const next = () => {
      const entry = buffer.next();
      return entry && { job: entry.job, claimedAt: entry.claimedAt };
    };
    expect([next(), next(), next(), next()]).toEqual([
      { job: job(1), claimedAt: 1_000 },
      { job: job(2), claimedAt: 1_000 },
      { job: job(3), claimedAt: 2_000 },
      undefined,
    ]);
  });

  it('gives up a job a third of its own lease after its claim, keeping the others in order', () => {
    const buffer = new ClaimBuffer();
    buffer.add([job(1), job(2, 'short', 3_000), job(3)], 0);
    expect(buffer.takeStale(999)).toEqual([]);
    expect(buffer.takeStale(1_000).map((j) => j.id)).toEqual([2]);
    expect(buffer.length).toBe(2);
    expect(buffer.takeStale(19_999)).toEqual([]);
    expect(buffer.takeAll().map((j) => j.id)).toEqual([1, 3]);
    expect(buffer.length).toBe(0);
  });
});

const NONE_PAUSED = { read: async () => [], maxAgeMs: 200 };

describe('queue list', () => {
  it('is the configured list when there is one, without reading the database', async () => {
    let reads = 0;
    const list = new QueueList(['a', 'b'], async () => (reads++, ['x']), NONE_PAUSED);
    list.stale();
    expect(await list.current()).toEqual(['a', 'b']);
    expect(reads).toBe(0);
  });

  it('otherwise reads the queues with work, again when told it is stale, and adds a local enqueue at once', async () => {
    let found = ['a'];
    let reads = 0;
    const list = new QueueList([], async () => (reads++, found), NONE_PAUSED);
    expect(await list.current()).toEqual(['a']);
    expect(await list.current()).toEqual(['a']);
    expect(reads).toBe(1);
    list.enqueuedInto('b');
    expect(await list.current()).toEqual(['a', 'b']);
    expect(reads).toBe(1);
    found = ['c'];
    list.stale();
    list.enqueuedInto('b'); // the claim a local enqueue prompts does not wait for the re-read...
    expect(await list.current()).toEqual(['a', 'b']);
    expect(reads).toBe(1);
    expect(await list.current()).toEqual(['c']); // ...the next one does it
    expect(reads).toBe(2);
  });

  it('re-reads the queues with work once the list is a second old even while local enqueues keep naming theirs, without making their claims wait', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      let reads = 0;
      let answer: (queues: string[]) => void = () => undefined;
      const readQueues = () => (++reads === 1 ? Promise.resolve(['a']) : new Promise<string[]>((resolve) => (answer = resolve)));
      const list = new QueueList([], readQueues, NONE_PAUSED);
      expect(await list.current()).toEqual(['a']);
      vi.advanceTimersByTime(1_001);
      list.enqueuedInto('a'); // every claim prompted by a local enqueue...
      expect(await list.current()).toEqual(['a']); // ...goes ahead on the list it has...
      expect(reads).toBe(2); // ...but one that old is read again meanwhile
      list.enqueuedInto('a');
      expect(await list.current()).toEqual(['a']);
      expect(reads).toBe(2); // one read in flight at a time
      list.enqueuedInto('c'); // enqueued here while the read is in flight: it may not see it
      answer(['a', 'b']); // 'b': a queue only another process enqueues into
      await new Promise((resolve) => setImmediate(resolve));
      list.enqueuedInto('a');
      expect(await list.current()).toEqual(['a', 'b', 'c']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('sends the read of the pauses and the read of the queues with work together when a claim needs both', async () => {
    const inFlight: string[] = [];
    const answers: Array<() => void> = [];
    const pending = (name: string, value: string[]) =>
      new Promise<string[]>((resolve) => {
        inFlight.push(name);
        answers.push(() => resolve(value));
      });
    const list = new QueueList([], () => pending('queues', ['a', 'b']), { read: () => pending('pauses', ['b']), maxAgeMs: 200 });
    const current = list.current();
    await new Promise((resolve) => setImmediate(resolve));
    expect(inFlight.sort()).toEqual(['pauses', 'queues']); // neither waited for the other
    for (const answer of answers) answer();
    expect(await current).toEqual(['a']);
  });

  it('fails the claim when either read fails, and reads again for the next one', async () => {
    let failPauses = true;
    const list = new QueueList([], async () => ['a'], {
      read: async () => {
        if (failPauses) throw new Error('pauses unreadable');
        return [];
      },
      maxAgeMs: 200,
    });
    await expect(list.current()).rejects.toThrow('pauses unreadable');
    failPauses = false;
    expect(await list.current()).toEqual(['a']);
  });

  it('leaves paused queues out, configured or found, reading the pauses at most once per poll interval', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      let paused = ['b'];
      let pauseReads = 0;
      const pauses = { read: async () => (pauseReads++, paused), maxAgeMs: 200 };
      const configured = new QueueList(['a', 'b'], async () => [], pauses);
      expect(await configured.current()).toEqual(['a']);
      paused = ['a', 'b'];
      expect(await configured.current()).toEqual(['a']); // read 0 ms ago: still fresh
      expect(pauseReads).toBe(1);
      vi.advanceTimersByTime(200);
      expect(await configured.current()).toEqual([]);
      expect(pauseReads).toBe(2);
      paused = [];
      vi.advanceTimersByTime(200);
      expect(await configured.current()).toEqual(['a', 'b']);

      paused = ['x'];
      const found = new QueueList([], async () => ['x', 'y'], pauses);
      expect(await found.current()).toEqual(['y']);
      found.enqueuedInto('x'); // a local enqueue into a paused queue does not bypass the pause
      expect(await found.current()).toEqual(['y']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('reads the pauses ahead once they are half a poll interval old, without making the claim wait for that read', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      let answer: (paused: string[]) => void = () => undefined;
      let pauseReads = 0;
      const pauses = {
        read: () => {
          pauseReads++;
          return pauseReads === 1 ? Promise.resolve([]) : new Promise<string[]>((resolve) => (answer = resolve));
        },
        maxAgeMs: 200,
      };
      const list = new QueueList(['a', 'b'], async () => [], pauses);
      expect(await list.current()).toEqual(['a', 'b']);
      vi.advanceTimersByTime(99);
      expect(await list.current()).toEqual(['a', 'b']);
      expect(pauseReads).toBe(1);
      vi.advanceTimersByTime(1); // half a poll interval old: the next read starts...
      expect(await list.current()).toEqual(['a', 'b']); // ...and this claim goes ahead on the set it has
      expect(pauseReads).toBe(2);
      expect(await list.current()).toEqual(['a', 'b']); // one read in flight at a time
      expect(pauseReads).toBe(2);
      answer(['a']);
      await new Promise((resolve) => setImmediate(resolve));
      expect(await list.current()).toEqual(['b']); // read 100 ms ago: in force, nothing read again
      expect(pauseReads).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
