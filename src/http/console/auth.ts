/**
 * Who may act in the console. A token `name:secret` (CRONQ_CONSOLE_TOKEN or
 * --console-token-file) enables actions; without one the console is read-only for
 * everyone. A request carries the token as `Authorization: Bearer name:secret`, or as the
 * session cookie the login form sets (when it was issued, a random nonce, and an HMAC of
 * both keyed by the secret, never the secret itself), good for SESSION_MAX_AGE_S unless
 * signed out: a cookie that holds here is still refused when its sessionHash is among the
 * database's sign-outs, or when it expired by the database's clock (the router looks;
 * every daemon sharing the token shares them, and that clock).
 * A form post from a browser must also carry the form's CSRF token (an HMAC of the
 * session) and, when it sends Origin or Referer, come from this host.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { UsageError } from '../../errors.ts';

/** The session cookie's name. */
export const SESSION_COOKIE = 'cronq_console';

/** How long a console session lasts from sign-in: 12 hours (the cookie's Max-Age too). */
export const SESSION_MAX_AGE_S = 12 * 60 * 60;

/** A session issued this far ahead of this host's clock still holds (another daemon's clock may run ahead). */
const SESSION_CLOCK_SLACK_S = 300;

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

/** Who a request acts as (ConsoleAuth.operatorOf): by Bearer token, or by a session cookie. */
export type ConsoleOperator =
  | { name: string; via: 'bearer'; session?: undefined }
  | { name: string; via: 'cookie'; session: string; sessionHash: string; sessionExpiresAt: Date; sessionEndsAt: Date };

/** The name of a session among the database's sign-outs: the SHA-256 of its cookie, hex (the cookie itself would sign in). */
export function sessionHash(cookie: string): string {
  return createHash('sha256').update(cookie).digest('hex');
}

/** Checks requests against one configured token (or none). */
export class ConsoleAuth {
  /** `clockMs`: this host's clock, ms since the epoch (a test gives a skewed one). */
  constructor(
    readonly token: ConsoleToken | null,
    private readonly clockMs: () => number = Date.now,
  ) {}

  get actionsEnabled(): boolean {
    return this.token !== null;
  }

  /**
   * A new session cookie value issued at `now` (ms): `SECONDS.NONCE.HMAC`, good for
   * SESSION_MAX_AGE_S. The nonce makes two sign-ins in one second two sessions, so
   * signing out of one leaves the other.
   */
  session(now = this.clockMs()): string {
    const issued = Math.floor(now / 1000);
    const nonce = randomBytes(16).toString('base64url');
    return `${issued}.${nonce}.${this.sessionMac(`${issued}:${nonce}`)}`;
  }

  private sessionMac(issuedAndNonce: string): string {
    return hmac(this.token!.secret, `session:${this.token!.name}:${issuedAndNonce}`);
  }

  /**
   * When `cookie`, a session this token issued, was issued (seconds), or null when it is
   * none or is older than SESSION_MAX_AGE_S before `now` (or ahead of it). A cookie of the
   * earlier form without a nonce (`SECONDS.HMAC`, from a daemon before sign-outs were
   * recorded) still holds until it expires, so a rolling deploy signs nobody out.
   * A session has one spelling only (its time without leading zeros; its nonce and HMAC
   * as signed): a sign-out names the cookie's hash, so `0SECONDS...`, were it taken,
   * would be the same session past its sign-out.
   */
  private sessionIssuedS(cookie: string, now: number): number | null {
    const match = /^([1-9]\d{0,11})(?:\.([A-Za-z0-9_-]{22}))?\.([A-Za-z0-9_-]{1,100})$/.exec(cookie);
    if (!match) return null;
    const issued = Number(match[1]);
    const age = Math.floor(now / 1000) - issued;
    const signed = match[2] === undefined ? String(issued) : `${issued}:${match[2]}`;
    return age >= -SESSION_CLOCK_SLACK_S && age <= SESSION_MAX_AGE_S && same(match[3], this.sessionMac(signed)) ? issued : null;
  }

  /** Whether `presented` (`name:secret`, typed into the login form or sent as Bearer) is the token. */
  matches(presented: string): boolean {
    return this.token !== null && same(presented.trim(), `${this.token.name}:${this.token.secret}`);
  }

  /**
   * The operator a request acts as, or null: its Bearer token must match, or its session
   * cookie must be one this token issued and not yet expired (then `session` is that
   * cookie, which its forms' CSRF token is bound to, `sessionHash` names it among the
   * sign-outs, `sessionExpiresAt` is SESSION_MAX_AGE_S after its issue time, when it
   * expires by the database's clock, and `sessionEndsAt` how long its sign-out is kept:
   * 2 × SESSION_CLOCK_SLACK_S past that, a margin for a database clock stepped back).
   * Whether it was signed out, or expired by the database's clock, is not looked at here.
   */
  operatorOf(headers: { authorization?: string; cookie?: string }, now = this.clockMs()): ConsoleOperator | null {
    if (!this.token) return null;
    const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? '');
    if (bearer && this.matches(bearer[1])) return { name: this.token.name, via: 'bearer' };
    const cookie = readCookie(headers.cookie, SESSION_COOKIE);
    const issued = cookie === null ? null : this.sessionIssuedS(cookie, now);
    if (cookie === null || issued === null) return null;
    return {
      name: this.token.name,
      via: 'cookie',
      session: cookie,
      sessionHash: sessionHash(cookie),
      sessionExpiresAt: new Date((issued + SESSION_MAX_AGE_S) * 1000),
      sessionEndsAt: new Date((issued + SESSION_MAX_AGE_S + 2 * SESSION_CLOCK_SLACK_S) * 1000),
    };
  }

  /** The CSRF token the action forms of `session` carry (bound to it, so another site cannot know it); a Bearer client's forms need none. */
  csrf(session: string | undefined): string {
    return hmac(this.token!.secret, `csrf:${session ?? 'bearer'}`);
  }

  /** Whether a form's CSRF field is `session`'s. */
  csrfMatches(field: string | null, session: string | undefined): boolean {
    return this.token !== null && field !== null && session !== undefined && same(field, this.csrf(session));
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
