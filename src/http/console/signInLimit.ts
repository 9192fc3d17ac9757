/**
 * Slows down guessing the console token: each client address may present a wrong token
 * (the login form, or an `Authorization: Bearer` header) at most SIGN_IN_LIMIT.failures
 * times per SIGN_IN_LIMIT.windowMs; past that, every request of that address that
 * presents a token is answered 429 until the window ends, without the token being
 * checked. A right token ends the address's count.
 *
 * Counted by the socket's address (behind a reverse proxy, all clients share the
 * proxy's: they then share one budget, and a guesser can lock the others out of signing
 * in for a window; sessions already signed in are not affected). At most
 * SIGN_IN_LIMIT.addresses addresses are remembered, the oldest forgotten first, so the
 * table stays bounded however many addresses try. Single-threaded (the event loop):
 * no locking needed.
 */

export const SIGN_IN_LIMIT = {
  /** Wrong tokens one address may present per window. */
  failures: 10,
  /** The window, from an address's first wrong token. */
  windowMs: 60_000,
  /** Addresses remembered at once. */
  addresses: 1_000,
} as const;

interface Count {
  /** When the address's window started (ms). */
  since: number;
  failures: number;
}

export class SignInLimit {
  private readonly counts = new Map<string, Count>();

  constructor(
    private readonly limit: { failures: number; windowMs: number; addresses: number } = SIGN_IN_LIMIT,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until `address` may present a token again; 0 when it may now. */
  retryAfterS(address: string): number {
    const count = this.current(address);
    if (!count || count.failures < this.limit.failures) return 0;
    return Math.max(1, Math.ceil((count.since + this.limit.windowMs - this.now()) / 1000));
  }

  /** `address` presented a wrong token. */
  failed(address: string): void {
    const count = this.current(address);
    if (count) {
      count.failures += 1;
      return;
    }
    if (this.counts.size >= this.limit.addresses) this.counts.delete(this.counts.keys().next().value!);
    this.counts.set(address, { since: this.now(), failures: 1 });
  }

  /** `address` presented the right token: its count starts over. */
  succeeded(address: string): void {
    this.counts.delete(address);
  }

  /** The address's count in its current window, or undefined (an ended window is forgotten). */
  private current(address: string): Count | undefined {
    const count = this.counts.get(address);
    if (count && this.now() - count.since >= this.limit.windowMs) {
      this.counts.delete(address);
      return undefined;
    }
    return count;
  }
}
