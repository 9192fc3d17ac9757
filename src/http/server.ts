import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import { UsageError } from '../errors.ts';
import { errorText } from '../runtime/errorText.ts';
import type { Logger } from '../logger.ts';
import { LogBudget, loggedPath, type LogLimit } from './logBudget.ts';
import { formatAddress, type HttpAddress } from './address.ts';
import type { HealthReport } from './health.ts';
import type { Scrape } from './metrics.ts';
import type { ConsoleHandler } from './console/router.ts';
import { readRequestTarget, type RequestTarget } from './target.ts';

/**
 * Connections held open at once (a peer cannot hold the daemon's sockets and memory).
 * One more makes room by closing the oldest connection with no request being answered
 * (still sending its headers or its body, or idle between requests), so a client holding
 * every slot with connections that trickle their headers (slowloris) cannot keep out one
 * that sends its request at once; when all are being answered, the new one is closed.
 */
export const MAX_HTTP_CONNECTIONS = 128;

/**
 * Requests one connection may have in flight (read, not yet answered) at once. Node parses
 * a whole read chunk and emits every pipelined request in it at once, so one connection
 * sending thousands of requests in a burst and never reading the answers held that many
 * responses in memory. One request beyond this closes the connection, and the requests
 * already read from it do no work.
 */
export const MAX_REQUESTS_IN_FLIGHT = 8;

/** What the server keeps per connection. */
interface Connection {
  /** Requests read and not yet answered (their response not finished or closed). */
  inFlight: number;
  /** The latest request read from it: while its body still arrives, the connection may be closed to make room. */
  latest: IncomingMessage | null;
  /** Closed for pipelining past MAX_REQUESTS_IN_FLIGHT: requests still emitted from it are ignored. */
  refused: boolean;
}

/** What the server serves: each called once per request. */
export interface HttpEndpoints {
  health(): Promise<HealthReport>;
  metrics(): Promise<Scrape>;
  /** The web console (console/router.ts) for every other path; without it they answer 404. */
  console?: ConsoleHandler;
  /**
   * While this returns true (the daemon binds before its engine starts), every path
   * answers 503: `/healthz` with `{"status":"starting"}`, the others with `starting`.
   */
  starting?: () => boolean;
}

/** How the server is tuned; the defaults are the daemon's. */
export interface HttpServerOptions {
  /** HTTP error lines (each kind) logged per window (default HTTP_ERROR_LOG_LIMIT: 10 a minute). */
  errorLogLimit?: LogLimit;
}

/** A listening server. */
export interface HttpServer {
  /** The address bound (`0.0.0.0` when `0` was asked for). */
  host: string;
  /** The port bound (the chosen one when 0 was asked for). */
  port: number;
  /** Stops listening and drops open connections; resolves once closed. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Serves `GET /healthz` (200 with the HealthReport as JSON when its status is 'ok',
 * else 503 with the same shape) and `GET /metrics` (Prometheus text, the registry's
 * content type); HEAD too; 405 for other methods on those paths; the console, when
 * given, for other paths; 404 for paths nobody serves. The path is the request target's
 * exactly (readRequestTarget: `//healthz` is that path, not the host `healthz`); an
 * absolute-form target (`http://HOST/PATH`) is served by its path, its HOST standing for
 * the Host header; any other target (`*`, `https://...`) answers 400.
 * At most MAX_HTTP_CONNECTIONS connections are held at once (one more closes the oldest
 * with no request being answered, or itself when there is none), each with at most
 * MAX_REQUESTS_IN_FLIGHT requests unanswered (one more closes it; the requests already
 * read from it are dropped without being served).
 * A request that fails is answered 500 and logged as `http_error` (warn); one whose client
 * left first (a reset mid-body, a timeout) is no server error: `http_client_gone` at debug.
 * Either kind is logged at most errorLogLimit.lines times per window, then once as
 * `http_errors_suppressed` / `http_clients_gone_suppressed` with the count left out (LogBudget),
 * and a path in a line is cut to LOGGED_PATH_MAX (loggedPath): no client can make the daemon write an
 * unbounded log.
 * Resolves once listening, after logging `http_listening` with the host and port bound; rejects
 * with a one-line UsageError naming --http (the address is in use, or not this host's)
 * when it cannot listen.
 */
export async function startHttpServer(address: HttpAddress, endpoints: HttpEndpoints, log: Logger, options: HttpServerOptions = {}): Promise<HttpServer> {
  // Node checks headersTimeout and requestTimeout only every connectionsCheckingInterval
  // (30 s by default): a client trickling its headers was held three times as long.
  let loopback = false; // set once bound: whether the address bound is the loopback interface
  const errorLines = new LogBudget(log, 'http_errors_suppressed', options.errorLogLimit);
  const goneLines = new LogBudget(log, 'http_clients_gone_suppressed', options.errorLogLimit);
  const connections = new WeakMap<Socket, Connection>();
  const server = createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    let connection = connections.get(req.socket);
    if (!connection) connections.set(req.socket, (connection = { inFlight: 0, latest: null, refused: false }));
    if (connection.refused) return;
    connection.latest = req;
    if (connection.inFlight >= MAX_REQUESTS_IN_FLIGHT) {
      connection.refused = true;
      req.socket.destroy();
      return;
    }
    connection.inFlight += 1;
    let answered = false;
    const done = () => {
      if (answered) return;
      answered = true;
      connection.inFlight -= 1;
    };
    res.once('finish', done);
    res.once('close', done);
    const target = readRequestTarget(req.url ?? '/', req.headers.host);
    if (target === null) {
      send(res, 400, 'text/plain; charset=utf-8', 'bad request: the request target is neither a path (/...) nor an http:// URL\n', req.method === 'HEAD');
      return;
    }
    if (loopback && !namesLoopback(target.host)) {
      send(res, 403, 'text/plain; charset=utf-8', 'forbidden: this server listens on loopback and answers only requests for localhost, 127.0.0.1 or [::1]\n', req.method === 'HEAD');
      return;
    }
    void respond(req, res, target, endpoints).catch((error) => {
      if (clientGone(req, error)) {
        // The client left (it reset the connection mid-body, or a timeout cut it): no server error, no one to answer.
        if (log.isLevelEnabled('debug') && goneLines.take()) log.debug({ event: 'http_client_gone', method: req.method, path: loggedPath(req.url), error: errorText(error, 200) }, 'http client left before its request was answered');
        res.destroy();
        return;
      }
      if (errorLines.take()) log.warn({ event: 'http_error', method: req.method, path: loggedPath(req.url), error: errorText(error) }, 'http request failed');
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n', req.method === 'HEAD');
      else res.destroy();
    });
  });
  // Connections in arrival order, oldest first: the one closed to make room is the oldest not being answered.
  const open = new Set<Socket>();
  const evictable = (socket: Socket): boolean => {
    const connection = connections.get(socket);
    if (!connection || connection.inFlight === 0) return true; // no request yet, or idle between requests
    return connection.latest !== null && !connection.latest.complete; // its body still arrives
  };
  server.on('connection', (socket: Socket) => {
    if (open.size >= MAX_HTTP_CONNECTIONS) {
      let oldest: Socket | null = null;
      for (const s of open) {
        if (evictable(s)) {
          oldest = s;
          break;
        }
      }
      if (!oldest) {
        socket.destroy();
        return;
      }
      open.delete(oldest);
      oldest.destroy();
    }
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  server.requestTimeout = 15_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) =>
      reject(new UsageError(`cannot listen on ${formatAddress(address)} for --http: ${error.code ?? error.message}`, { cause: error }));
    server.once('error', onError);
    server.listen(address.port, address.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  // The address bound, not the one asked for: `0:9464` listens on 0.0.0.0, `localhost` on 127.0.0.1 or ::1.
  const { address: host, port } = server.address() as AddressInfo;
  loopback = isLoopbackIp(host);
  log.info({ event: 'http_listening', host, port, paths: endpoints.console ? ['/healthz', '/metrics', '/'] : ['/healthz', '/metrics'] }, 'health and metrics served');
  let closed: Promise<void> | null = null;
  return {
    host,
    port,
    close() {
      closed ??= new Promise<void>((resolve) => {
        errorLines.close();
        goneLines.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

async function respond(req: IncomingMessage, res: ServerResponse, target: RequestTarget, endpoints: HttpEndpoints): Promise<void> {
  const { path } = target;
  if (endpoints.starting?.()) {
    res.setHeader('Retry-After', '1');
    if (path === '/healthz') send(res, 503, 'application/json; charset=utf-8', '{"status":"starting"}\n', req.method === 'HEAD');
    else send(res, 503, 'text/plain; charset=utf-8', 'starting\n', req.method === 'HEAD');
    return;
  }
  if (path !== '/healthz' && path !== '/metrics') {
    if (endpoints.console && (await endpoints.console(req, res, target))) return;
    send(res, 404, 'text/plain; charset=utf-8', 'not found: try /healthz or /metrics\n', req.method === 'HEAD');
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false);
    return;
  }
  const head = req.method === 'HEAD';
  if (path === '/healthz') {
    const report = await endpoints.health();
    send(res, report.status === 'ok' ? 200 : 503, 'application/json; charset=utf-8', `${JSON.stringify(report)}\n`, head);
  } else {
    const scrape = await endpoints.metrics();
    send(res, 200, scrape.contentType, scrape.body, head);
  }
}

/** Whether `error` says the client went away (reset, a timeout that cut it) rather than that serving failed. */
function clientGone(req: IncomingMessage, error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_PREMATURE_CLOSE' || req.socket.destroyed;
}

/** Whether `ip` is a loopback address: 127.0.0.0/8 or ::1 (IPv4-mapped included). */
function isLoopbackIp(ip: string): boolean {
  const v4 = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
  return ip === '::1' || (isIP(v4) === 4 && v4.startsWith('127.'));
}

/**
 * Whether a Host header (or an absolute-form target's host) names this machine's loopback: `localhost` (or a name under
 * `.localhost`, which browsers resolve to loopback themselves) or a loopback IP, with any
 * port; a request without one (HTTP/1.0) too. A page on another site that points its own
 * name at 127.0.0.1 (DNS rebinding) sends that name, so a loopback-bound server refuses
 * it and the page cannot read the console, the metrics or the health report.
 */
export function namesLoopback(hostHeader: string | undefined): boolean {
  if (hostHeader === undefined) return true;
  // `[IPv6]` or a name or IPv4, then at most a port: anything else names no host of ours.
  const match = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9.-]+))(?::\d{1,5})?$/.exec(hostHeader.trim().toLowerCase());
  if (!match) return false;
  const name = match[1] ?? match[2];
  return name === 'localhost' || name.endsWith('.localhost') || isLoopbackIp(name);
}

function send(res: ServerResponse, status: number, contentType: string, body: string, head: boolean): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(head ? undefined : body);
}
