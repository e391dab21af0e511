/**
 * The REST app: the browser guard and CORS, request log, the routes of the contract, MCP at /mcp, JSON errors.
 * Every route is one call into the daemon with the caller's raw credentials; the daemon
 * authenticates and checks permissions.
 */
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { log as rootLog } from '../daemon/rpc/log.js';
import { formatListen, type HttpSettings } from '../daemon/rpc/settings.js';
import { mountMcp } from '../mcp/http.js';
import { errorHandler, notFound } from './errors.js';
import { openApiDocument } from './openapi.js';
import { browserGuard } from './browser-guard.js';
import type { AppClient } from '../daemon/rpc/reconnecting.js';
import { Registrar, callerOf, sendJson, type RouteContext } from './request.js';
import { registerOps } from './ops.js';
import { registerFs } from './routes/fs.js';
import { registerEvents } from './events.js';
import { mountWeb } from './web.js';
import { exposition, requestDone, requestStarted } from './metrics.js';

export interface AppOptions {
  /** The sidecar's settings (mode, listen address, CORS origins, policy, limits). */
  settings: HttpSettings;
  /** Where request lines (every one) and internal errors go, as fields; default: the process's log (daemon/rpc/log.ts). */
  log?: (fields: Record<string, unknown>) => void;
}

/** A line given as fields, its level among them (default info): the process's log. */
export function logFields(fields: Record<string, unknown>): void {
  const { level, msg, ...rest } = fields;
  const write = level === 'error' || level === 'warn' || level === 'debug' ? rootLog[level] : rootLog.info;
  write(rest, typeof msg === 'string' ? msg : '');
}

/** The fields of one request's log line, in the order they are written. */
interface RequestLine {
  req_id: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  bytes: number;
  code?: unknown;
  aborted?: true;
}

/**
 * The request line (level debug: see SERVICE_LOG_LEVEL), built by hand without an intermediate
 * object because it runs once per request; the same JSON as `log.debug(f, 'request')` would write.
 */
function requestLine(f: RequestLine): void {
  let tail = `,"req_id":${JSON.stringify(f.req_id)},"method":${JSON.stringify(f.method)},"path":${JSON.stringify(f.path)},"status":${f.status},"ms":${f.ms},"bytes":${f.bytes}`;
  if (f.code !== undefined) tail += `,"code":${JSON.stringify(f.code)}`;
  if (f.aborted) tail += ',"aborted":true';
  rootLog.writeTail('debug', 'request', tail);
}

const ALLOW_HEADERS =
  'Authorization, Content-Type, X-Service-Type, X-Service-Workspace, X-Service-On-Behalf-Of, If-Match, If-None-Match, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, X-Request-Id';
const EXPOSE_HEADERS = 'ETag, X-Request-Id, Mcp-Session-Id, Allow';
const REQ_ID = /^[\w.:-]{1,100}$/;

/**
 * The front of every request, one middleware (it runs on every request, so one router layer):
 * a request id (the client's X-Request-Id if it is sane, else a UUID), one log line when the
 * response is done, the browser guard (see browser-guard.ts: local mode refuses foreign Hosts and
 * Origins here, before any handler, /mcp included), and CORS: hosted mode is permissive (the
 * contract's hosted deployment), local mode answers only allowed origins. Preflights answer 204 on
 * any path. Security: never logs headers, so Authorization values cannot leak.
 */
function front(settings: HttpSettings, log: ((fields: Record<string, unknown>) => void) | undefined): RequestHandler {
  const guard = browserGuard(settings);
  const local = settings.mode === 'local';
  const debug = log === undefined && rootLog.enabled('debug');
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const reqId = typeof given === 'string' && REQ_ID.test(given) ? given : randomUUID();
    res.locals.reqId = reqId;
    res.setHeader('X-Request-Id', reqId);
    const start = process.hrtime.bigint();
    requestStarted();
    res.once('close', () => {
      const url = req.originalUrl;
      const f: RequestLine = {
        req_id: reqId,
        method: req.method,
        path: url.length > 2000 ? `${url.slice(0, 2000)}…` : url,
        status: res.statusCode,
        ms: Math.round(Number(process.hrtime.bigint() - start) / 1e3) / 1e3,
        bytes: Number(res.getHeader('content-length') ?? 0) || 0,
      };
      if (res.locals.errorCode !== undefined) f.code = res.locals.errorCode;
      if (!res.writableFinished) f.aborted = true;
      requestDone(url, f.status, f.ms / 1000);
      if (log !== undefined) log({ ...f });
      else if (debug) requestLine(f);
    });
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (workerHeader !== undefined) res.setHeader('X-Mdvfs-Worker', workerHeader);
    if (local) res.setHeader('Vary', 'Origin');
    const verdict = guard(req.headers, req.socket.localPort);
    if (!verdict.ok) {
      refuse(req, res, verdict.message);
      return;
    }
    if (verdict.allowOrigin !== undefined) {
      res.setHeader('Access-Control-Allow-Origin', verdict.allowOrigin);
      res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    }
    if (req.method === 'OPTIONS') {
      if (verdict.allowOrigin !== undefined) {
        res.setHeader('Access-Control-Allow-Methods', 'GET, HEAD, PUT, POST, DELETE, OPTIONS');
        res.setHeader('Access-Control-Allow-Headers', ALLOW_HEADERS);
        res.setHeader('Access-Control-Max-Age', '600');
      }
      res.status(204).end();
      return;
    }
    next();
  };
}

/**
 * Tests only (MDVFS_TEST_WORKER_HEADER=1, an internal variable, not a setting): every answer names
 * the worker process that served it, so a test can tell that requests were spread over the workers.
 */
const workerHeader = process.env.MDVFS_TEST_WORKER_HEADER === '1' ? String(process.pid) : undefined;

/** 403 from the browser guard: REST's `{error, code}`, or a JSON-RPC error on /mcp. */
function refuse(req: Request, res: Response, message: string): void {
  res.locals.errorCode = 'EACCES';
  const body =
    req.path === '/mcp'
      ? {
          jsonrpc: '2.0',
          error: { code: -32003, message: `Forbidden: ${message}`, data: { code: 'EACCES' } },
          id: null,
        }
      : { error: `EACCES: ${message}`, code: 'EACCES' };
  res.status(403).setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}

/** The express app over one daemon connection (which may reconnect: see AppClient). */
export function createApp(client: AppClient, opts: AppOptions): Express {
  const log = opts.log ?? logFields;
  const { settings } = opts;
  const ctx: RouteContext = { client, maxFileSize: settings.maxFileSize, policy: settings.policy };
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false); // ETags are the daemon's content ids, set by the fs routes
  app.set('query parser', 'simple');
  // Read when app.router is first made (app.use below): paths are case-sensitive, /MCP is not /mcp.
  app.enable('case sensitive routing');

  app.use(front(settings, opts.log));

  // The routes go on the app's own router (not a mounted sub-router): one router pass per request.
  const r = new Registrar(app.router);
  // /fs first: the router tries layers in order, and file reads and writes are the hot path.
  registerFs(r, ctx);
  // Works without credentials (even with SERVICE_ANONYMOUS=deny) and reveals nothing private.
  r.add('get', '/health', async (_req, res) => {
    // Security: as a remote request under this server's policy (hosted: no word about bootstrap), whatever its headers.
    // Which store the daemon serves is for front ends (the socket's handshake), not for anonymous callers.
    const { store: _store, ...health } = await client
      .as({ origin: 'remote', policy: settings.policy })
      .call('sys.health', {});
    sendJson(res, health);
  });
  registerOps(r, ctx);
  registerEvents(r, ctx);
  // Root/wheel only: the daemon checks the caller as for /admin/* (sys.metrics is an admin method).
  r.add('get', '/metrics', async (req, res) => {
    const daemon = await callerOf(ctx, req).call('sys.metrics', {});
    res.type('text/plain; version=0.0.4; charset=utf-8').send(exposition(client, daemon));
  });
  r.add('get', '/openapi.json', async (req, res) => {
    // Like every route but /health, the document follows SERVICE_ANONYMOUS=deny.
    await callerOf(ctx, req).call('auth.whoami', {});
    sendJson(res, openApiDocument(`${req.protocol}://${req.get('host') ?? formatListen(settings.listen)}`));
  });
  r.addMethodNotAllowed();
  mountWeb(app);

  mountMcp(app, client, { policy: settings.policy, sessions: settings.mcp, maxFileSize: settings.maxFileSize });

  app.use(notFound);
  app.use(errorHandler(log));
  return app;
}
