/**
 * Slows down guessing the console token: each client address may present a wrong token
 * (the login form, or an `Authorization: Bearer` header) at most SIGN_IN_LIMIT.failures
 * times per SIGN_IN_LIMIT.windowMs; past that, every request of that address that
 * presents a token is answered 429 until the window ends, without the token being
 * checked. A right token ends the address's count.
 *
 * Counted by the socket's address (behind a reverse proxy, all clients share the
 * proxy's: they then share one budget, and a guesser can lock the others out of signing
 * in for a window; sessions already signed in are not affected); an IPv6 address by its
 * /64 network (clientOf), since one host usually holds a whole /64 and could otherwise
 * try ten tokens from each of its addresses. At most SIGN_IN_LIMIT.addresses addresses
 * are remembered, the oldest forgotten first, so the table stays bounded however many
 * addresses try. Single-threaded (the event loop):
 * no locking needed.
 */
import { isIP } from 'node:net';

/**
 * What an address is counted as: an IPv4 address as itself (an IPv4-mapped IPv6 one,
 * `::ffff:192.0.2.7`, as `192.0.2.7`), an IPv6 address as its first 64 bits; anything
 * else as it is.
 */
export function clientOf(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped && isIP(mapped[1]) === 4) return mapped[1];
  const bare = address.split('%')[0]; // a zone (fe80::1%eth0) names an interface, not a host
  if (isIP(bare) !== 6) return address;
  const groupsOf = (part: string) => (part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['v4', 'v4'] : [g])));
  const [head, tail] = bare.includes('::') ? bare.split('::').map(groupsOf) : [groupsOf(bare), []];
  const groups = [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

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
    const count = this.current(clientOf(address));
    if (!count || count.failures < this.limit.failures) return 0;
    return Math.max(1, Math.ceil((count.since + this.limit.windowMs - this.now()) / 1000));
  }

  /** `address` presented a wrong token. */
  failed(address: string): void {
    const client = clientOf(address);
    const count = this.current(client);
    if (count) {
      count.failures += 1;
      return;
    }
    if (this.counts.size >= this.limit.addresses) this.counts.delete(this.counts.keys().next().value!);
    this.counts.set(client, { since: this.now(), failures: 1 });
  }

  /** `address` presented the right token: its count starts over. */
  succeeded(address: string): void {
    this.counts.delete(clientOf(address));
  }

  /** The client's count in its current window, or undefined (an ended window is forgotten). */
  private current(client: string): Count | undefined {
    const count = this.counts.get(client);
    if (count && this.now() - count.since >= this.limit.windowMs) {
      this.counts.delete(client);
      return undefined;
    }
    return count;
  }
}
