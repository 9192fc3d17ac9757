import type { HolderListing, LockHolder } from '../store/index.ts';

/**
 * A daemon is stale once it has not been heard from for this many of its own heartbeat
 * intervals: as the rolling-deploy check counts a daemon alive (3 × heartbeatMs), but by
 * the interval the daemon itself recorded, so one beating slowly on purpose is not taken
 * for stalled by a daemon beating fast.
 */
export const STALE_AFTER_HEARTBEATS = 3;

/** The stalled daemon a lock's holding session belongs to. */
export interface StaleHolder {
  connectionId: number;
  daemonId: string;
  /** How long, by the database clock, since it was last heard from. */
  silentMs: number;
}

/**
 * The daemon an overlap lock's holder is attributed to, when that daemon is stale and so
 * its session may be ended; null when it must be left alone. Pure.
 *
 * A holder is attributed only through listings written since the server started (an
 * older one names a session of an earlier server run: connection ids start again after a
 * restart). It is left alone when no such listing names it (another version's daemon, a
 * session of someone else: not ours to end), when a row listing it has no heartbeat
 * interval to judge it by, or when any daemon listing it is alive: a daemon lists a connection before it takes a lock
 * on it, so a live holder's own row always names its connection, whatever stale rows
 * might name the same id.
 */
export function staleHolderOf(holder: LockHolder): StaleHolder | null {
  const { serverStartedAt, now } = holder;
  if (serverStartedAt === null) return null;
  const current = holder.listedBy.filter((l) => l.listedAt !== null && l.listedAt.getTime() >= serverStartedAt.getTime());
  // A row without an interval cannot be judged: it protects the holder.
  if (current.length === 0 || current.some((l) => l.heartbeatMs === null)) return null;
  const listings = current as Array<HolderListing & { heartbeatMs: number; listedAt: Date }>;
  const silentMs = (l: (typeof listings)[number]) => now.getTime() - l.heartbeatAt.getTime();
  if (listings.some((l) => silentMs(l) < STALE_AFTER_HEARTBEATS * l.heartbeatMs)) return null;
  const latest = listings.reduce((a, b) => (b.listedAt.getTime() > a.listedAt.getTime() ? b : a));
  return { connectionId: holder.connectionId, daemonId: latest.daemonId, silentMs: silentMs(latest) };
}
