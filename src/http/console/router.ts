/**
 * The console's routes under `/`: GET pages (overview, schedules, a schedule's ledger,
 * dead letters, one dead letter, a job, login) and POST actions. Every action needs the
 * token (403 otherwise, nothing changed); a browser's form post also needs this
 * session's CSRF field and, when Origin or Referer is sent, this host (403 otherwise).
 * Successful actions redirect (303) back to their page with the outcome as a notice,
 * sealed so that only the console's own words are shown as one.
 * A session cookie that was signed out (on any daemon sharing the database) signs in
 * nobody: its pages are the read-only ones and its actions answer 403.
 * Other methods answer 405 with `Allow: GET, HEAD, POST`. An address that presented too
 * many wrong tokens is answered 429 when it presents one again (SignInLimit).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CronqAdmin, SessionStanding } from '../../admin.ts';
import { DatabaseBusyError, DatabaseUnreachableError, UsageError } from '../../errors.ts';
import type { Logger } from '../../logger.ts';
import { sliceChars } from '../../runtime/errorText.ts';
import { shownText } from '../../shownText.ts';
import { loggedPath } from '../logBudget.ts';
import type { RequestTarget } from '../target.ts';
import { ActionRefused, runAction } from './actions.ts';
import { ConsoleAuth, NoticeSeal, SESSION_COOKIE, SESSION_MAX_AGE_S, sameOrigin, type ConsoleOperator } from './auth.ts';
import { decodeSegment, type ConsoleContext, type PageResult } from './context.ts';
import { ConsoleGate } from './gate.ts';
import { SignInLimit } from './signInLimit.ts';
import { html } from './html.ts';
import { page } from './layout.ts';
import { deadPage } from './pages/dead.ts';
import { deadLetterPage } from './pages/deadLetter.ts';
import { jobPage } from './pages/job.ts';
import { loginPage } from './pages/login.ts';
import { overviewPage } from './pages/overview.ts';
import { schedulesPage } from './pages/schedules.ts';
import { ticksPage } from './pages/ticks.ts';

/** Largest form body read (bytes); a larger one is refused with 413. */
const MAX_FORM_BYTES = 16 * 1024;
/** Longest notice carried back in `?done=`. */
const MAX_NOTICE = 300;
/** Seconds a page asks the browser to wait while the database does not answer. */
const OUTAGE_RETRY_AFTER_S = 5;
/** Console requests reading the database at once, and more queued, each at most CONSOLE_WAIT_MS; the rest answer 503 (ConsoleGate). */
const CONSOLE_RUNNING = 2;
const CONSOLE_WAITING = 8;
/** How long a console request queues for the database at most before it is answered 503: pages take milliseconds, a lock wait seconds. */
export const CONSOLE_WAIT_MS = 3_000;

/** What the console serves from. */
export interface ConsoleOptions {
  admin: CronqAdmin;
  auth: ConsoleAuth;
  log: Logger;
}

/** Serves one console request at `target` (the server's reading of its request target); false when the path is not the console's (the caller answers 404). */
export type ConsoleHandler = (req: IncomingMessage, res: ServerResponse, target: RequestTarget) => Promise<boolean>;

/** What one console serves with: made once by createConsole. */
interface Served {
  admin: CronqAdmin;
  auth: ConsoleAuth;
  log: Logger;
  notices: NoticeSeal;
  gate: ConsoleGate;
  signIns: SignInLimit;
}

export function createConsole({ admin, auth, log }: ConsoleOptions): ConsoleHandler {
  const served: Served = { admin, auth, log, notices: new NoticeSeal(auth.token), gate: new ConsoleGate({ running: CONSOLE_RUNNING, waiting: CONSOLE_WAITING, waitMs: CONSOLE_WAIT_MS }), signIns: new SignInLimit() };
  return async (req, res, target) => {
    try {
      return await serve(req, res, target, served);
    } catch (error) {
      if (error instanceof ConsoleBusy && !res.headersSent) {
        res.setHeader('Retry-After', '1');
        return refuse(res, 503, 'The console is busy with other requests; try again in a moment.', 'Busy');
      }
      // The engine's DbHealth logs the outage once; the page says only that it is one
      // (the error names the database's host, which a reader without the token need not learn).
      if (error instanceof DatabaseBusyError && !res.headersSent) {
        // A lock wait or deadlock behind another transaction: the same request can succeed in a moment.
        res.setHeader('Retry-After', '1');
        return refuse(res, 503, 'The database is busy (a lock wait or deadlock behind another transaction); try again in a moment.', 'Database busy');
      }
      if (!(error instanceof DatabaseUnreachableError) || res.headersSent) throw error;
      res.setHeader('Retry-After', String(OUTAGE_RETRY_AFTER_S));
      return refuse(res, 503, 'The database is not answering; this page will work again once it does.', 'Database unavailable');
    }
  };
}

/** What an action's read answers for a session no longer held, by its standing (nothing was done). */
class SessionNotHeld {
  constructor(readonly standing: Exclude<SessionStanding, 'held'>) {}
}

/** Thrown when the gate turns a request away (answered 503). */
class ConsoleBusy extends Error {}

/**
 * Where `claimed` stands: a session cookie as the database has it, signed out, expired by
 * the database's clock or held (one statement: a primary-key read of the sign-outs, made
 * inside the gate like every other read); anything else 'held'. The database's clock, not
 * this host's: it is the one that prunes sign-outs, so a daemon whose clock runs behind
 * cannot take a cookie whose sign-out was pruned.
 */
async function standingOf(admin: CronqAdmin, claimed: ConsoleOperator | null): Promise<SessionStanding> {
  if (claimed?.via !== 'cookie') return 'held';
  return admin.consoleSignOuts.standing(claimed.sessionHash, claimed.sessionExpiresAt);
}

/** `claimed` unless it is a session cookie no longer held (standingOf): then null, as without a cookie. */
async function stillSignedIn(admin: CronqAdmin, claimed: ConsoleOperator | null): Promise<ConsoleOperator | null> {
  return (await standingOf(admin, claimed)) === 'held' ? claimed : null;
}

/**
 * `read` (a page or an action: what reads the database) once the gate admits it;
 * ConsoleBusy when it turns it away. Reading a form or checking a token needs no slot,
 * so a client trickling its body holds none.
 */
async function admitted<T>(gate: ConsoleGate, req: IncomingMessage, read: () => Promise<T>): Promise<T> {
  const release = await gate.enter();
  if (!release) throw new ConsoleBusy();
  try {
    // A client that left while queued is not served: its page would take connections for no one.
    if (req.socket.destroyed) throw new ConsoleBusy();
    return await read();
  } finally {
    release();
  }
}

async function serve(req: IncomingMessage, res: ServerResponse, target: RequestTarget, served: Served): Promise<boolean> {
  const { admin, auth, notices } = served;
  const { path, query } = target;
  // A request that presents a token (Bearer, or the login form) from an address that
  // presented too many wrong ones is turned away before the token is checked.
  const address = req.socket.remoteAddress ?? '';
  const bearer = auth.actionsEnabled && /^Bearer /.test(req.headers.authorization ?? '');
  if ((bearer || (auth.actionsEnabled && req.method === 'POST' && path === '/login')) && tooManyWrongTokens(res, served.signIns, address)) return true;
  // Who the request claims to be; whether a session cookie was signed out is read inside the gate.
  const claimed = auth.operatorOf(req.headers);
  if (bearer) {
    if (claimed?.via === 'bearer') served.signIns.succeeded(address);
    else served.signIns.failed(address);
  }
  const notice = query.get('done');
  const contextOf = (operator: ConsoleOperator | null): ConsoleContext => ({
    admin,
    query,
    viewer: { operator: operator?.name ?? null, actionsEnabled: auth.actionsEnabled },
    csrf: operator ? auth.csrf(operator.session) : null,
    notice: notice && notices.opens(notice, query.get('seal')) ? notice : null,
  });
  if (req.method === 'POST') return post(req, res, target, contextOf, claimed, served);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD, POST');
    return refuse(res, 405, `${req.method} is not served here: pages are GET, actions POST`, 'Method not allowed');
  }
  let result: PageResult | null;
  try {
    result = await admitted(served.gate, req, async () => getPage(path, contextOf(await stillSignedIn(admin, claimed))));
  } catch (error) {
    // A value in the URL the admin API refuses (a ledger page before year 1, dead letter 0).
    if (error instanceof UsageError) return refuse(res, 400, error.message, 'Bad request');
    throw error;
  }
  if (!result) return false;
  sendHtml(res, result, req.method === 'HEAD');
  return true;
}

async function getPage(path: string, ctx: ConsoleContext): Promise<PageResult | null> {
  if (path === '/') return overviewPage(ctx);
  if (path === '/schedules') return schedulesPage(ctx);
  if (path === '/dead') return deadPage(ctx);
  if (path === '/login') return loginPage(ctx);
  if (path === '/jobs') {
    // Exactly as typed: keys compare byte for byte, so `pad:a ` is not `pad:a` (jobPage offers the trimmed text when nothing matches).
    const q = ctx.query.get('q') ?? '';
    if (q !== '') return jobPage(ctx, q);
    // By key alone: digits that are also a job's id (the note on that job's page links here).
    const key = ctx.query.get('key') ?? '';
    return key !== '' ? jobPage(ctx, key, { byKey: true }) : null;
  }
  let m = /^\/dead\/([0-9]{1,15})$/.exec(path);
  if (m) return deadLetterPage(ctx, Number(m[1]));
  m = /^\/jobs\/(.+)$/.exec(path);
  if (m) return jobPage(ctx, decodeSegment(m[1]));
  m = /^\/schedules\/([^/]+)$/.exec(path);
  if (m) return ticksPage(ctx, decodeSegment(m[1]));
  return null;
}

async function post(
  req: IncomingMessage,
  res: ServerResponse,
  { path, query, host }: RequestTarget,
  contextOf: (operator: ConsoleOperator | null) => ConsoleContext,
  operator: ConsoleOperator | null,
  { admin, auth, log, notices, gate, signIns }: Served,
): Promise<boolean> {
  if (!sameOrigin({ origin: req.headers.origin, referer: req.headers.referer, host })) return refuse(res, 403, 'refused: the request comes from another site');
  const fields = await readForm(req);
  if (fields === null) return refuse(res, 413, 'refused: form too large');
  if (path === '/login') {
    const address = req.socket.remoteAddress ?? '';
    // Looked at again now that the body is read: forms sent at once all passed the look at their headers.
    if (auth.actionsEnabled && tooManyWrongTokens(res, signIns, address)) return true;
    if (!auth.actionsEnabled || !auth.matches(fields.get('token') ?? '')) {
      if (auth.actionsEnabled) signIns.failed(address);
      // Shown as whoever the request still is: a signed-out cookie is nobody here too (a read only when it carries a cookie).
      const viewer = operator?.via === 'cookie' ? await admitted(gate, req, () => stillSignedIn(admin, operator)) : operator;
      sendHtml(res, loginPage(contextOf(viewer), true), false);
      return true;
    }
    signIns.succeeded(address);
    return redirect(res, notices, '/', `signed in as ${auth.token!.name}`, `${SESSION_COOKIE}=${auth.session()}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_MAX_AGE_S}`);
  }
  if (path === '/logout') {
    // Recorded in the database before the cookie is cleared: a copy of the cookie then signs in nobody, on any daemon.
    if (operator?.via === 'cookie') await admitted(gate, req, () => admin.consoleSignOuts.record(operator.sessionHash, operator.sessionEndsAt));
    return redirect(res, notices, '/', 'signed out', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
  }
  if (!auth.actionsEnabled) return refuse(res, 403, 'refused: the console is read-only (no console token is configured)');
  if (!operator) return refuse(res, 403, 'refused: sign in with the console token first');
  // A Bearer header is never sent by a browser on its own, so only cookie sessions need the form's token.
  if (operator.via === 'cookie' && !auth.csrfMatches(fields.get('csrf'), operator.session)) return refuse(res, 403, 'refused: the form is stale or from another site (CSRF token)');
  try {
    const result = await admitted(gate, req, async () => {
      const standing = await standingOf(admin, operator);
      return standing === 'held' ? runAction(admin, path, fields, operator.name, query) : new SessionNotHeld(standing);
    });
    if (result instanceof SessionNotHeld) {
      return refuse(res, 403, `refused: this session ${result.standing === 'signed_out' ? 'was signed out' : 'has expired'}; sign in again`);
    }
    if (!result) return false;
    log.info({ event: 'console_action', path: loggedPath(path), by: `console:${operator.name}`, outcome: shownText(result.message, MAX_NOTICE) }, 'console action');
    return redirect(res, notices, result.back, result.message);
  } catch (error) {
    if (error instanceof ActionRefused || error instanceof UsageError) return refuse(res, 400, `refused: ${error.message}`);
    throw error;
  }
}

/** Answers 429 with Retry-After (true) when `address` presented too many wrong tokens of late; false when it may present one now. */
function tooManyWrongTokens(res: ServerResponse, signIns: SignInLimit, address: string): boolean {
  const waitS = signIns.retryAfterS(address);
  if (waitS === 0) return false;
  res.setHeader('Retry-After', String(waitS));
  return refuse(res, 429, `Too many wrong console tokens from this address; try again in ${waitS} s.`, 'Too many attempts');
}

/** The urlencoded form body, or null when it is over MAX_FORM_BYTES. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** Every console page, refusals and errors included, is sent with these. */
const PAGE_HEADERS = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  // No script runs on these pages: anything injected despite the escaping stays inert.
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
};

function sendHtml(res: ServerResponse, result: PageResult, head: boolean): void {
  const body = result.body.text;
  res.writeHead(result.status, { ...PAGE_HEADERS, 'Content-Length': Buffer.byteLength(body) });
  res.end(head ? undefined : body);
}

function refuse(res: ServerResponse, status: number, line: string, title = 'Refused'): true {
  const body = page(title, { operator: null, actionsEnabled: true }, html`<p class="bad" role="alert">${line}</p><p><a href="/">Back to the overview</a></p>`);
  sendHtml(res, { status, body }, false);
  return true;
}

/** A 303 to `to` carrying `message` (cut to MAX_NOTICE units, never inside a surrogate pair: encodeURIComponent throws on half of one) as a sealed notice. */
function redirect(res: ServerResponse, notices: NoticeSeal, to: string, message: string, cookie?: string): true {
  const notice = sliceChars(message, MAX_NOTICE);
  const location = `${to}?done=${encodeURIComponent(notice)}&seal=${notices.seal(notice)}`;
  res.writeHead(303, { Location: location, 'Cache-Control': 'no-store', ...(cookie ? { 'Set-Cookie': cookie } : {}) });
  res.end();
  return true;
}
