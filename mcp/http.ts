/**
 * Streamable HTTP MCP at /mcp, mounted on the HTTP sidecar's express app. The REST app calls
 * `mountMcp(app, client, opts)` once, before its JSON 404 handler, after its browser guard (Host
 * and Origin checks, http/browser-guard.ts), which covers /mcp as every other route.
 *
 * - Every request carries its own credentials (`Authorization`, `X-Service-Workspace`,
 *   `X-Service-On-Behalf-Of`) and is authenticated by the daemon (`auth.whoami`, origin remote,
 *   with this server's policy, so the anonymous rules are REST's).
 * - `initialize` without `Mcp-Session-Id` starts a session bound to the identity that created it;
 *   any later request on it must present the very same credentials (else 403), so a leaked
 *   session id is useless with someone else's credentials, and vice versa.
 * - Sessions are capped per client (its credentials; anonymous callers per address): a client over
 *   its cap loses its own least recently used session, never another client's. When the server's
 *   cap is reached, new sessions are refused (503) rather than evicting anyone.
 * - Any other POST without `Mcp-Session-Id` is served statelessly (a fresh server per request,
 *   JSON response).
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Caller, DaemonClient } from '../daemon/rpc/client.js';
import { defaultDataDir } from '../daemon/rpc/connect.js';
import { DaemonLink } from '../daemon/rpc/link.js';
import { credsFromHeaders } from '../daemon/rpc/credentials.js';
import type { AuthPolicy, Creds, WhoAmI } from '../daemon/rpc/protocol.js';
import type { McpSessionSettings } from '../daemon/rpc/settings.js';
import { VfsError, httpStatus } from '../daemon/errors.js';
import { ChangeFeed } from './resources.js';
import { createMcpServer } from './server.js';

export interface McpHttpOptions {
  /** The server's SERVICE_ANONYMOUS/SERVICE_USER_AUTH, declared to the daemon with every request. */
  policy: AuthPolicy;
  /** Session lifetime and caps (SERVICE_MCP_SESSION_TTL, SERVICE_MCP_MAX_SESSIONS, SERVICE_MCP_MAX_SESSIONS_PER_CLIENT). */
  sessions: McpSessionSettings;
  /** SERVICE_MAX_FILE_SIZE: bounds the JSON body (a write_file carries a whole file). */
  maxFileSize: number;
  /** The daemon's data dir, for the dedicated change-event connection (default SERVICE_DATA_DIR). */
  dataDir?: string;
}

interface Session {
  id: string;
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  fingerprint: Buffer;
  /** Whose cap this session counts against (see clientKey). */
  client: string;
  lastSeen: number;
  openStreams: number;
  /** False while its initialize request is still being answered: never evicted mid-answer. */
  settled: boolean;
}

// JSON-RPC error codes for transport-level refusals (the spec leaves -32000..-32099 to servers).
const RPC_UNAUTHORIZED = -32001;
const RPC_FORBIDDEN = -32003;
const RPC_SESSION_NOT_FOUND = -32004;
const RPC_BUSY = -32005;

function rpcError(res: Response, status: number, code: number, message: string, data?: unknown): void {
  if (res.headersSent) return;
  res
    .status(status)
    .json({ jsonrpc: '2.0', error: data === undefined ? { code, message } : { code, message, data }, id: null });
}

function header(req: Request, name: string): string | undefined {
  const v = req.get(name)?.trim();
  return v ? v : undefined;
}

/** Security: a digest of the raw credentials, so sessions never keep a second copy of a token to compare. */
function fingerprint(c: Creds): Buffer {
  return createHash('sha256')
    .update(JSON.stringify([c.authorization ?? null, c.workspace ?? null, c.onBehalfOf ?? null]))
    .digest();
}

/**
 * Whose session cap a new session counts against: the authenticated identity (user, delegate,
 * workspace), so spelling the same credentials differently does not buy more sessions; anonymous
 * callers (who all share the empty credentials) count per address.
 */
function clientKey(c: Creds, me: WhoAmI, req: Request): string {
  if (c.authorization === undefined) return `anon:${req.socket.remoteAddress ?? ''}`;
  return JSON.stringify([me.uid, me.on_behalf_of ?? null, me.workspace?.id ?? null]);
}

/**
 * The largest JSON-RPC body /mcp parses (a bigger one gets 413 before any parsing): room for a
 * write_file of the largest file (JSON escaping may double it), but never more than 64 MiB, since a
 * body is read and parsed before its credentials are checked. Larger files go through REST's PUT.
 */
function mcpBodyMax(maxFileSize: number): number {
  return Math.min(maxFileSize * 2 + 1024 * 1024, 64 * 1024 * 1024);
}

export function mountMcp(app: Express, client: DaemonClient, opts: McpHttpOptions): void {
  const sessions = new Map<string, Session>();
  const byClient = new Map<string, Set<Session>>();
  let initializing = 0;
  const { idleMs, maxSessions, maxSessionsPerClient } = opts.sessions;
  const dataDir = opts.dataDir ?? defaultDataDir();
  // Change events for resource subscriptions arrive on their own connection, opened on first use.
  const feed = new ChangeFeed(new DaemonLink(dataDir, {}, { name: 'mdvfs serve', spawn: false }));
  const json = express.json({ limit: mcpBodyMax(opts.maxFileSize) });

  const closeSession = (s: Session): void => {
    sessions.delete(s.id);
    const mine = byClient.get(s.client);
    mine?.delete(s);
    if (mine?.size === 0) byClient.delete(s.client);
    void s.transport.close().catch(() => undefined);
    void s.server.close().catch(() => undefined);
  };

  /**
   * Security: a client over its cap loses its own least recently used sessions (idle ones first),
   * never another client's. Sessions still answering their initialize are spared (the cap is
   * enforced again when they settle).
   */
  const enforceClientCap = (key: string, keep?: Session): void => {
    const mine = byClient.get(key);
    while (mine !== undefined && mine.size > maxSessionsPerClient) {
      let victim: Session | undefined;
      for (const o of mine) {
        if (o === keep || !o.settled) continue;
        if (
          !victim ||
          (o.openStreams === 0 && victim.openStreams > 0) ||
          (o.openStreams === victim.openStreams && o.lastSeen < victim.lastSeen)
        )
          victim = o;
      }
      if (victim === undefined) break;
      closeSession(victim);
    }
  };

  const addSession = (s: Session): void => {
    sessions.set(s.id, s);
    let mine = byClient.get(s.client);
    if (mine === undefined) byClient.set(s.client, (mine = new Set()));
    mine.add(s);
    enforceClientCap(s.client, s);
  };

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const s of sessions.values()) if (s.openStreams === 0 && now - s.lastSeen > idleMs) closeSession(s);
    },
    Math.min(60_000, Math.max(1000, idleMs / 2)),
  );
  sweep.unref();

  const router = express.Router();
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
      process.stderr.write(
        `mdvfs http: /mcp ${req.method} failed: ${err instanceof Error ? err.message : String(err)}\n`,
      );
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

    // Authenticate this very request; the daemon applies this server's SERVICE_ANONYMOUS / SERVICE_USER_AUTH.
    const creds = credsFromHeaders((name) => req.get(name), opts.policy);
    const fp = fingerprint(creds);
    const caller: Caller = client.as(creds);
    let me: WhoAmI;
    try {
      me = await caller.call('auth.whoami', {});
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
      if (!timingSafeEqual(s.fingerprint, fp)) {
        return rpcError(
          res,
          403,
          RPC_FORBIDDEN,
          'This session belongs to another identity; start a new session with these credentials',
          { code: 'EPERM' },
        );
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
      return rpcError(
        res,
        405,
        -32000,
        'Method not allowed: GET needs an Mcp-Session-Id (start a session with initialize)',
        { code: 'EMETHOD' },
      );
    }
    if (req.method === 'DELETE')
      return rpcError(res, 400, -32000, 'Bad request: Mcp-Session-Id header required', { code: 'EINVAL' });

    if (isInitializeRequest(req.body)) {
      const key = clientKey(creds, me, req);
      // Security: a full server refuses new sessions instead of evicting other clients' sessions.
      // A client already at its own cap may still start one (it replaces its own oldest).
      if (sessions.size + initializing >= maxSessions && (byClient.get(key)?.size ?? 0) < maxSessionsPerClient) {
        res.set('Retry-After', '60');
        return rpcError(
          res,
          503,
          RPC_BUSY,
          `Too many MCP sessions on this server (SERVICE_MCP_MAX_SESSIONS=${maxSessions}); close unused sessions (DELETE /mcp) or retry later`,
          { code: 'EBUSY' },
        );
      }
      const server = createMcpServer({ callerFor: () => caller, feed });
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          addSession({
            id,
            transport,
            server,
            fingerprint: fp,
            client: key,
            lastSeen: Date.now(),
            openStreams: 0,
            settled: false,
          });
        },
      });
      transport.onclose = () => {
        const id = transport.sessionId;
        const s = id === undefined ? undefined : sessions.get(id);
        if (s?.transport === transport) closeSession(s);
      };
      initializing++;
      try {
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
      } finally {
        initializing--;
        const s = transport.sessionId === undefined ? undefined : sessions.get(transport.sessionId);
        if (s?.transport === transport) {
          s.settled = true;
          s.lastSeen = Date.now();
          enforceClientCap(key, s);
        }
      }
      if (transport.sessionId === undefined) void server.close().catch(() => undefined);
      return;
    }

    // Stateless: a fresh server and transport for this one request.
    const server = createMcpServer({ callerFor: () => caller });
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true }); // no sessionIdGenerator: stateless
    res.on('close', () => {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }
}
