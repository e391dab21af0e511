/**
 * Streamable HTTP MCP at /mcp, mounted on the HTTP sidecar's express app. The REST app calls
 * `mountMcp(app, client, opts)` once, before its JSON 404 handler.
 *
 * - Every request carries its own credentials (`Authorization`, `X-Service-Workspace`,
 *   `X-Service-On-Behalf-Of`) and is authenticated by the daemon (`auth.whoami`, origin remote, so
 *   the anonymous rules are REST's).
 * - `initialize` without `Mcp-Session-Id` starts a session bound to the identity that created it;
 *   any later request on it must present the very same credentials (else 403), so a leaked
 *   session id is useless with someone else's credentials, and vice versa.
 * - Any other POST without `Mcp-Session-Id` is served statelessly (a fresh server per request,
 *   JSON response).
 * - On loopback binds the Host header must name the loopback address (DNS-rebinding protection).
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Caller, DaemonClient } from '../daemon/rpc/client.js';
import { connectDaemon, defaultDataDir } from '../daemon/rpc/connect.js';
import type { Creds } from '../daemon/rpc/protocol.js';
import { VfsError, httpStatus } from '../daemon/errors.js';
import { ChangeFeed } from './resources.js';
import { createMcpServer } from './server.js';

export interface McpHttpOptions {
  /** host:port the sidecar listens on (for the Host-header check on localhost binds). */
  listen: string;
  /** The daemon's data dir, for the dedicated change-event connection (default SERVICE_DATA_DIR). */
  dataDir?: string;
  /** Idle sessions are closed after this many ms (default SERVICE_MCP_SESSION_TTL seconds, else 30 min). */
  sessionIdleMs?: number;
  /** Most live sessions; the least recently used is closed beyond it (default SERVICE_MCP_MAX_SESSIONS, else 1000). */
  maxSessions?: number;
}

interface Session {
  id: string;
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  fingerprint: Buffer;
  lastSeen: number;
  openStreams: number;
}

// JSON-RPC error codes for transport-level refusals (the spec leaves -32000..-32099 to servers).
const RPC_UNAUTHORIZED = -32001;
const RPC_FORBIDDEN = -32003;
const RPC_SESSION_NOT_FOUND = -32004;

function rpcError(res: Response, status: number, code: number, message: string, data?: unknown): void {
  if (res.headersSent) return;
  res.status(status).json({ jsonrpc: '2.0', error: data === undefined ? { code, message } : { code, message, data }, id: null });
}

function header(req: Request, name: string): string | undefined {
  const v = req.get(name)?.trim();
  return v ? v : undefined;
}

function credsOf(req: Request): Creds {
  const creds: Creds = { origin: 'remote' };
  const authorization = header(req, 'authorization');
  const workspace = header(req, 'x-service-workspace');
  const onBehalfOf = header(req, 'x-service-on-behalf-of');
  if (authorization !== undefined) creds.authorization = authorization;
  if (workspace !== undefined) creds.workspace = workspace;
  if (onBehalfOf !== undefined) creds.onBehalfOf = onBehalfOf;
  return creds;
}

/** Security: a digest of the raw credentials, so sessions never keep a second copy of a token to compare. */
function fingerprint(c: Creds): Buffer {
  return createHash('sha256').update(JSON.stringify([c.authorization ?? null, c.workspace ?? null, c.onBehalfOf ?? null])).digest();
}

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

function listenHost(listen: string): string {
  const i = listen.lastIndexOf(':');
  return i < 0 ? listen : listen.slice(0, i);
}

/**
 * Security: DNS-rebinding protection. A page on evil.example that rebinds its name to 127.0.0.1
 * still sends `Host: evil.example`; only loopback names with the port we actually accepted on pass.
 */
function hostCheck(listen: string): (req: Request, res: Response, next: NextFunction) => void {
  const loopback = isLoopbackHost(listenHost(listen));
  return (req, res, next) => {
    if (!loopback) return next();
    const port = req.socket.localPort;
    const host = (req.headers.host ?? '').toLowerCase();
    const names = ['127.0.0.1', 'localhost', '[::1]'];
    const allowed = names.map((n) => `${n}:${port}`);
    if (port === 80) allowed.push(...names);
    if (allowed.includes(host)) return next();
    rpcError(res, 403, RPC_FORBIDDEN, `Invalid Host header: ${host || '(none)'}`);
  };
}

function envNumber(name: string): number | undefined {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : undefined;
}

export function mountMcp(app: Express, client: DaemonClient, opts: McpHttpOptions): void {
  const sessions = new Map<string, Session>();
  const idleMs = opts.sessionIdleMs ?? (envNumber('SERVICE_MCP_SESSION_TTL') ?? 1800) * 1000;
  const maxSessions = opts.maxSessions ?? envNumber('SERVICE_MCP_MAX_SESSIONS') ?? 1000;
  const dataDir = opts.dataDir ?? defaultDataDir();
  // Change events for resource subscriptions arrive on their own connection, opened on first use.
  const feed = new ChangeFeed(() => connectDaemon({ dataDir, spawn: false }));
  const maxFile = envNumber('SERVICE_MAX_FILE_SIZE') ?? 10 * 1024 * 1024;
  const json = express.json({ limit: maxFile * 2 + 1024 * 1024 });

  const closeSession = (s: Session): void => {
    sessions.delete(s.id);
    void s.transport.close().catch(() => undefined);
    void s.server.close().catch(() => undefined);
  };

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const s of sessions.values()) if (s.openStreams === 0 && now - s.lastSeen > idleMs) closeSession(s);
  }, Math.min(60_000, Math.max(1000, idleMs / 2)));
  sweep.unref();

  const evictIfFull = (): void => {
    if (sessions.size < maxSessions) return;
    let victim: Session | undefined;
    for (const s of sessions.values()) {
      if (!victim || (s.openStreams === 0 && victim.openStreams > 0) || (s.openStreams === victim.openStreams && s.lastSeen < victim.lastSeen)) victim = s;
    }
    if (victim) closeSession(victim);
  };

  const router = express.Router();
  router.use('/mcp', hostCheck(opts.listen));
  router.use('/mcp', (req, res, next) => {
    json(req, res, (err?: unknown) => {
      if (err === undefined) return next();
      const e = err as { type?: string; status?: number };
      if (e.type === 'entity.too.large') return rpcError(res, 413, -32600, 'Request body too large', { code: 'EFBIG' });
      rpcError(res, 400, -32700, 'Parse error: the body is not valid JSON', { code: 'EINVAL' });
    });
  });

  router.all('/mcp', async (req, res) => {
    try {
      await handle(req, res);
    } catch (err) {
      process.stderr.write(`mdvfs http: /mcp ${req.method} failed: ${err instanceof Error ? err.message : String(err)}\n`);
      rpcError(res, 500, -32603, 'Internal error', { code: 'EIO' });
    }
  });
  app.use(router);

  async function handle(req: Request, res: Response): Promise<void> {
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
      res.set('Allow', 'GET, POST, DELETE');
      return rpcError(res, 405, -32000, 'Method not allowed', { code: 'EMETHOD' });
    }

    // Authenticate this very request; the daemon applies SERVICE_ANONYMOUS / SERVICE_USER_AUTH.
    const creds = credsOf(req);
    const caller: Caller = client.as(creds);
    try {
      await caller.call('auth.whoami', {});
    } catch (err) {
      if (!(err instanceof VfsError)) throw err;
      const status = httpStatus(err.code);
      return rpcError(res, status, status === 401 ? RPC_UNAUTHORIZED : RPC_FORBIDDEN, err.message, { code: err.code });
    }

    const sid = header(req, 'mcp-session-id');
    if (sid !== undefined) {
      const s = sessions.get(sid);
      if (!s) return rpcError(res, 404, RPC_SESSION_NOT_FOUND, 'Session not found', { code: 'ENOENT' });
      // Security: the credential-switch attack. The session acts with its creator's identity, so
      // a request presenting other credentials must not ride on it.
      if (!timingSafeEqual(s.fingerprint, fingerprint(creds))) {
        return rpcError(res, 403, RPC_FORBIDDEN, 'This session belongs to another identity; start a new session with these credentials', { code: 'EPERM' });
      }
      s.lastSeen = Date.now();
      if (req.method === 'GET') {
        s.openStreams++;
        res.on('close', () => {
          s.openStreams--;
          s.lastSeen = Date.now();
        });
      }
      await s.transport.handleRequest(req, res, req.body);
      return;
    }

    if (req.method === 'GET') {
      res.set('Allow', 'POST, DELETE');
      return rpcError(res, 405, -32000, 'Method not allowed: GET needs an Mcp-Session-Id (start a session with initialize)', { code: 'EMETHOD' });
    }
    if (req.method === 'DELETE') return rpcError(res, 400, -32000, 'Bad request: Mcp-Session-Id header required', { code: 'EINVAL' });

    if (isInitializeRequest(req.body)) {
      evictIfFull();
      const server = createMcpServer({ callerFor: () => caller, feed });
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, { id, transport, server, fingerprint: fingerprint(creds), lastSeen: Date.now(), openStreams: 0 });
        },
      });
      transport.onclose = () => {
        const id = transport.sessionId;
        if (id !== undefined && sessions.get(id)?.transport === transport) sessions.delete(id);
      };
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
      if (transport.sessionId === undefined) void server.close().catch(() => undefined);
      return;
    }

    // Stateless: a fresh server and transport for this one request.
    const server = createMcpServer({ callerFor: () => caller });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }
}
