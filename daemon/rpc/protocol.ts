/**
 * The socket protocol: every RPC method declared once with its params schema and result type.
 * The daemon's handler table and every client are typed from this object, so a missing handler
 * or a mismatched call is a compile error.
 *
 * Wire format (see framing.ts): length-prefixed frames, each a JSON header plus optional raw bytes.
 * File contents travel as those raw bytes (`data`), never inside JSON.
 */
import { z } from 'zod';

// ---------- credentials ----------

/**
 * What a caller presents; the daemon authenticates it on every request.
 * `origin: 'remote'` marks requests that arrived over the network (the HTTP sidecar): the daemon
 * applies SERVICE_ANONYMOUS and SERVICE_USER_AUTH to those. Local front ends (CLI, stdio MCP,
 * FUSE) are trusted like the owner of the 0600 socket.
 */
export const authPolicySchema = z.object({
  /** SERVICE_ANONYMOUS: 'root' (contract default) or 'deny' (401 for remote requests without credentials). */
  anonymous: z.enum(['root', 'deny']),
  /** SERVICE_USER_AUTH: whether remote requests may use `Authorization: User <name>`. */
  userAuth: z.boolean(),
  /** SERVICE_MODE=hosted: bootstrap needs the one-time secret, and `/health` does not say whether it is needed. */
  hosted: z.boolean().optional(),
});
export type AuthPolicy = z.infer<typeof authPolicySchema>;

/** The most file bytes one fs.read answer carries; larger files travel in several (see DaemonClient). */
export const READ_CHUNK = 8 * 1024 * 1024;

export const credsSchema = z.object({
  authorization: z.string().max(4096).optional(), // "User <name>" | "Bearer <token>"
  workspace: z.string().max(200).optional(), // X-Service-Workspace
  onBehalfOf: z.string().max(200).optional(), // X-Service-On-Behalf-Of
  origin: z.enum(['local', 'remote']).optional(),
  /**
   * For remote requests: the policy of the server the request arrived at, which wins over the
   * daemon's own SERVICE_ANONYMOUS/SERVICE_USER_AUTH (a daemon started in the background by the CLI
   * may have another environment than `mdvfs serve`). Security: this grants nothing a socket client
   * does not already have: whoever may connect to the 0600 socket may send `origin: 'local'`.
   */
  policy: authPolicySchema.optional(),
});
export type Creds = z.infer<typeof credsSchema>;

// ---------- records ----------
// Each record is a zod schema (the OpenAPI document is generated from these) and its TypeScript type.
// Records stay open to new fields: a client must ignore fields it does not know.

const int = z.number().int();
const nsTime = z
  .string()
  .regex(/^-?[0-9]+$/)
  .describe('nanoseconds since the epoch, as a decimal string');
const modeText = z
  .string()
  .regex(/^[0-7]{4}$/)
  .describe('four octal digits, e.g. `0644`');
const unixSecs = int.describe('Unix seconds');

export const kindSchema = z.enum(['file', 'directory', 'symlink']);
export type Kind = z.infer<typeof kindSchema>;

export const statSchema = z
  .object({
    inode_id: int,
    kind: kindSchema,
    size: int,
    mode: modeText, // e.g. "0644", "2775", "1777"
    uid: int,
    gid: int,
    nlink: int,
    created: unixSecs,
    modified: unixSecs,
    changed: unixSecs,
    accessed: unixSecs,
    mtime_ns: nsTime, // exact times for FUSE
    atime_ns: nsTime,
    ctime_ns: nsTime,
    etag: z.string().describe('files: content id').optional(),
    target: z.string().describe('symlinks: link target').optional(),
  })
  .meta({ id: 'StatFields' });
export type Stat = z.infer<typeof statSchema>;
export const pathStatSchema = statSchema.extend({ path: z.string() }).meta({ id: 'Stat' });

export const dirEntrySchema = z
  .object({
    name: z.string(),
    is_dir: z.boolean(),
    is_symlink: z.boolean(),
    mode: modeText,
    uid: int,
    gid: int,
    size: int,
    modified: unixSecs,
    inode_id: int,
    mtime_ns: nsTime,
    /** Set by the daemon's listings (absent in entries a front end builds itself). */
    atime_ns: nsTime.optional(),
    ctime_ns: nsTime.optional(),
  })
  .meta({ id: 'DirEntry' });
export type DirEntry = z.infer<typeof dirEntrySchema>;

export const listingSchema = z
  .object({
    path: z.string(),
    entries: z.array(dirEntrySchema),
    /** Present (true) only when the listing was cut at `limit`: ask again with `cursor: next_cursor`. */
    truncated: z.literal(true).describe('present (true) when the page was cut at `limit`').optional(),
    next_cursor: z.string().optional(),
  })
  .meta({ id: 'Listing' });
export type Listing = z.infer<typeof listingSchema>;

/**
 * Entries in one listing page, by default and at most. An entry is about 250 bytes of JSON, so a
 * page stays near 2.5 MB (far below a frame's limit, encoded in a few ms), while every directory
 * of up to 10,000 entries (any real notes folder) still answers in one page, exactly as before.
 */
export const LIST_PAGE_MAX = 10000;

/** What users and whoami share: ids, groups (gids, primary first), home and kind. */
const identityFields = {
  uid: int,
  gid: int,
  groups: z.array(int).describe('gids, primary first'),
  home: z.string(),
  is_agent: z.boolean(),
  is_admin: z.boolean(),
};

export const userRecordSchema = z
  .object({
    name: z.string(),
    ...identityFields,
    has_token: z.boolean(),
    token_expires: int.describe('when the token stops working (Unix seconds); absent: it never expires').optional(),
  })
  .meta({ id: 'User' });
export type UserRecord = z.infer<typeof userRecordSchema>;

export const delegationRecordSchema = z
  .object({
    user: z.string().describe('the user who consents'),
    agent: z.string().describe('who may act on behalf of `user`'),
    created: unixSecs,
    shares_group: z
      .literal(true)
      .describe(
        "the agent is in the user's personal group (granted with `share`): it sees what she opens to that group",
      )
      .optional(),
  })
  .meta({ id: 'Delegation' });
/** @public (the wire format) */
export type DelegationRecord = z.infer<typeof delegationRecordSchema>;

export const groupRecordSchema = z
  .object({ name: z.string(), gid: int, members: z.array(z.string()) })
  .meta({ id: 'Group' });
/** @public (the wire format) */
export type GroupRecord = z.infer<typeof groupRecordSchema>;

export const workspaceRecordSchema = z
  .object({
    id: z.string().describe('workspace UUID'),
    name: z.string(),
    root_path: z.string(),
    owner: z.string(),
    created: unixSecs,
  })
  .meta({ id: 'Workspace' });
export type WorkspaceRecord = z.infer<typeof workspaceRecordSchema>;

/** A workspace secret as listed: never the secret or its hash. */
export const workspaceTokenRecordSchema = z
  .object({ id: z.string(), name: z.string(), agent: z.string(), created: unixSecs })
  .meta({ id: 'WorkspaceToken' });
/** @public (the wire format) */
export type WorkspaceTokenRecord = z.infer<typeof workspaceTokenRecordSchema>;

export const whoAmISchema = z
  .object({
    user: z.string(),
    ...identityFields,
    on_behalf_of: z.string().optional(),
    workspace: z.object({ id: z.string(), name: z.string(), root_path: z.string() }).optional(),
  })
  .meta({ id: 'WhoAmI' });
export type WhoAmI = z.infer<typeof whoAmISchema>;

export const grepMatchSchema = z.object({ file: z.string(), line_num: int, line: z.string() });
/** @public (the wire format) */
export type GrepMatch = z.infer<typeof grepMatchSchema>;

export const commitRecordSchema = z
  .object({
    hash: z.string().describe('12 hex digits'),
    message: z.string(),
    author: z.string(),
    on_behalf_of: z.string().optional(),
    timestamp: unixSecs,
    parent: z.string().nullable(),
    changes: int,
    workspace: z.string().describe('the workspace it was made in, if any').optional(),
  })
  .meta({ id: 'Commit' });
export type CommitRecord = z.infer<typeof commitRecordSchema>;

export const changeRecordSchema = z
  .object({
    path: z.string().describe("relative to the history's root; a trailing / marks a directory's own mode or owner"),
    op: z.enum(['added', 'modified', 'deleted']),
    by: z.string().describe('who last changed it before the commit'),
    on_behalf_of: z.string().describe("the user `by` acted for (an agent's delegation)").optional(),
  })
  .meta({ id: 'Change' });
export type ChangeRecord = z.infer<typeof changeRecordSchema>;

export const statusResultSchema = z
  .object({
    added: z.array(z.string()),
    modified: z.array(z.string()),
    deleted: z.array(z.string()),
    clean: z.boolean(),
    head: z.string().nullable(),
    text: z.string().describe('git-style plain text'),
    /** Present only when the lists were cut (see STATUS_MAX): `more` changes were not listed. */
    truncated: z.literal(true).optional(),
    more: int.optional(),
    next_cursor: z
      .string()
      .describe('present when changes were left out: pass it as `cursor` for the next page')
      .optional(),
  })
  .meta({ id: 'Status' });
export type StatusResult = z.infer<typeof statusResultSchema>;

export interface ChangeEvent {
  paths: string[]; // absolute paths that changed (created, written, deleted, moved, chmod...)
  kind: 'change';
}

/**
 * One event of an `events.subscribe` subscription (REST's `GET /events`): what changed, as the
 * subscriber may see it, and who changed it.
 */
export interface FeedEvent {
  /** Opaque, increasing; give it back as `since` (REST: `Last-Event-ID`) to resume after it. */
  id: string;
  /** Milliseconds since the epoch. */
  time: number;
  /** Paths as the subscriber names them; empty means anything may have changed (reload). */
  paths: string[];
  /** The user or agent that made the change (absent for changes made by the daemon itself). */
  by?: string;
  /** Whom `by` acted for. */
  on_behalf_of?: string;
}

/** An `events.subscribe` push: `end` says the subscription is over (credentials no longer valid). */
export interface FeedHeader {
  event: 'feed';
  data: { sub: string; event?: FeedEvent; end?: string };
}

// ---------- params helpers ----------

const path = z.string().max(65536);
const pathOpt = path.optional();
const modeSchema = z.union([z.number().int(), z.string()]);
/** A write grant id (fs.grantWrite, fs.write want_grant). */
const grantId = z.string().min(1).max(128);

/** An MCP HTTP session id (a UUID the daemon makes). */
const sessionId = z.string().min(1).max(100);
/** The SERVICE_MCP_* bounds of the server that opens a session (see McpSessionSettings). */
export const mcpSessionLimitsSchema = z.object({
  idleMs: int.min(1000),
  maxSessions: int.min(1),
  maxSessionsPerClient: int.min(1),
  maxSessionsPerUser: int.min(1),
});
/** A resource subscription: its URI, the path as the subscriber names it, and that path in the daemon's namespace. */
export const mcpSubscriptionSchema = z.object({ uri: z.string().max(70000), path, global: path });
export type McpSubscription = z.infer<typeof mcpSubscriptionSchema>;

/** What `sys.status` answers: the daemon process, its data dir and what it holds. */
export const daemonStatusSchema = z.object({
  pid: int,
  version: z.string(),
  data_dir: z.string(),
  socket: z.string(),
  /** Its TCP listener for front ends on other machines (SERVICE_DAEMON_LISTEN), `tls://host:port`, if any. */
  listen: z.string().optional(),
  /** Seconds since the daemon started. */
  uptime: z.number(),
  /** Where it keeps its data: `sqlite` (the data dir's store.db) or `postgres://host/db` (no user or password). */
  store: z.string(),
  /** How it was started: `background` (by a client, exits when idle), `serve`, or `foreground` (`mdvfs daemon`). */
  started_by: z.enum(['background', 'serve', 'foreground']),
  /** The pid of the live `mdvfs serve` that keeps this daemon up, if any. */
  served_by: int.optional(),
  /** Seconds with no client after which this daemon exits (0: it does not). */
  idle_exit: z.number(),
  users: int,
  files: int,
  commits: int,
  /** Open connections, the asker's included. */
  clients: int,
  /** PostgreSQL store only: `active` (holds the lease) or `standby` (follows the change stream, answers EAGAIN). */
  role: z.enum(['active', 'standby']).optional(),
  /** PostgreSQL store only: the lease epoch (the active daemon's; a standby: the newest it has seen). */
  epoch: int.optional(),
  /** A standby: change batches committed by the active daemon and not yet in its memory (`head_seq - applied_seq`). */
  lag: int.optional(),
  /**
   * PostgreSQL store, the active daemon: the change-stream position (sequence number, which may skip)
   * of the last batch it committed (before its first, the stream's newest when it took the lease).
   * A standby whose `applied_seq` has reached it holds everything the active daemon had committed.
   */
  committed_seq: int.optional(),
  /** A standby: the change-stream position of the last batch applied to its memory. */
  applied_seq: int.optional(),
  /** A standby: the newest change-stream position it knows was committed (from notifications and its polls). */
  head_seq: int.optional(),
  /** A standby: who holds the lease (`host:pid`). */
  active: z.string().optional(),
});
export type DaemonStatus = z.infer<typeof daemonStatusSchema>;

// ---------- what the daemon does around a handler ----------

/**
 * How the daemon runs an operation (the runner in daemon/service.ts), in this order: who may call it,
 * which params are paths to resolve for the caller, the handler, the result's paths shown as the
 * caller names them, and, for a mutation, the wait until it is durable.
 */
export interface OpTraits {
  /**
   * Default: an authenticated caller. 'admin': root or wheel. 'public': no credentials are checked
   * (health, bootstrap, login by name). 'local': only over the daemon's own 0600 socket, never from
   * the network (process control).
   */
  access?: 'public' | 'local' | 'admin';
  /** Refused to workspace tokens (after the access check). */
  noWorkspace?: true;
  /** The name errors give the operation (`ENOENT: no such file or directory, open '/x'`). */
  op?: string;
  /**
   * Params that are paths, resolved for the caller (contract §2: relative to the home, confined to a
   * workspace) before the handler runs; a missing optional one means the home. 'entry': names an
   * entry to create, remove or rename, so its last component may not be `.` or `..`.
   */
  paths?: Record<string, 'path' | 'entry'>;
  /** Result fields holding absolute paths: shown as the caller names them (inside a workspace, from its root). */
  shows?: readonly string[];
  /** The answer waits until the change is durable; 'users' also tells every front end that identities or access changed. */
  mutates?: 'tree' | 'users';
}

// ---------- REST bindings ----------

/** Where a REST route takes one parameter from. */
export type RestSource = 'path' | 'query' | 'body';

/**
 * How an operation is served over REST (http/ops.ts registers the route, http/openapi.ts describes
 * it and cli/rest-caller.ts calls it, all from this). The composite `/fs` routes are hand-written in
 * http/routes/fs.ts and described in http/openapi.ts.
 */
export interface RestBinding {
  verb: 'get' | 'post' | 'put' | 'delete';
  /** The express route. `{/*path}` carries the `path` param (a file path); `:x` carries the param `x`. */
  route: string;
  summary: string;
  /** A param not named here comes from the query (GET, DELETE) or from the JSON body (POST, PUT). */
  from?: Record<string, RestSource>;
  /** Params the route sets itself. */
  fixed?: Record<string, unknown>;
  /** The answer as plain text (`?format=text`, the default): this string field; `?format=json` gives the record. */
  text?: { field: string; type?: string; newline?: boolean };
  /** Error statuses besides 200, for the OpenAPI document. */
  errors: readonly number[];
  /** What a required body field should hold, for the "missing field" message (default: its type). */
  hints?: Record<string, string>;
  /** A rule across fields, checked before the call; answers the message of a 400. */
  check?: (p: Record<string, unknown>) => string | undefined;
}

const COMMON = [400, 401, 403, 404, 500] as const;

/** Where a param of this binding comes from (the one rule the server and the CLI's `--url` mode share). */
export function restSource(b: RestBinding, param: string): RestSource {
  return b.from?.[param] ?? (b.verb === 'post' || b.verb === 'put' ? 'body' : 'query');
}

/** The REST binding of a method, if it has one. */
export function restBinding(method: Method): RestBinding | undefined {
  return (methods[method] as { rest?: RestBinding }).rest;
}

/** The methods with a REST binding of their own. */
export type RestMethod = { [M in Method]: Methods[M] extends { rest: RestBinding } ? M : never }[Method];

export function isRestMethod(m: Method): m is RestMethod {
  return restBinding(m) !== undefined;
}

// ---------- MCP bindings ----------

/**
 * Bytes of content (file bytes, matching lines, a diff) one MCP tool answer carries at most. The
 * SDK's clients drop any message over 10 MiB and lose the session with it; 1 MiB of content stays far
 * below that even with JSON escaping, and is still a lot of text for an agent to take in at once.
 */
export const ANSWER_MAX = 1024 * 1024;

/** Matches search_files returns per call unless max_results says otherwise. */
export const SEARCH_DEFAULT = 200;

/** MCP tool annotations (the hints a client shows or acts on), in the SDK's key order. */
interface ToolHints {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: false;
}

const READS: ToolHints = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

/**
 * How an operation is offered as an MCP tool (mcp/tools.ts registers it and presents its answer,
 * from this). The argument names and texts are the MCP contract's; a tool may rename params
 * (`move_file`'s source/destination are fs.move's src/dst) and bound its answer more tightly.
 */
export interface McpBinding {
  tool: string;
  title: string;
  description: string;
  /** The tool's arguments (its input schema). */
  args: z.ZodRawShape;
  /** Its structuredContent (a closed subset of the operation's result, so records can grow). */
  output: z.ZodRawShape;
  annotations: ToolHints;
}

const pathDesc =
  'Path as you would write it in a shell: relative (resolved in your home directory, or the delegated user\'s home), "~/..." or absolute ("/...").';

/** What list_directory shows of a DirEntry. */
const toolEntry = z.object({
  name: z.string(),
  is_dir: z.boolean(),
  is_symlink: z.boolean(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  size: z.number(),
  modified: z.number(),
});
export type ToolEntry = z.infer<typeof toolEntry>;

/** What get_file_info shows of a Stat. */
const toolStat = z.object({
  path: z.string(),
  inode_id: z.number(),
  kind: z.enum(['file', 'directory', 'symlink']),
  size: z.number(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  nlink: z.number(),
  created: z.number(),
  modified: z.number(),
  changed: z.number(),
  accessed: z.number(),
  etag: z.string().optional(),
  target: z.string().optional(),
});
export type ToolStat = z.infer<typeof toolStat>;

/** What commit, get_history and revert show of a Commit. */
const toolCommit = z.object({
  hash: z.string(),
  message: z.string(),
  author: z.string(),
  on_behalf_of: z.string().optional(),
  timestamp: z.number(),
  parent: z.string().nullable(),
  changes: z.number(),
});
export type ToolCommit = z.infer<typeof toolCommit>;

/**
 * Which store a daemon serves (`sys.health`): front ends check it before they trust a daemon, so that
 * a daemon of another store on a listed socket (a SQLite daemon started in a PostgreSQL node's data
 * dir, say) is refused instead of taking acknowledged writes that never reach the shared store.
 * `id` is made once per store and kept in it; `epoch` is the PostgreSQL lease epoch of an active daemon.
 */
export const storeIdentitySchema = z.object({
  kind: z.enum(['sqlite', 'postgres']),
  id: z.string(),
  database: z.string().optional(),
  system_id: z.string().optional(),
  epoch: int.optional(),
});
export type StoreIdentity = z.infer<typeof storeIdentitySchema>;

/** A histogram over the socket (daemon/rpc/metrics.ts): cumulative counts per upper bound `le` (seconds). */
const histogramSchema = z.object({
  le: z.array(z.number()),
  counts: z.array(int),
  count: int,
  sum: z.number(),
});

/**
 * Where a daemon stands with its store: active (SQLite: always), standby (PostgreSQL: following the
 * active one), waiting (for PostgreSQL, at start), degraded (PostgreSQL lost: reads from memory only).
 */
export const LEASE_STATES = ['active', 'standby', 'waiting', 'degraded'] as const;
export type LeaseState = (typeof LEASE_STATES)[number];

/** What `sys.metrics` answers (rendered by `GET /metrics`; see docs/deploy.md, "Metrics"). */
export const daemonMetricsSchema = z.object({
  uptime: int,
  /** Open socket connections (front ends, CLI commands). */
  clients: int,
  /** Socket requests received and not yet answered, and answered since start. */
  rpc_in_flight: int,
  rpc_requests: int,
  /** Seconds per store batch (group commit), and batches that failed. */
  store_batches: histogramSchema,
  store_batch_errors: int,
  lease_state: z.enum(LEASE_STATES),
  /** The PostgreSQL lease epoch (0 for SQLite). */
  lease_epoch: int,
  takeovers: int,
  store_reconnects: int,
});
export type DaemonMetrics = z.infer<typeof daemonMetricsSchema>;

// ---------- the table ----------

const pathResult = z.object({ path: z.string() });

export const methods = {
  // service
  'sys.health': {
    access: 'public',
    params: z.object({}),
    result: z
      .object({
        status: z.literal('ok'),
        version: z.string(),
        uptime: z.number(),
        inodes: int,
        commits: int,
        objects: int,
        // Security: absent in hosted mode (not advertised to anonymous callers; bootstrap needs a secret there).
        needs_bootstrap: z.boolean().optional(),
        /** Over the socket only (REST's /health leaves it out). */
        store: storeIdentitySchema.optional(),
      })
      .meta({ id: 'Health' }),
  },
  'sys.gc': {
    access: 'admin',
    op: 'gc',
    mutates: 'tree',
    params: z.object({}),
    result: z.object({ removed: int, kept: int }),
  },
  'sys.fsck': {
    access: 'admin',
    op: 'fsck',
    params: z.object({}),
    result: z.object({ ok: z.boolean(), problems: z.array(z.string()), objects: int, inodes: int }),
  },
  /** The daemon's own metrics for `GET /metrics` (root/wheel): its queue, store batches and lease. */
  'sys.metrics': {
    access: 'admin',
    op: 'metrics',
    params: z.object({}),
    result: daemonMetricsSchema,
  },
  /** The handshake front ends make before they trust a daemon: also answered by a standby. */
  'sys.ping': {
    access: 'public',
    params: z.object({}),
    result: z.object({ pong: z.literal(true), pid: int, store: storeIdentitySchema.optional() }),
  },
  /** The daemon process (`mdvfs status`); local connections only, never through the HTTP sidecar. */
  'sys.status': { access: 'local', op: 'status', params: z.object({}), result: daemonStatusSchema },
  /**
   * For `mdvfs serve` only: marks the daemon as held by the serve process `pid` (it restarts the
   * daemon when it dies). Answers the holder: another live serve's pid if one already holds it.
   */
  'sys.hold': {
    access: 'local',
    op: 'hold',
    params: z.object({ pid: z.number().int().positive() }),
    result: z.object({ held_by: int }),
  },
  /** Subscribes this connection to change events (`event: 'change'`). */
  'sys.subscribe': { params: z.object({}), result: z.object({ subscribed: z.literal(true) }) },
  /**
   * Subscribes this connection, as the caller, to the change feed filtered by what the caller may
   * read (`event: 'feed'` frames carrying `sub`). `sub` names the subscription on this connection;
   * `since` replays what happened after that id (`reset: true` when it cannot: reload instead).
   */
  'events.subscribe': {
    params: z.object({ sub: z.string().min(1).max(64), since: z.string().max(64).optional() }),
    result: z.object({ last_id: z.string(), reset: z.boolean() }),
  },
  'events.unsubscribe': {
    params: z.object({ sub: z.string().min(1).max(64) }),
    result: z.object({ unsubscribed: z.boolean() }),
  },

  // MCP over HTTP: sessions live in the daemon so that every HTTP worker serves every session
  // (daemon/mcp-sessions.ts). Each call but match and open presents the credentials that opened the
  // session (else EPERM); an unknown or expired session is ENOENT.
  /** Opens a session for the caller; `limits` are the opening server's SERVICE_MCP_* settings. */
  'mcp.session.open': {
    params: z.object({
      /** The client's network address: anonymous callers are capped per address. */
      address: z.string().max(200),
      limits: mcpSessionLimitsSchema,
    }),
    result: z.object({ id: z.string() }),
  },
  /** A session's subscriptions; counts as activity (the idle expiry starts again). */
  'mcp.session.get': {
    params: z.object({ id: sessionId }),
    result: z.object({ id: z.string(), subscriptions: z.array(mcpSubscriptionSchema) }),
  },
  /** Marks an event stream (GET /mcp) open or closed on this connection; a session with one never idles out. */
  'mcp.session.stream': {
    params: z.object({ id: sessionId, open: z.boolean() }),
    result: z.object({ streams: int }),
  },
  'mcp.session.subscribe': {
    params: z.object({ id: sessionId, subscription: mcpSubscriptionSchema }),
    result: z.object({ subscriptions: int }),
  },
  'mcp.session.unsubscribe': {
    params: z.object({ id: sessionId, uri: z.string().max(70000) }),
    result: z.object({ subscriptions: int }),
  },
  'mcp.session.close': { params: z.object({ id: sessionId }), result: z.object({ closed: z.boolean() }) },
  /**
   * The session's resource notifications after event id `after` (per-session ids, kept in the daemon
   * for replay: a GET with Last-Event-ID on any worker), and the newest id; without `after`, only
   * the newest id. `lost`: events after `after` were dropped from the session's buffer.
   */
  'mcp.session.events': {
    params: z.object({ id: sessionId, after: int.min(0).optional() }),
    result: z.object({
      events: z.array(z.object({ id: int, subscription: mcpSubscriptionSchema, paths: z.array(path) })),
      head: int,
      lost: z.boolean(),
    }),
  },
  /**
   * For HTTP workers only: which subscriptions of these sessions (those whose event stream the
   * worker serves) a change to `paths` may affect, and which of the sessions are gone.
   */
  'mcp.session.match': {
    access: 'local',
    params: z.object({ ids: z.array(sessionId).max(100_000), paths: z.array(path).max(100_000) }),
    result: z.object({
      matches: z.array(z.object({ id: z.string(), subscription: mcpSubscriptionSchema })),
      gone: z.array(z.string()),
    }),
  },

  // identity
  'auth.whoami': {
    params: z.object({}),
    result: whoAmISchema,
    rest: { verb: 'get', route: '/auth/whoami', summary: 'The authenticated caller', errors: [401, 403, 500] },
  },
  /**
   * For front ends only (never exposed to callers): the real root of the caller's workspace ('/'
   * outside one), to map the daemon's global change events to the caller's paths. Security:
   * whoami and /workspaces show a workspace caller its root as '/', never where it lives.
   */
  'auth.scope': { params: z.object({}), result: z.object({ root_path: z.string() }) },
  'auth.login': {
    access: 'public',
    params: z.object({ username: z.string() }),
    result: whoAmISchema.extend({ username: z.string() }),
    rest: {
      verb: 'post',
      route: '/auth/login',
      summary: 'Check a user name and return its identity (groups are gids, primary first)',
      errors: [400, 401, 404, 500],
    },
  },
  'auth.bootstrap': {
    access: 'public',
    mutates: 'users',
    params: z.object({
      username: z.string(),
      secret: z
        .string()
        .max(256)
        .describe('hosted mode: the one-time secret from the file bootstrap-secret of the data dir')
        .optional(),
    }),
    result: z.object({ username: z.string(), uid: int, token: z.string() }),
    rest: {
      verb: 'post',
      route: '/auth/bootstrap',
      summary: 'Create the first admin (wheel) user and return its token; only while no user but root exists',
      errors: [400, 401, 409, 500],
    },
  },
  /** Hosted `mdvfs serve` at start: the bootstrap secret's file while the store needs bootstrap (created if missing). */
  'auth.bootstrapSecret': {
    access: 'local',
    op: 'bootstrap',
    params: z.object({}),
    result: z.object({ file: z.string().optional(), created: z.boolean() }),
  },

  // delegation grants (DESIGN.md §3–§4): a user's consent to an agent acting on its behalf
  'auth.delegationAdd': {
    noWorkspace: true,
    op: 'delegate',
    mutates: 'users',
    params: z.object({
      agent: z.string().describe('the agent (or wheel member) that may act on your behalf'),
      user: z.string().describe('root/wheel only: grant on behalf of this user (default: yourself)').optional(),
      share: z
        .boolean()
        .describe(
          'also put the agent in your personal group (the group named as you), so that a folder you open to that group is open to it; revoking the grant takes it out again',
        )
        .optional(),
    }),
    result: delegationRecordSchema,
    rest: {
      verb: 'post',
      route: '/auth/delegations',
      summary: 'Let an agent act on your behalf (X-Service-On-Behalf-Of) until you revoke it',
      errors: COMMON,
    },
  },
  'auth.delegationList': {
    op: 'delegations',
    params: z.object({}),
    result: z.object({ delegations: z.array(delegationRecordSchema) }),
    rest: {
      verb: 'get',
      route: '/auth/delegations',
      summary: 'The delegation grants given by or to you (root/wheel: every grant)',
      errors: [401, 403, 500],
    },
  },
  'auth.delegationDel': {
    noWorkspace: true,
    op: 'delegate',
    mutates: 'users',
    params: z.object({
      agent: z.string().describe('the agent whose grant ends'),
      user: z.string().describe('root/wheel only: the user whose grant ends (default: yourself)').optional(),
    }),
    result: z.object({ revoked: delegationRecordSchema }),
    rest: {
      verb: 'delete',
      route: '/auth/delegations/:agent',
      summary: "Revoke an agent's grant: its next request on your behalf is refused",
      from: { agent: 'path' },
      errors: COMMON,
    },
  },

  // admin (root/wheel)
  /** Creating an agent also issues its token: the raw `token` is in this answer only (users get none). */
  'admin.userAdd': {
    access: 'admin',
    noWorkspace: true,
    op: 'useradd',
    mutates: 'users',
    params: z.object({ name: z.string(), is_agent: z.boolean().optional() }),
    result: userRecordSchema.extend({
      token: z.string().describe('only in the answer that creates an agent: its raw token, shown once').optional(),
    }),
    rest: { verb: 'post', route: '/admin/users', summary: 'Create a user or agent', errors: [400, 401, 403, 409, 500] },
  },
  'admin.userList': {
    access: 'admin',
    op: 'users',
    params: z.object({}),
    result: z.object({ users: z.array(userRecordSchema) }),
    rest: { verb: 'get', route: '/admin/users', summary: 'List users (never tokens)', errors: [401, 403, 500] },
  },
  'admin.userDel': {
    access: 'admin',
    noWorkspace: true,
    op: 'userdel',
    mutates: 'users',
    params: z.object({ name: z.string().describe('user name') }),
    result: z.object({ deleted: z.string() }),
    rest: {
      verb: 'delete',
      route: '/admin/users/:name',
      summary: 'Delete a user',
      from: { name: 'path' },
      errors: [400, 401, 403, 404, 500],
    },
  },
  'admin.token': {
    op: 'token',
    mutates: 'users',
    params: z.object({
      name: z.string().describe('user name'),
      expires_in: int
        .min(1)
        .max(10 * 366 * 86400)
        .describe('seconds until the token expires (absent: never)')
        .optional(),
    }),
    result: z.object({ name: z.string(), token: z.string(), expires: unixSecs.optional() }),
    rest: {
      verb: 'post',
      route: '/admin/users/:name/tokens',
      summary: "Issue or regenerate the user's token; the raw token is shown only in this response",
      from: { name: 'path' },
      errors: [400, 401, 403, 404, 500],
    },
  },
  'admin.groupAdd': {
    access: 'admin',
    noWorkspace: true,
    op: 'groupadd',
    mutates: 'users',
    params: z.object({ name: z.string() }),
    result: groupRecordSchema,
    rest: { verb: 'post', route: '/admin/groups', summary: 'Create a group', errors: [400, 401, 403, 409, 500] },
  },
  'admin.groupList': {
    access: 'admin',
    op: 'groups',
    params: z.object({}),
    result: z.object({ groups: z.array(groupRecordSchema) }),
    rest: { verb: 'get', route: '/admin/groups', summary: 'List groups', errors: [401, 403, 500] },
  },
  'admin.groupMemberAdd': {
    access: 'admin',
    noWorkspace: true,
    op: 'usermod',
    mutates: 'users',
    params: z.object({ user: z.string().describe('user name'), group: z.string().describe('group name') }),
    result: groupRecordSchema,
    rest: {
      verb: 'post',
      route: '/admin/users/:user/groups/:group',
      summary: 'Add a user to a group',
      from: { user: 'path', group: 'path' },
      errors: [400, 401, 403, 404, 500],
    },
  },
  'admin.groupMemberDel': {
    access: 'admin',
    noWorkspace: true,
    op: 'usermod',
    mutates: 'users',
    params: z.object({ user: z.string().describe('user name'), group: z.string().describe('group name') }),
    result: groupRecordSchema,
    rest: {
      verb: 'delete',
      route: '/admin/users/:user/groups/:group',
      summary: 'Remove a user from a group',
      from: { user: 'path', group: 'path' },
      errors: [400, 401, 403, 404, 500],
    },
  },

  // workspaces
  'ws.create': {
    noWorkspace: true,
    op: 'workspace',
    mutates: 'users',
    params: z.object({ name: z.string(), root_path: z.string() }),
    result: workspaceRecordSchema,
    rest: {
      verb: 'post',
      route: '/workspaces',
      summary: 'Create a workspace rooted at an absolute path',
      errors: [...COMMON, 409, 429],
    },
  },
  'ws.list': {
    params: z.object({}),
    result: z.object({ workspaces: z.array(workspaceRecordSchema) }),
    rest: { verb: 'get', route: '/workspaces', summary: 'List workspaces', errors: [401, 403, 500] },
  },
  'ws.token': {
    op: 'workspace token',
    mutates: 'users',
    params: z.object({ id: z.string().describe('workspace UUID'), name: z.string(), agent_token: z.string() }),
    result: z.object({ workspace_id: z.string(), name: z.string(), secret: z.string(), token_id: z.string() }),
    rest: {
      verb: 'post',
      route: '/workspaces/:id/tokens',
      summary:
        'Issue a workspace secret against an existing agent token; use it as `Bearer <secret>` with `X-Service-Workspace: <id>`',
      from: { id: 'path' },
      errors: [...COMMON, 429],
    },
  },
  'ws.tokenList': {
    op: 'workspace tokens',
    params: z.object({ id: z.string().describe('workspace UUID') }),
    result: z.object({ workspace_id: z.string(), tokens: z.array(workspaceTokenRecordSchema) }),
    rest: {
      verb: 'get',
      route: '/workspaces/:id/tokens',
      summary: "List a workspace's secrets (id, name, agent, created; never the secret): its owner, root or wheel",
      from: { id: 'path' },
      errors: COMMON,
    },
  },
  'ws.tokenRevoke': {
    op: 'revoke workspace token',
    mutates: 'users',
    params: z.object({
      id: z.string().describe('workspace UUID'),
      token_id: z.string().describe('the token id from the listing'),
    }),
    result: z.object({ workspace_id: z.string(), revoked: z.string() }),
    rest: {
      verb: 'delete',
      route: '/workspaces/:id/tokens/:token_id',
      summary: 'Revoke one workspace secret by its id',
      from: { id: 'path', token_id: 'path' },
      errors: COMMON,
    },
  },

  // filesystem: paths are as the caller wrote them; the daemon resolves them (contract §2)
  /** Resolves a path for the caller without touching the tree: what `path` means for this identity. */
  'fs.resolve': {
    op: 'resolve',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({ path }),
    result: pathResult,
  },
  /**
   * File content is returned as the frame's raw bytes, at most READ_CHUNK of them per answer (from
   * `offset`, at most `length`); `size` is the whole file's. `if_match` (an etag) makes a later part
   * fail with EPRECOND if the file changed meanwhile. DaemonClient assembles a whole file from parts.
   */
  'fs.read': {
    op: 'open',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({
      path,
      if_none_match: z.string().optional(),
      if_match: z.string().optional(),
      offset: z.number().int().min(0).optional(),
      length: z.number().int().min(0).optional(),
    }),
    result: z.object({ path: z.string(), etag: z.string(), size: int, not_modified: z.boolean().optional() }),
    mcp: [
      {
        tool: 'read_file',
        title: 'Read file',
        description:
          'Read a file. The text block is the file\'s text (UTF-8; other bytes come back base64-encoded, encoding "base64"); structuredContent ' +
          `gives its path, size, etag and the byte range returned. At most ${ANSWER_MAX} bytes come back per call: a longer file is cut, ` +
          'with truncated: true and next_offset (and a note in a second text block); call again with offset = next_offset to read on. ' +
          'head or tail return only the first or last N lines; offset and length a byte range. Pass the etag as expected_etag to write_file ' +
          'or edit_file to avoid overwriting a change you have not seen, or to read_file while paging to keep all pages of one version.',
        args: {
          path: path.describe(pathDesc),
          offset: z
            .number()
            .int()
            .min(0)
            .optional()
            .describe('First byte to return (default 0), e.g. the next_offset of the previous call.'),
          length: z
            .number()
            .int()
            .min(1)
            .optional()
            .describe(`Most bytes to return (default and at most ${ANSWER_MAX}).`),
          head: z.number().int().min(1).optional().describe('Return only the first N lines.'),
          tail: z.number().int().min(1).optional().describe('Return only the last N lines.'),
          expected_etag: z
            .string()
            .max(200)
            .optional()
            .describe("Fail (EPRECOND) unless the file's etag is still this one."),
          at: z
            .string()
            .min(1)
            .max(200)
            .optional()
            .describe('Read the file as it was at this commit (hash prefix, HEAD, HEAD~n; from get_history).'),
        },
        output: {
          path: z.string(),
          encoding: z.enum(['utf8', 'base64']),
          size: z.number(),
          etag: z.string(),
          offset: z.number(),
          length: z.number(),
          truncated: z.boolean().optional(),
          next_offset: z.number().optional(),
        },
        annotations: READS,
      },
    ],
  },
  /**
   * File content comes as the frame's raw bytes. Creates missing parents unless `parents: false`.
   * `if_match` (etag) and `if_none_match: '*'` are preconditions (EPRECOND).
   */
  'fs.write': {
    op: 'write',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({
      path,
      mode: modeSchema.optional(),
      parents: z.boolean().optional(),
      if_match: z.string().optional(),
      if_none_match: z.string().optional(),
      exclusive: z.boolean().optional(),
      append: z.boolean().optional(),
      /** Also answer with the file's attributes after the write (`stat`), saving an fs.stat round trip. */
      stat: z.boolean().optional(),
      /** A write grant of this connection and principal for this file: its w-bit is not checked again (see fs.grantWrite). */
      grant: grantId.optional(),
      /** Also answer with a new write grant for the file (the mount's create: O_CREAT with mode 0444 stays writable). */
      want_grant: z.boolean().optional(),
      /** With `exclusive`, both: the new file's times, as fs.utimens takes them (the mount's file given its times before it was sent). */
      atime: z.union([z.string(), z.number()]).optional(),
      mtime: z.union([z.string(), z.number()]).optional(),
    }),
    result: z.object({
      path: z.string(),
      size: int,
      etag: z.string(),
      created: z.boolean(),
      stat: statSchema.optional(),
      /**
       * With `stat`: whether the caller may read the file now. The mount keeps what it wrote as content
       * it may re-open for reading without asking again (until a change concerning the file is reported).
       */
      readable: z.boolean().optional(),
      grant: z.string().optional(),
    }),
    mcp: [
      {
        tool: 'write_file',
        title: 'Write file',
        description:
          'Create a file or replace its whole contents with `content` (UTF-8 text). Missing parent directories are created. ' +
          'Pass expected_etag (from read_file) to write only if the file has not changed since you read it: otherwise nothing is written and ' +
          'the error (EPRECOND) gives the current etag. Changes are not versioned until you call commit.',
        args: {
          path: path.describe(pathDesc),
          content: z.string().describe('The complete new contents of the file.'),
          expected_etag: z
            .string()
            .max(200)
            .optional()
            .describe('Only write if the file\'s current etag equals this (the REST ETag; "*": only if it exists).'),
        },
        output: { path: z.string(), size: z.number(), etag: z.string(), created: z.boolean() },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      },
      /** A read, then a write conditional on the version read. */
      {
        tool: 'edit_file',
        title: 'Edit file',
        description:
          "Replace exact text in a UTF-8 file. Each edit's oldText must occur exactly once (in the text left by the edits before it) and is " +
          'replaced by newText; if any oldText is missing or occurs more than once, the call fails and nothing is written. Returns a ' +
          'git-style unified diff. dryRun: true returns the diff without writing. The file is written only if nobody changed it since it ' +
          'was read for the edit (EPRECOND otherwise: nothing written); pass expected_etag (from read_file) to also require that it is ' +
          'still the version you read. Changes are not versioned until you call commit.',
        args: {
          path: path.describe(pathDesc),
          edits: z
            .array(
              z.object({
                oldText: z.string().describe('Text to find: it must match exactly once.'),
                newText: z.string().describe('Text to put in its place.'),
              }),
            )
            .min(1)
            .max(1000)
            .describe('Replacements, applied in order.'),
          dryRun: z.boolean().optional().describe('Only show the diff; write nothing (default false).'),
          expected_etag: z.string().max(200).optional().describe("Only edit if the file's current etag equals this."),
        },
        output: {
          path: z.string(),
          diff: z.string(),
          dry_run: z.boolean(),
          size: z.number(),
          etag: z.string(),
          truncated: z.boolean().optional(),
        },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
    ],
  },
  /**
   * A directory's entries in name order, at most `limit` (default and maximum LIST_PAGE_MAX). A cut
   * listing says `truncated: true` and gives `next_cursor`, an opaque string to pass as `cursor`.
   */
  'fs.list': {
    op: 'scandir',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({
      path: pathOpt,
      limit: z.number().int().min(1).max(LIST_PAGE_MAX).optional(),
      cursor: z.string().max(2048).optional(),
    }),
    result: listingSchema,
    mcp: [
      {
        tool: 'list_directory',
        title: 'List directory',
        description:
          'List the entries of a directory (name order) with type, octal mode, owner uid/gid, size and modification time. ' +
          `Without a path, lists your home directory. At most ${LIST_PAGE_MAX} entries per call (\`limit\`); a longer listing ends with ` +
          '`truncated: true` and a `next_cursor` to pass as `cursor` for the next page.',
        args: {
          path: path.optional().describe(`${pathDesc} Defaults to your home directory.`),
          limit: z
            .number()
            .int()
            .min(1)
            .max(LIST_PAGE_MAX)
            .optional()
            .describe(`Most entries to return (default and maximum ${LIST_PAGE_MAX}).`),
          cursor: z
            .string()
            .max(2048)
            .optional()
            .describe('The next_cursor of the previous page, to continue a truncated listing.'),
        },
        output: {
          path: z.string(),
          entries: z.array(toolEntry),
          truncated: z.boolean().optional(),
          next_cursor: z.string().optional(),
        },
        annotations: READS,
      },
    ],
  },
  'fs.stat': {
    op: 'stat',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({ path, nofollow: z.boolean().optional() }),
    result: pathStatSchema,
    mcp: [
      {
        tool: 'get_file_info',
        title: 'File information',
        description:
          'The stat record of a path: kind (file, directory or symlink), size, octal mode, owner uid/gid, link count, times (Unix seconds), ' +
          'the etag of a file (pass it as expected_etag to write_file or edit_file) and the target of a symlink. Like lstat: a symlink is ' +
          'described itself; with follow: true, what it points to.',
        args: {
          path: path.describe(pathDesc),
          follow: z
            .boolean()
            .optional()
            .describe('Describe what a symlink points to instead of the link itself (default false).'),
        },
        output: toolStat.shape,
        annotations: READS,
      },
    ],
  },
  /** `grant`: as in fs.write (ftruncate through a descriptor opened for writing). */
  'fs.truncate': {
    op: 'truncate',
    paths: { path: 'path' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({ path, size: z.number().int().min(0), grant: grantId.optional() }),
    result: z.object({ path: z.string(), size: int }),
  },
  /**
   * open(2) for writing, for the mount: checks write access (and read with `mode` 6) to the file now
   * and answers a write grant, an unguessable id that lets fs.write/fs.truncate of that file, by the
   * same principal over the same connection, skip the w-bit check until fs.releaseGrant or until the
   * connection closes (POSIX checks access at open, not at each write). Nothing else is skipped.
   */
  'fs.grantWrite': {
    op: 'open',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({ path, mode: z.union([z.literal(2), z.literal(6)]) }),
    result: z.object({ path: z.string(), grant: z.string() }),
  },
  /** Ends write grants of this connection (descriptors closed); `released` counts those that were live. */
  'fs.releaseGrant': {
    params: z.object({ grants: z.array(grantId).min(1).max(65536) }),
    result: z.object({ released: int }),
  },
  'fs.mkdir': {
    op: 'mkdir',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({
      path,
      parents: z.boolean().optional(),
      mode: modeSchema.optional(),
      /** Also answer with the directory's attributes (`stat`), saving an fs.stat round trip (the mount). */
      stat: z.boolean().optional(),
    }),
    result: z.object({ path: z.string(), created: z.boolean(), stat: statSchema.optional() }),
    mcp: [
      {
        tool: 'create_directory',
        title: 'Create directory',
        description:
          'Create a directory, including any missing parents (like `mkdir -p`). Succeeds if it already exists.',
        args: { path: path.describe(pathDesc) },
        output: { path: z.string(), created: z.boolean() },
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      },
    ],
  },
  /** Unlinks a file or symlink (EISDIR for a directory). */
  'fs.unlink': {
    op: 'unlink',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({ path }),
    result: pathResult,
  },
  /** Removes an empty directory. */
  'fs.rmdir': {
    op: 'rmdir',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({ path }),
    result: pathResult,
  },
  /** REST-style delete: a file, an empty directory, or with `recursive` a whole subtree (all-or-nothing). */
  'fs.delete': {
    op: 'rm',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({ path, recursive: z.boolean().optional() }),
    result: z.object({ path: z.string(), deleted: int }),
    mcp: [
      {
        tool: 'delete_file',
        title: 'Delete file or directory',
        description:
          'Delete a file or symlink, or an empty directory. With recursive: true, delete a directory and everything in it ' +
          '(all or nothing: if any entry may not be deleted, nothing is). Committed versions stay in the history and can be restored with revert.',
        args: {
          path: path.describe(pathDesc),
          recursive: z
            .boolean()
            .optional()
            .describe('Delete a non-empty directory with all its contents (default false).'),
        },
        output: { path: z.string(), deleted: z.number() },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      },
    ],
  },
  /**
   * `into_dir` (cp/mv, for the REST, MCP and CLI front ends): a `dst` that is an existing directory
   * (symlinks followed) means `dst/<basename of src>`. Without it `dst` is exactly the new path.
   */
  'fs.copy': {
    op: 'copy',
    paths: { src: 'path', dst: 'entry' },
    shows: ['src', 'dst'],
    mutates: 'tree',
    params: z.object({
      src: path,
      dst: path,
      recursive: z.boolean().optional(),
      overwrite: z.boolean().optional(),
      into_dir: z.boolean().optional(),
    }),
    result: z.object({ src: z.string(), dst: z.string(), copied: int }),
  },
  /** rename(2) semantics: replaces an existing file, or an empty directory with a directory. `into_dir` as for fs.copy. */
  'fs.move': {
    op: 'rename',
    paths: { src: 'entry', dst: 'entry' },
    shows: ['src', 'dst'],
    mutates: 'tree',
    params: z.object({
      src: path,
      dst: path,
      overwrite: z.boolean().optional(),
      into_dir: z.boolean().optional(),
      /** Also answer with the moved entry's attributes (`stat`, as lstat), saving an fs.stat round trip (the mount). */
      stat: z.boolean().optional(),
    }),
    result: z.object({ src: z.string(), dst: z.string(), stat: statSchema.optional() }),
    mcp: [
      {
        tool: 'move_file',
        title: 'Move or rename',
        description:
          'Move or rename a file or directory (like `mv`). If the destination is an existing directory, the source moves into it ' +
          '(destination/<name of source>). An existing destination file is replaced; an existing non-empty directory is not.',
        args: {
          source: path.describe(`What to move. ${pathDesc}`),
          destination: path.describe(`The new path. ${pathDesc}`),
        },
        output: { source: z.string(), destination: z.string() },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
    ],
  },
  'fs.symlink': {
    op: 'symlink',
    paths: { path: 'entry' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({ target: z.string().max(4096), path }),
    result: z.object({ path: z.string(), target: z.string() }),
  },
  'fs.readlink': {
    op: 'readlink',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({ path }),
    result: z.object({ path: z.string(), target: z.string() }),
  },
  'fs.chmod': {
    op: 'chmod',
    paths: { path: 'path' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({
      path,
      mode: modeSchema.describe('octal mode, e.g. "0644"'),
      /** Also answer with the attributes after the change (`stat`), saving an fs.stat round trip (the mount). */
      stat: z.boolean().optional(),
    }),
    result: z.object({ path: z.string(), mode: z.string(), stat: statSchema.optional() }),
    rest: {
      verb: 'post',
      route: '/admin/chmod{/*path}',
      summary: 'chmod (owner, wheel or root)',
      from: { path: 'path' },
      hints: { mode: 'octal string such as "0644"' },
      errors: COMMON,
    },
  },
  /** owner/group are names or numeric ids (as strings or numbers). */
  'fs.chown': {
    op: 'chown',
    paths: { path: 'path' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({
      path,
      owner: z.union([z.string(), z.number().int()]).optional(),
      group: z.union([z.string(), z.number().int()]).optional(),
      nofollow: z.boolean().optional(),
      /** Also answer with the attributes after the change (`stat`), saving an fs.stat round trip (the mount). */
      stat: z.boolean().optional(),
    }),
    result: z.object({ path: z.string(), uid: int, gid: int, stat: statSchema.optional() }),
    rest: {
      verb: 'post',
      route: '/admin/chown{/*path}',
      summary: 'chown (only root gives files to another user; owners may chgrp to their own groups)',
      from: { path: 'path' },
      errors: COMMON,
      check: (p) =>
        p.owner === undefined && p.group === undefined ? "missing field 'owner' (and optional 'group')" : undefined,
    },
  },
  /** Times in nanoseconds as decimal strings, or numbers of milliseconds; omitted means now. `nofollow`: a symlink's own times. */
  'fs.utimens': {
    op: 'utime',
    paths: { path: 'path' },
    shows: ['path'],
    mutates: 'tree',
    params: z.object({
      path,
      atime: z.union([z.string(), z.number()]).optional(),
      mtime: z.union([z.string(), z.number()]).optional(),
      nofollow: z.boolean().optional(),
      /** Also answer with the attributes after the change (`stat`), saving an fs.stat round trip (the mount). */
      stat: z.boolean().optional(),
    }),
    result: z.object({ path: z.string(), stat: statSchema.optional() }),
  },
  /** access(2): mode bits R=4 W=2 X=1, 0 for existence. */
  'fs.access': {
    op: 'access',
    paths: { path: 'path' },
    shows: ['path'],
    params: z.object({ path, mode: z.number().int().min(0).max(7) }),
    result: pathResult,
  },
  'fs.statfs': {
    params: z.object({}),
    result: z.object({ bsize: int, blocks: int, bfree: int, bavail: int, files: int, ffree: int, namemax: int }),
  },

  // search
  /**
   * Matching lines in path order, at most `max_results` (default 10,000), after the first `offset`
   * matches. Files with a NUL byte in their first 8 KiB are binary: not searched, counted in
   * `skipped_binary` (present when not 0). `next_offset` (present when more matches follow) is the
   * `offset` of the next page.
   */
  'search.grep': {
    op: 'grep',
    paths: { path: 'path' },
    params: z.object({
      pattern: z.string().max(10000).describe('regular expression'),
      path: pathOpt.describe('file or directory (default home)'),
      recursive: z.boolean().describe('include subdirectories').optional(),
      ignore_case: z.boolean().describe('case-insensitive').optional(),
      max_results: z.number().int().min(1).max(1_000_000).describe('stop after this many matches').optional(),
      offset: z
        .number()
        .int()
        .min(0)
        .max(1_000_000_000)
        .describe('pass over this many matches first (the next_offset of the previous page)')
        .optional(),
    }),
    result: z
      .object({
        results: z.array(grepMatchSchema),
        count: int,
        truncated: z.boolean(),
        skipped_binary: int
          .describe('binary files (a NUL byte in the first 8 KiB) not searched; present when not 0')
          .optional(),
        next_offset: int.describe('the offset of the next page, when more matches follow').optional(),
      })
      .meta({ id: 'GrepResult' }),
    rest: {
      verb: 'get',
      route: '/search/grep',
      summary: 'Regex search over file contents (JavaScript RegExp; bounded in time)',
      errors: COMMON,
    },
    mcp: [
      {
        tool: 'search_files',
        title: 'Search file contents',
        description:
          'Search file contents for a regular expression (JavaScript RegExp syntax), like `grep -rn`. Returns each matching line with ' +
          'its file and line number, in path order. Searches your home directory by default, recursively. Files and directories you ' +
          'cannot read are skipped, and so are binary files (a NUL byte in their first 8 KiB; counted in skipped_binary). ' +
          `At most max_results matches per call (default ${SEARCH_DEFAULT}) and ${ANSWER_MAX} bytes of lines: when more match, ` +
          'truncated is true and next_offset says where the next page starts (pass it as offset).',
        args: {
          pattern: z.string().min(1).max(10000).describe('Regular expression, e.g. "TODO|FIXME" or "^# ".'),
          path: path.optional().describe(`Directory or file to search. ${pathDesc} Defaults to your home directory.`),
          recursive: z.boolean().optional().describe('Descend into subdirectories (default true).'),
          ignore_case: z.boolean().optional().describe('Case-insensitive match (default false).'),
          max_results: z
            .number()
            .int()
            .min(1)
            .max(10000)
            .optional()
            .describe(`Most matching lines to return (default ${SEARCH_DEFAULT}).`),
          offset: z
            .number()
            .int()
            .min(0)
            .optional()
            .describe('Matches to pass over first: the next_offset of the previous page.'),
        },
        output: {
          results: z.array(z.object({ file: z.string(), line_num: z.number(), line: z.string() })),
          count: z.number(),
          truncated: z.boolean(),
          next_offset: z.number().optional(),
          skipped_binary: z.number().optional(),
        },
        annotations: READS,
      },
    ],
  },
  'search.find': {
    op: 'find',
    paths: { path: 'path' },
    params: z.object({
      path: pathOpt.describe('directory to search (default home)'),
      name: z.string().max(4096).describe('glob on the entry name, e.g. `*.md`').optional(),
      type: z.enum(['f', 'd', 'l']).optional(),
    }),
    result: z.object({ results: z.array(z.string()), count: int, truncated: z.boolean().optional() }),
    rest: { verb: 'get', route: '/search/find', summary: 'Find by name (glob)', errors: COMMON },
    mcp: [
      {
        tool: 'find_files',
        title: 'Find files by name',
        description:
          'Find files and directories whose name matches a glob (e.g. "*.md", "notes-202?-*"), like `find -name`, under a directory ' +
          '(your home by default, recursively). Returns matching paths. Places you cannot read are skipped.',
        args: {
          name: z
            .string()
            .max(4096)
            .optional()
            .describe("Glob matched against each entry's name; omit to list everything."),
          path: path.optional().describe(`Directory to search. ${pathDesc} Defaults to your home directory.`),
          type: z
            .enum(['f', 'd', 'l', 'file', 'directory', 'symlink'])
            .optional()
            .describe('Only files (f), directories (d) or symlinks (l).'),
        },
        output: { results: z.array(z.string()), count: z.number(), truncated: z.boolean().optional() },
        annotations: READS,
      },
    ],
  },
  'search.tree': {
    op: 'tree',
    paths: { path: 'path' },
    params: z.object({
      path: pathOpt,
      depth: z.number().int().min(1).max(1_000_000).describe('maximum depth').optional(),
    }),
    result: z
      .object({ text: z.string(), directories: int, files: int, truncated: z.boolean().optional() })
      .meta({ id: 'Tree' }),
    rest: {
      verb: 'get',
      route: '/tree{/*path}',
      summary: 'Directory tree like the Unix `tree` command',
      from: { path: 'path' },
      text: { field: 'text', newline: true },
      errors: COMMON,
    },
  },

  // version control (scoped to the caller's workspace, if any)
  'vcs.commit': {
    mutates: 'tree',
    params: z.object({
      message: z.string().max(100000),
      paths: z.array(z.string().min(1)).max(10000).describe('only the changes at or below these paths').optional(),
    }),
    result: commitRecordSchema,
    rest: {
      verb: 'post',
      route: '/vcs/commit',
      summary:
        'Commit the pending changes the caller may read (all of them for root and wheel), or those at or below `paths`',
      errors: [400, 401, 403, 500],
    },
    mcp: [
      {
        tool: 'commit',
        title: 'Commit',
        description:
          'Record your pending changes as a new version (like `git commit -a`) with a message, so they can be found with ' +
          "get_history and restored with revert: every change you may read (others' private changes stay pending), or only those " +
          'at or below `paths`. Returns the short hash of the new commit.',
        args: {
          message: z.string().min(1).max(100000).describe('What changed and why.'),
          paths: z
            .array(path)
            .min(1)
            .max(10000)
            .optional()
            .describe('Only the changes at or below these paths (default: every change you may read).'),
        },
        output: toolCommit.shape,
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      },
    ],
  },
  'vcs.show': {
    params: z.object({ rev: z.string().describe('commit name: HEAD, HEAD~n, a hash prefix') }),
    result: z.object({
      commit: commitRecordSchema,
      changes: z.array(changeRecordSchema),
      truncated: z.literal(true).optional(),
      more: int.optional(),
    }),
    rest: {
      verb: 'get',
      route: '/vcs/show',
      summary: 'A commit and, per changed path the caller may read, what happened and who changed it',
      errors: COMMON,
    },
  },
  'vcs.log': {
    params: z.object({
      path: pathOpt.describe('only commits touching this path'),
      limit: z.number().int().min(1).max(1_000_000).describe('at most this many').optional(),
      cursor: z.string().describe('the `next` of the previous page').optional(),
    }),
    result: z.object({
      commits: z.array(commitRecordSchema),
      truncated: z.boolean().optional(),
      next_cursor: z.string().describe('present when older commits remain: pass it as `cursor`').optional(),
    }),
    rest: { verb: 'get', route: '/vcs/log', summary: 'Commits, newest first', errors: [400, 401, 403, 500] },
    mcp: [
      {
        tool: 'get_history',
        title: 'Get history',
        description:
          'List commits, newest first: hash, time, author and message. Optionally only commits that touched a path, and at most `limit` of them.',
        args: {
          path: path.optional().describe(`Only commits that changed this file or directory. ${pathDesc}`),
          limit: z.number().int().min(1).max(10000).optional().describe('At most this many commits (newest first).'),
          cursor: z
            .string()
            .max(200)
            .optional()
            .describe('The next_cursor of the previous call, to go on with older commits.'),
        },
        output: { commits: z.array(toolCommit), truncated: z.boolean().optional(), next_cursor: z.string().optional() },
        annotations: READS,
      },
    ],
  },
  'vcs.status': {
    params: z.object({
      limit: z.number().int().min(1).max(10000).describe('most changes to list (default and maximum 10000)').optional(),
      cursor: z.string().max(8192).describe('the `next_cursor` of the previous page').optional(),
    }),
    result: statusResultSchema,
    rest: {
      verb: 'get',
      route: '/vcs/status',
      summary: 'Changes since the last commit (plain text; `?format=json` for JSON)',
      text: { field: 'text', newline: true },
      errors: [400, 401, 403, 500],
    },
  },
  /** Unified diff; `from`/`to` are commit prefixes, `to` omitted means the working tree, `from` omitted means HEAD. */
  'vcs.diff': {
    params: z.object({
      from: z.string().describe('commit prefix (default HEAD)').optional(),
      to: z.string().describe('commit prefix (default the working tree)').optional(),
      path: pathOpt.describe('limit to this path'),
    }),
    result: z.object({
      diff: z.string(),
      truncated: z.literal(true).describe('present (true) when the diff was cut').optional(),
    }),
    rest: {
      verb: 'get',
      route: '/vcs/diff',
      summary: 'Unified diff between commits or against the working tree',
      text: { field: 'diff', type: 'text/x-diff; charset=utf-8' },
      errors: COMMON,
    },
  },
  'vcs.revert': {
    mutates: 'tree',
    params: z.object({
      hash: z.string(),
      paths: z.array(z.string().min(1)).max(10000).describe('only these paths and what is below them').optional(),
    }),
    result: z.object({
      hash: z.string(),
      reverted_to: z.string(),
      saved: z.string().nullable(),
      commit: commitRecordSchema,
    }),
    rest: {
      verb: 'post',
      route: '/vcs/revert',
      summary:
        "Restore the paths the caller may read (or `paths`) to a commit's state, as a new commit (the caller's uncommitted changes among them are committed first); all-or-nothing",
      errors: [...COMMON, 409],
    },
    mcp: [
      {
        tool: 'revert',
        title: 'Revert to a commit',
        description:
          'Restore the files you may read (or only `paths`, e.g. one file) to their state at an earlier commit (hash or unique prefix of ' +
          'at least 4 hex digits, from get_history; or HEAD~n / <hash>~n, n commits before it, e.g. HEAD~1 for the one before the last). ' +
          'All or nothing: if you may not write one of them, nothing changes and the error names it. ' +
          'Your uncommitted changes there are committed first and the restore is recorded as a new commit, so nothing is lost.',
        args: {
          hash: z.string().min(4).max(64).describe('Commit hash or unique prefix, or HEAD~n / <hash>~n.'),
          paths: z
            .array(path)
            .min(1)
            .max(10000)
            .optional()
            .describe('Only restore these files or directories (default: every path you may read).'),
        },
        output: { hash: z.string(), reverted_to: z.string(), saved: z.string().nullable(), commit: toolCommit },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
    ],
  },
  'vcs.undo': {
    mutates: 'tree',
    params: z.object({
      actor: z.string().min(1).max(256).describe('the user or agent whose changes to undo'),
      since: z.string().max(200).describe('a commit name or an ISO date-time (default: the last commit)').optional(),
    }),
    result: z.object({
      hash: z.string(),
      reverted_to: z.string(),
      saved: z.string().nullable(),
      commit: commitRecordSchema,
      paths: z.array(z.string()),
    }),
    rest: {
      verb: 'post',
      route: '/vcs/undo',
      summary:
        'Restore every path last changed by `actor` since a commit or time to its state then (a revert narrowed to those paths: all-or-nothing), as a new commit',
      errors: [...COMMON, 409],
    },
    mcp: [
      {
        tool: 'undo',
        title: "Undo an agent's changes",
        description:
          'Restore every file last changed by `actor` (a user or agent name; an agent also when it acted on behalf of someone) ' +
          'since a commit (hash, prefix or HEAD~n; default: the last commit) or an ISO date-time, to its state then. ' +
          'A file someone else changed after the actor is left alone. Same rules as revert: only files you may read, ' +
          'all or nothing, recorded as a new commit (your uncommitted changes there are committed first). ' +
          'Nothing to undo is an error (no change by the actor, or nothing differs), and no commit is recorded.',
        args: {
          actor: z.string().min(1).max(256).describe('The user or agent whose changes to undo.'),
          since: z
            .string()
            .min(1)
            .max(200)
            .optional()
            .describe('A commit (hash, prefix, HEAD~n) or an ISO date-time; default: the last commit.'),
        },
        output: {
          hash: z.string(),
          reverted_to: z.string(),
          saved: z.string().nullable(),
          paths: z.array(z.string()),
          commit: toolCommit,
        },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
    ],
  },
  /** Read-only views of a commit's tree (for `.history` in the mount). Paths are absolute within the snapshot. */
  'vcs.ls': { params: z.object({ rev: z.string(), path: pathOpt }), result: listingSchema },
  'vcs.stat': { params: z.object({ rev: z.string(), path: pathOpt }), result: pathStatSchema },
  /** Content as the frame's raw bytes. */
  'vcs.cat': {
    params: z.object({ rev: z.string(), path }),
    result: z.object({ path: z.string(), size: int, etag: z.string() }),
  },
} as const satisfies Record<
  string,
  OpTraits & { params: z.ZodObject; result: z.ZodType; rest?: RestBinding; mcp?: readonly McpBinding[] }
>;

export type Methods = typeof methods;
export type Method = keyof Methods;
export type Params<M extends Method> = z.input<Methods[M]['params']>;
export type ParsedParams<M extends Method> = z.output<Methods[M]['params']>;
export type Result<M extends Method> = z.infer<Methods[M]['result']>;

/** Every MCP tool binding, with its method, in table order (the order of tools/list). */
type ToolBindings = {
  [M in Method]: Methods[M] extends { mcp: readonly (infer B)[] } ? B & { method: M } : never;
}[Method];
export type ToolName = ToolBindings['tool'];
/** The arguments a tool's handler receives (its input schema, parsed). */
export type ToolArgs<T extends ToolName> = z.output<z.ZodObject<Extract<ToolBindings, { tool: T }>['args']>>;

export function toolBindings(): (McpBinding & { tool: ToolName; method: Method })[] {
  const out: (McpBinding & { tool: ToolName; method: Method })[] = [];
  for (const [method, spec] of Object.entries(methods) as [Method, { mcp?: readonly McpBinding[] }][]) {
    for (const b of spec.mcp ?? []) out.push({ ...b, tool: b.tool as ToolName, method });
  }
  return out;
}

/** The method names, for the check every request passes (a Set: hasOwnProperty on the large table cost more). */
const methodNames: ReadonlySet<string> = new Set(Object.keys(methods));

export function isMethod(m: unknown): m is Method {
  return typeof m === 'string' && methodNames.has(m);
}

// ---------- frames ----------

export interface RequestHeader {
  id: number;
  method: string;
  params?: unknown;
  creds?: unknown;
}

/** @public (the wire format) */
export interface ResponseHeader {
  id: number | null;
  result?: unknown;
  error?: { code: string; message: string; path?: string };
}

/** @public (the wire format) */
export interface EventHeader {
  event: 'change';
  data: ChangeEvent;
}

/** Modes on the wire: accept 420, "644", "0644", "2775"; reject anything else. */
export function parseMode(mode: number | string): number | null {
  if (typeof mode === 'number') return Number.isInteger(mode) && mode >= 0 && mode <= 0o7777 ? mode : null;
  if (!/^[0-7]{1,4}$/.test(mode)) return null;
  return parseInt(mode, 8);
}

export function formatMode(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}
