/**
 * Streamable HTTP MCP at /mcp, mounted on the HTTP sidecar's express app. The REST app calls
 * `mountMcp(app, client, opts)` once, before its JSON 404 handler, after its browser guard (Host
 * and Origin checks, http/browser-guard.ts), which covers /mcp as every other route.
 *
 * - Every request carries its own credentials (`Authorization`, `X-Service-Workspace`,
 *   `X-Service-On-Behalf-Of`) and is authenticated by the daemon (origin remote, with this
 *   server's policy, so the anonymous rules are REST's).
 * - Sessions live in the daemon (`mcp.session.*`, daemon/mcp-sessions.ts), not in this process:
 *   with several HTTP workers (SERVICE_HTTP_WORKERS) any request of a session, and its event
 *   stream, may land on any worker. `initialize` without `Mcp-Session-Id` opens a session bound to
 *   the identity that created it; any later request on it must present the very same credentials
 *   (else 403), so a leaked session id is useless with someone else's credentials, and vice versa.
 *   The daemon enforces the caps (per client: its own least recently used session makes way; in
 *   all: new sessions are refused, 503) and the idle expiry.
 * - A request on a known session is served by a server and transport made for that request (the
 *   session's state is the daemon's: identity and subscriptions); a GET opens the session's event
 *   stream on this worker, which sends it the session's resource notifications (`EventStreams`).
 * - Any other POST without `Mcp-Session-Id` is served statelessly (a fresh server per request,
 *   JSON response).
 */
import express, { type Express, type Request, type Response } from 'express';
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isInitializeRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Caller } from '../daemon/rpc/client.js';
import type { AppClient } from '../daemon/rpc/reconnecting.js';
import { defaultDataDir } from '../daemon/rpc/connect.js';
import { log } from '../daemon/rpc/log.js';
import { DaemonLink } from '../daemon/rpc/link.js';
import { credsFromHeaders } from '../daemon/rpc/credentials.js';
import type { AuthPolicy } from '../daemon/rpc/protocol.js';
import type { McpSessionSettings } from '../daemon/rpc/settings.js';
import { VfsError, httpStatus } from '../daemon/errors.js';
import { ChangeFeed, visibleChange, type SubscriptionStore } from './resources.js';
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

/** A daemon refusal (bad credentials, unknown session, another identity's session, full server) as /mcp's answer. */
function refusal(res: Response, err: VfsError): void {
  // The daemon's detail without its code prefix (the code travels in error.data.code).
  const detail = err.message.replace(/^E[A-Z0-9]+: /, '');
  if (err.code === 'ENOENT') return rpcError(res, 404, RPC_SESSION_NOT_FOUND, 'Session not found', { code: 'ENOENT' });
  if (err.code === 'EBUSY') {
    res.set('Retry-After', '60');
    return rpcError(res, 503, RPC_BUSY, detail, { code: 'EBUSY' });
  }
  // A per-user or per-session cap (docs/security.md, "Caps"): the client must close something first.
  if (err.code === 'ELIMIT') return rpcError(res, 429, RPC_BUSY, detail, { code: 'ELIMIT' });
  const status = httpStatus(err.code);
  const message = err.code === 'EPERM' ? detail : err.message;
  rpcError(res, status, status === 401 ? RPC_UNAUTHORIZED : RPC_FORBIDDEN, message, { code: err.code });
}

/**
 * The largest JSON-RPC body /mcp parses (a bigger one gets 413 before any parsing): room for a
 * write_file of the largest file (JSON escaping may double it), but never more than 64 MiB, since a
 * body is read and parsed before its credentials are checked. Larger files go through REST's PUT.
 */
function mcpBodyMax(maxFileSize: number): number {
  return Math.min(maxFileSize * 2 + 1024 * 1024, 64 * 1024 * 1024);
}

/** The session's subscriptions, kept in the daemon under the session's own credentials. */
function daemonSubscriptions(caller: Caller, id: string): SubscriptionStore {
  return {
    add: async (subscription) => {
      await caller.call('mcp.session.subscribe', { id, subscription });
    },
    remove: async (uri) => {
      await caller.call('mcp.session.unsubscribe', { id, uri });
    },
  };
}

interface OpenStream {
  id: string;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  caller: Caller;
  res: Response;
  /** The last event id this stream delivered (or replayed past): the next pump asks the daemon for what follows. */
  cursor: number;
  /** Event ids of the notifications being sent, for the transport's event store (which names them on the wire). */
  sending: WeakMap<object, string>;
  pumping: boolean;
  again: boolean;
}

/** What delivering a session's notifications needs of a stream (its transport may not exist yet). */
type Cursor = Pick<OpenStream, 'id' | 'caller' | 'cursor' | 'sending'>;

/** The session's notifications after `after`, sent in order through `send` when `s`'s caller may see them. */
async function deliver(
  s: Cursor,
  after: number,
  send: (eventId: string, message: JSONRPCMessage) => Promise<void>,
): Promise<void> {
  const { events } = await s.caller.call('mcp.session.events', { id: s.id, after });
  for (const ev of events) {
    if (await visibleChange(s.caller, ev.subscription, ev.paths))
      await send(String(ev.id), {
        jsonrpc: '2.0',
        method: 'notifications/resources/updated',
        params: { uri: ev.subscription.uri },
      });
    s.cursor = Math.max(s.cursor, ev.id);
  }
}

/**
 * The event store of a session's GET stream: the ids are the daemon's per-session event ids, and a
 * GET with `Last-Event-ID` (on whichever worker) replays from the daemon's buffer what followed it.
 */
function daemonEventStore(s: Cursor): EventStore {
  return {
    storeEvent: (_stream, message) => Promise.resolve(s.sending.get(message) ?? String(s.cursor)),
    replayEventsAfter: async (lastEventId, { send }) => {
      const after = Number(lastEventId);
      if (!Number.isSafeInteger(after) || after < 0)
        throw new VfsError('EINVAL', 'mcp stream', undefined, 'Last-Event-ID must be an event id of this session');
      s.cursor = after;
      await deliver(s, after, send);
      return STANDALONE_STREAM;
    },
  };
}

/** The SDK's name for a session's GET stream. */
const STANDALONE_STREAM = '_GET_stream';

/**
 * The event streams (GET /mcp) this worker serves. The daemon records every session's resource
 * notifications with per-session event ids (daemon/mcp-sessions.ts); on a change event this worker
 * asks it for what followed each stream's last id, checks with the subscriber's credentials that it
 * may see the change, and sends `notifications/resources/updated` with that id. A stream whose
 * session is gone is ended.
 */
class EventStreams {
  private readonly open = new Map<string, Set<OpenStream>>();
  private listening: Promise<() => void> | null = null;

  constructor(private readonly feed: ChangeFeed) {}

  async add(id: string, s: OpenStream): Promise<void> {
    let set = this.open.get(id);
    if (set === undefined) this.open.set(id, (set = new Set()));
    set.add(s);
    this.listening ??= this.feed.listen(() => this.onChange());
    try {
      await this.listening;
    } catch (err) {
      this.listening = null;
      throw err;
    }
  }

  remove(id: string, s: OpenStream): void {
    const set = this.open.get(id);
    set?.delete(s);
    if (set?.size === 0) this.open.delete(id);
    if (this.open.size === 0 && this.listening !== null) {
      void this.listening.then(
        (stop) => stop(),
        () => undefined,
      );
      this.listening = null;
    }
  }

  /** Ends this worker's streams of a closed session. */
  end(id: string): void {
    for (const s of this.open.get(id) ?? []) s.res.end();
  }

  /** Ends every stream this worker serves (its daemon connection dropped; clients reopen them with Last-Event-ID). */
  endAll(): void {
    for (const set of this.open.values()) for (const s of set) if (s.res.headersSent) s.res.end();
  }

  /** Sends what the stream has not had yet, once its SSE response has started (a replay may still run before that). */
  pump(s: OpenStream): void {
    if (s.res.writableEnded || s.res.destroyed) return;
    if (!s.res.headersSent) {
      setTimeout(() => this.pump(s), 20).unref();
      return;
    }
    if (s.pumping) {
      s.again = true;
      return;
    }
    s.pumping = true;
    const send = async (eventId: string, message: JSONRPCMessage): Promise<void> => {
      s.sending.set(message, eventId);
      await s.transport.send(message);
    };
    deliver(s, s.cursor, send)
      .catch((err: unknown) => {
        if (err instanceof VfsError && (err.code === 'ENOENT' || err.code === 'EPERM')) s.res.end();
        else log.error({ err: err instanceof Error ? err.message : String(err) }, 'mcp: resource notifications failed');
      })
      .finally(() => {
        s.pumping = false;
        if (s.again) {
          s.again = false;
          this.pump(s);
        }
      });
  }

  private onChange(): void {
    for (const set of this.open.values()) for (const s of set) this.pump(s);
  }
}

export function mountMcp(app: Express, client: AppClient, opts: McpHttpOptions): void {
  const limits = opts.sessions;
  const dataDir = opts.dataDir ?? defaultDataDir();
  // Change events for resource subscriptions arrive on their own connection, opened on first use.
  const feed = new ChangeFeed(new DaemonLink(dataDir, {}, { name: 'mdvfs serve', spawn: false }));
  const streams = new EventStreams(feed);
  // The daemon connection dropped (a restart, a failover): the streams' state there went with it.
  client.on('lost', () => streams.endAll());
  const json = express.json({ limit: mcpBodyMax(opts.maxFileSize) });

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
      if (err instanceof VfsError) return refusal(res, err);
      log.error({ method: req.method, err: err instanceof Error ? err.message : String(err) }, 'mcp: request failed');
      rpcError(res, 500, -32603, 'Internal error', { code: 'EIO' });
    }
  });
  app.use(router);

  /** Runs `server` on `transport` for this one request, and lets both go when the response ends. */
  async function serveOnce(
    server: McpServer,
    transport: StreamableHTTPServerTransport,
    req: Request,
    res: Response,
  ): Promise<void> {
    res.on('close', () => {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }

  async function handle(req: Request, res: Response): Promise<void> {
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
      res.set('Allow', 'GET, POST, DELETE');
      return rpcError(res, 405, -32000, 'Method not allowed', { code: 'EMETHOD' });
    }

    // Every request is authenticated by the daemon; it applies this server's SERVICE_ANONYMOUS / SERVICE_USER_AUTH.
    const creds = credsFromHeaders((name) => req.get(name), opts.policy);
    const caller: Caller = client.as(creds);

    const sid = header(req, 'mcp-session-id');
    if (sid !== undefined) {
      // Authenticates the caller, then checks the session is theirs (401/403, 404, 403 in that order).
      await caller.call('mcp.session.get', { id: sid });
      if (req.method === 'DELETE') {
        await caller.call('mcp.session.close', { id: sid });
        streams.end(sid);
        res.status(200).end();
        return;
      }
      const server = createMcpServer({ callerFor: () => caller, store: daemonSubscriptions(caller, sid) });
      if (req.method === 'GET') {
        // The session's event stream, on whichever worker the GET landed. Without Last-Event-ID it
        // starts at the session's newest event; with it, the event store replays what followed.
        const { head } = await caller.call('mcp.session.events', { id: sid });
        const cursor: Cursor = { id: sid, caller, cursor: head, sending: new WeakMap() };
        // The session is the daemon's: no id checks here.
        const transport = new StreamableHTTPServerTransport({ eventStore: daemonEventStore(cursor) });
        const open: OpenStream = Object.assign(cursor, { server, transport, res, pumping: false, again: false });
        // Counted in the daemon (a session with an open stream never idles out, and is evicted last);
        // both calls go on this worker's one connection, so the daemon sees them in this order.
        const opened = caller.call('mcp.session.stream', { id: sid, open: true });
        res.on('close', () => {
          streams.remove(sid, open);
          void opened.then(() => caller.call('mcp.session.stream', { id: sid, open: false })).catch(() => undefined);
        });
        await opened;
        await streams.add(sid, open);
        streams.pump(open); // what came after its cursor while it was being set up
        await serveOnce(server, transport, req, res);
        return;
      }
      await serveOnce(server, new StreamableHTTPServerTransport({ enableJsonResponse: true }), req, res);
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
      const { id } = await caller.call('mcp.session.open', {
        address: req.socket.remoteAddress ?? '',
        limits,
      });
      const server = createMcpServer({ callerFor: () => caller, store: daemonSubscriptions(caller, id) });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => id });
      try {
        await serveOnce(server, transport, req, res);
      } finally {
        // An initialize that was refused (bad params, unsupported version) leaves no session behind.
        if (transport.sessionId === undefined) void caller.call('mcp.session.close', { id }).catch(() => undefined);
      }
      return;
    }

    // Stateless: a fresh server and transport for this one request, after authenticating it.
    await caller.call('auth.whoami', {});
    const server = createMcpServer({ callerFor: () => caller });
    await serveOnce(server, new StreamableHTTPServerTransport({ enableJsonResponse: true }), req, res); // no sessionIdGenerator: stateless
  }
}
