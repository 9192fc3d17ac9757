/** Which holder of an overlap lock may be ended as a stalled daemon's (staleHolderOf): pure, no database. */
import { describe, expect, it } from 'vitest';
import { STALE_AFTER_HEARTBEATS, staleHolderOf } from '../src/schedule/staleHolder.ts';
import type { HolderListing, LockHolder } from '../src/store/index.ts';

const NOW = new Date('2030-01-01T10:00:00Z');
const STARTED = new Date('2030-01-01T09:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);

const listing = (daemonId: string, silentMs: number, heartbeatMs: number | null = 10_000, listedAt: Date | null = ago(120_000)): HolderListing => ({
  daemonId,
  heartbeatAt: ago(silentMs),
  heartbeatMs,
  listedAt,
});

const holder = (...listedBy: HolderListing[]): LockHolder => ({ connectionId: 17, listedBy, now: NOW, serverStartedAt: listedBy.length > 0 ? STARTED : null });

describe('staleHolderOf', () => {
  it('names the daemon listing the holder once it has been silent for three of its own heartbeats', () => {
    expect(STALE_AFTER_HEARTBEATS).toBe(3);
    expect(staleHolderOf(holder(listing('a', 30_000)))).toEqual({ connectionId: 17, daemonId: 'a', silentMs: 30_000 });
    expect(staleHolderOf(holder(listing('a', 29_999)))).toBeNull();
  });

  it("judges a daemon by the heartbeat interval it recorded, not the reader's: one beating every minute is alive 40 s after its beat", () => {
    expect(staleHolderOf(holder(listing('slow', 40_000, 60_000)))).toBeNull();
    expect(staleHolderOf(holder(listing('slow', 180_000, 60_000)))).toMatchObject({ daemonId: 'slow' });
  });

  it('leaves a holder alone that no daemon lists', () => {
    expect(staleHolderOf(holder())).toBeNull();
  });

  it('leaves a holder alone when any daemon listing it is alive, whatever stale rows list the same id', () => {
    expect(staleHolderOf(holder(listing('stale', 600_000), listing('live', 1_000)))).toBeNull();
  });

  it("ignores listings older than the server's start (connection ids start again after a restart)", () => {
    expect(staleHolderOf(holder(listing('before-restart', 7_200_000, 10_000, ago(7_200_000))))).toBeNull();
    // A live daemon's listing from before the restart protects nothing either: its own row lists its new connections.
    expect(staleHolderOf(holder(listing('before-restart', 1_000, 10_000, ago(7_200_000)), listing('stale', 600_000)))).toMatchObject({ daemonId: 'stale' });
  });

  it('leaves a holder alone when a row listing it has no heartbeat interval to judge it by', () => {
    expect(staleHolderOf(holder(listing('a', 600_000, null)))).toBeNull();
    expect(staleHolderOf(holder(listing('a', 600_000), listing('b', 600_000, null)))).toBeNull();
  });

  it('names the daemon that listed the holder last when several stale rows list it', () => {
    expect(staleHolderOf(holder(listing('older', 600_000, 10_000, ago(500_000)), listing('newer', 400_000, 10_000, ago(300_000))))).toMatchObject({ daemonId: 'newer', silentMs: 400_000 });
  });
});
