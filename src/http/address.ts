import { isIP } from 'node:net';
import { UsageError } from '../errors.ts';
import { shownInLine } from '../shownText.ts';

/** Where to listen: a host name or IP (IPv6 without brackets) and a port (0: any free one, logged). */
export interface HttpAddress {
  host: string;
  port: number;
}

const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * Parses `HOST:PORT` (`127.0.0.1:9464`, `0.0.0.0:9464`, `localhost:9464`, `[::1]:9464`).
 * The host is required (say 0.0.0.0 to listen everywhere); the port is 1-65535, or 0 for
 * any free port. Throws a one-line UsageError naming `flag` otherwise.
 */
export function parseHttpAddress(value: string, flag: string): HttpAddress {
  const bad = (why: string) => new UsageError(`${flag} must be HOST:PORT, e.g. 127.0.0.1:9464 (got '${shownInLine(value)}': ${why})`);
  const trimmed = value.trim();
  // A URL pasted where the address goes (http://127.0.0.1:9464): its scheme's ':' read as a host's.
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]{0,15}):\/\//.exec(trimmed);
  if (scheme) throw bad(`an address, not a URL: leave out ${scheme[1]}://`);
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d*)$/.exec(trimmed);
  if (!match) {
    // One ':' (or a bracketed host before it): what follows it is a port that is no number.
    const portPart = /^\[[^\]]*\]:/.test(trimmed) || trimmed.split(':').length === 2;
    throw bad(portPart ? 'the port must be 1-65535 (0: any free port)' : trimmed.includes(':') ? 'an IPv6 host needs brackets, [::1]:9464' : 'no port');
  }
  const host = match[1] ?? match[2];
  if (host === '') throw bad('no host; use 0.0.0.0 to listen on every interface');
  if (match[1] !== undefined ? isIP(host) !== 6 : isIP(host) === 0 && !HOST_NAME.test(host)) throw bad(`'${shownInLine(host)}' is not a host`);
  const port = Number(match[3]);
  if (match[3] === '' || !Number.isInteger(port) || port > 65_535) throw bad('the port must be 1-65535 (0: any free port)');
  return { host, port };
}

/** `host:port`, with IPv6 hosts in brackets. */
export function formatAddress(address: HttpAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
