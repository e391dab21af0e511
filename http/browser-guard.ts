/**
 * What a browser may do with this server (DESIGN.md §4), decided once per request, before any
 * handler (REST and /mcp alike).
 *
 * Security: in local mode a request without credentials is root and `User <name>` needs no secret,
 * so any web page the user visits could otherwise read and change everything (a fetch, a form POST,
 * an <img>, DNS rebinding). Browsers mark their requests: `Host` names the site the page asked for,
 * `Origin` the page's site, `Sec-Fetch-Site` whether it is cross-site. Local mode refuses any
 * request whose Host is not this server's loopback name, and any request carrying a foreign Origin
 * (or `Sec-Fetch-Site: cross-site` without an allowed Origin), whatever its method. Clients that are
 * not browsers (curl, SDKs, the CLI) send no Origin and are unaffected. Hosted mode needs a bearer
 * secret on every request and uses no cookies, so there the contract's permissive CORS is safe.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HttpSettings } from '../daemon/rpc/settings.js';

export type GuardVerdict =
  /** Served; `allowOrigin` is the Access-Control-Allow-Origin to send, if any. */
  { ok: true; allowOrigin?: string } | { ok: false; message: string };

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];

/** Returns the check for one server; `localPort` is the port the request actually arrived on. */
export function browserGuard(
  settings: Pick<HttpSettings, 'mode' | 'listen' | 'corsOrigins'>,
): (headers: IncomingHttpHeaders, localPort: number | undefined) => GuardVerdict {
  if (settings.mode === 'hosted') return () => ({ ok: true, allowOrigin: '*' });
  const listenName = settings.listen.host.includes(':')
    ? `[${settings.listen.host.toLowerCase()}]`
    : settings.listen.host.toLowerCase();
  const names = [...new Set([...LOOPBACK_NAMES, listenName])];
  return (headers, localPort) => {
    const port = localPort ?? settings.listen.port;
    const host = (headers.host ?? '').toLowerCase();
    const hosts = names.map((n) => `${n}:${port}`);
    if (port === 80) hosts.push(...names);
    if (!hosts.includes(host)) {
      return {
        ok: false,
        message: `Host '${host.slice(0, 200) || '(none)'}' is not this server's address (a local server answers only to ${names[0]}:${port} or localhost:${port})`,
      };
    }
    const origin = headers.origin;
    if (origin !== undefined) {
      // The web UI served by this very server is same-origin; any name of ours counts.
      const own = hosts.some((h) => origin === `http://${h}`);
      if (own || settings.corsOrigins.has(origin)) return { ok: true, allowOrigin: origin };
      return {
        ok: false,
        message: `cross-origin request from '${origin.slice(0, 200)}' refused: add the origin to SERVICE_CORS_ORIGINS to allow it`,
      };
    }
    if (headers['sec-fetch-site'] === 'cross-site')
      return {
        ok: false,
        message: 'cross-site request refused (Sec-Fetch-Site: cross-site without an allowed Origin)',
      };
    return { ok: true };
  };
}
