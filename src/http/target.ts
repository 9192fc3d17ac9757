/**
 * The request target as the server serves it: read once, by the server, for every path it
 * serves and the console's alike. Not `new URL(target, base)`: that reads `//healthz` and
 * `/\healthz` as the host `healthz` with the path `/`, so they were served the overview page.
 */

/** What a request target names. */
export interface RequestTarget {
  /** The path exactly as sent, up to `?` or `#`: no dot segment resolved, no `\` read as `/`. */
  path: string;
  /** The query after `?`, decoded as a form's fields. */
  query: URLSearchParams;
  /**
   * The host the request names: the target's own in absolute-form (RFC 9112 §3.2.2: the
   * Host header is then ignored), else the Host header (undefined without one).
   */
  host: string | undefined;
}

/** `http://` (any case), then an authority, then the rest of the target. */
const ABSOLUTE_FORM = /^http:\/\/([^/?#]*)([/?#].*)?$/is;

/** An authority with a host (`[IPv6]`, or a name or IPv4 of RFC 3986's characters) and at most a port: no userinfo. */
const HOST_AND_PORT = /^(?:\[[0-9a-f:.]+\]|[a-z0-9._~%!$&'()*+,;=-]+)(?::\d{0,5})?$/i;

/**
 * Reads a request target in origin-form (`/PATH?QUERY`) or absolute-form
 * (`http://HOST/PATH?QUERY`, whose empty path is `/`); null for any other (asterisk-form
 * `*`, a scheme other than http, userinfo, no host or one that does not parse, no leading `/`): the server answers 400.
 */
export function readRequestTarget(target: string, hostHeader: string | undefined): RequestTarget | null {
  let host = hostHeader;
  let rest = target;
  if (!target.startsWith('/')) {
    const absolute = ABSOLUTE_FORM.exec(target);
    if (!absolute || !HOST_AND_PORT.test(absolute[1]!)) return null;
    host = absolute[1];
    rest = absolute[2] ?? '/';
    if (!rest.startsWith('/')) rest = `/${rest}`; // `http://h?q`: the empty path is `/`
  }
  const end = rest.search(/[?#]/);
  const path = end === -1 ? rest : rest.slice(0, end);
  const search = end === -1 || rest[end] === '#' ? '' : rest.slice(end + 1).split('#', 1)[0]!;
  return { path, query: new URLSearchParams(search), host };
}
