/**
 * Who may act in the console. A token `name:secret` (CRONQ_CONSOLE_TOKEN or
 * --console-token-file) enables actions; without one the console is read-only for
 * everyone. A request carries the token as `Authorization: Bearer name:secret`, or as the
 * session cookie the login form sets (an HMAC of the secret, never the secret itself).
 * A form post from a browser must also carry the form's CSRF token (an HMAC of the
 * session) and, when it sends Origin or Referer, come from this host.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { UsageError } from '../../errors.ts';

/** The session cookie's name. */
export const SESSION_COOKIE = 'cronq_console';

/** A configured console token. */
export interface ConsoleToken {
  /** Recorded as `console:NAME` on every action. */
  name: string;
  secret: string;
}

const NAME = /^[A-Za-z0-9._@-]{1,64}$/;

/** Parses `name:secret` (name 1–64 of [A-Za-z0-9._@-], secret at least 16 characters); UsageError naming `source`. */
export function parseConsoleToken(text: string, source: string): ConsoleToken {
  const trimmed = text.trim();
  const colon = trimmed.indexOf(':');
  const name = colon < 0 ? '' : trimmed.slice(0, colon);
  const secret = colon < 0 ? '' : trimmed.slice(colon + 1);
  if (!NAME.test(name)) throw new UsageError(`${source} must be NAME:SECRET with NAME of 1-64 letters, digits, . _ @ -`);
  if (secret.length < 16 || secret.length > 1024) throw new UsageError(`${source}: the secret after "${name}:" must be 16-1024 characters`);
  return { name, secret };
}

function hmac(secret: string, purpose: string): string {
  return createHmac('sha256', secret).update(purpose).digest('base64url');
}

/** Whether `a` equals `b`, in time that tells neither where they differ nor how long `b` is (digests of both are compared). */
function same(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** Checks requests against one configured token (or none). */
export class ConsoleAuth {
  constructor(readonly token: ConsoleToken | null) {}

  get actionsEnabled(): boolean {
    return this.token !== null;
  }

  /** The session cookie value for this token (stable until the token changes). */
  session(): string {
    return hmac(this.token!.secret, `session:${this.token!.name}`);
  }

  /** Whether `presented` (`name:secret`, typed into the login form or sent as Bearer) is the token. */
  matches(presented: string): boolean {
    return this.token !== null && same(presented.trim(), `${this.token.name}:${this.token.secret}`);
  }

  /** The operator name a request acts as, or null: its Bearer token or session cookie must match. */
  operatorOf(headers: { authorization?: string; cookie?: string }): { name: string; via: 'bearer' | 'cookie' } | null {
    if (!this.token) return null;
    const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? '');
    if (bearer && this.matches(bearer[1])) return { name: this.token.name, via: 'bearer' };
    const cookie = readCookie(headers.cookie, SESSION_COOKIE);
    if (cookie !== null && same(cookie, this.session())) return { name: this.token.name, via: 'cookie' };
    return null;
  }

  /** The CSRF token every action form carries: bound to the session, so another site cannot know it. */
  csrf(): string {
    return hmac(this.token!.secret, `csrf:${this.session()}`);
  }

  /** Whether a form's CSRF field is this session's. */
  csrfMatches(field: string | null): boolean {
    return this.token !== null && field !== null && same(field, this.csrf());
  }
}

/**
 * Seals the one-line outcome an action redirects back with (`?done=...&seal=...`), so a
 * page shows it only when this console wrote it: a link from elsewhere cannot put its own
 * words ("session expired, sign in at ...") in the console's notice. Keyed by the console
 * token when there is one (every daemon sharing it opens the others' notices), else by a
 * random key of this process.
 */
export class NoticeSeal {
  private readonly key: string;

  constructor(token: ConsoleToken | null) {
    this.key = token ? hmac(token.secret, 'notice') : randomBytes(32).toString('base64url');
  }

  seal(message: string): string {
    return hmac(this.key, `notice:${message}`);
  }

  /** Whether `seal` is this console's seal of `message`. */
  opens(message: string, seal: string | null): boolean {
    return seal !== null && same(seal, this.seal(message));
  }
}

/** The value of cookie `name` in a Cookie header, or null. */
export function readCookie(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/** Whether Origin (or, without it, Referer), when present, names `host` (the request's Host header). */
export function sameOrigin(headers: { origin?: string; referer?: string; host?: string }): boolean {
  const claimed = headers.origin ?? headers.referer;
  if (claimed === undefined) return true;
  try {
    return new URL(claimed).host === headers.host;
  } catch {
    return false;
  }
}
