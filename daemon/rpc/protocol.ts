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
const nsTime = z.string().regex(/^-?[0-9]+$/).describe('nanoseconds since the epoch, as a decimal string');
const modeText = z.string().regex(/^[0-7]{4}$/).describe('four octal digits, e.g. `0644`');
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

export const userRecordSchema = z.object({ name: z.string(), ...identityFields, has_token: z.boolean() }).meta({ id: 'User' });
export type UserRecord = z.infer<typeof userRecordSchema>;

export const groupRecordSchema = z.object({ name: z.string(), gid: int, members: z.array(z.string()) }).meta({ id: 'Group' });
/** @public (the wire format) */
export type GroupRecord = z.infer<typeof groupRecordSchema>;

export const workspaceRecordSchema = z
  .object({ id: z.string().describe('workspace UUID'), name: z.string(), root_path: z.string(), owner: z.string(), created: unixSecs })
  .meta({ id: 'Workspace' });
export type WorkspaceRecord = z.infer<typeof workspaceRecordSchema>;

/** A workspace secret as listed: never the secret or its hash. */
export const workspaceTokenRecordSchema = z.object({ id: z.string(), name: z.string(), agent: z.string(), created: unixSecs }).meta({ id: 'WorkspaceToken' });
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
    path: z.string().describe('relative to the history\'s root; a trailing / marks a directory\'s own mode or owner'),
    op: z.enum(['added', 'modified', 'deleted']),
    by: z.string().describe('who last changed it before the commit'),
    on_behalf_of: z.string().describe('the user `by` acted for (an agent\'s delegation)').optional(),
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

/** What `sys.status` answers: the daemon process, its data dir and what it holds. */
export const daemonStatusSchema = z.object({
  pid: int,
  version: z.string(),
  data_dir: z.string(),
  socket: z.string(),
  /** Seconds since the daemon started. */
  uptime: z.number(),
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
});
export type DaemonStatus = z.infer<typeof daemonStatusSchema>;

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

// ---------- the table ----------

const pathResult = z.object({ path: z.string() });

export const methods = {
  // service
  'sys.health': {
    params: z.object({}),
    result: z.object({ status: z.literal('ok'), version: z.string(), uptime: z.number(), inodes: int, commits: int, objects: int, needs_bootstrap: z.boolean() }).meta({ id: 'Health' }),
  },
  'sys.gc': { params: z.object({}), result: z.object({ removed: int, kept: int }) },
  'sys.fsck': { params: z.object({}), result: z.object({ ok: z.boolean(), problems: z.array(z.string()), objects: int, inodes: int }) },
  'sys.ping': { params: z.object({}), result: z.object({ pong: z.literal(true), pid: int }) },
  /** The daemon process (`mdvfs status`); local connections only, never through the HTTP sidecar. */
  'sys.status': { params: z.object({}), result: daemonStatusSchema },
  /**
   * For `mdvfs serve` only: marks the daemon as held by the serve process `pid` (it restarts the
   * daemon when it dies). Answers the holder: another live serve's pid if one already holds it.
   */
  'sys.hold': { params: z.object({ pid: z.number().int().positive() }), result: z.object({ held_by: int }) },
  /** Subscribes this connection to change events (`event: 'change'`). */
  'sys.subscribe': { params: z.object({}), result: z.object({ subscribed: z.literal(true) }) },
  /**
   * Subscribes this connection, as the caller, to the change feed filtered by what the caller may
   * read (`event: 'feed'` frames carrying `sub`). `sub` names the subscription on this connection;
   * `since` replays what happened after that id (`reset: true` when it cannot: reload instead).
   */
  'events.subscribe': { params: z.object({ sub: z.string().min(1).max(64), since: z.string().max(64).optional() }), result: z.object({ last_id: z.string(), reset: z.boolean() }) },
  'events.unsubscribe': { params: z.object({ sub: z.string().min(1).max(64) }), result: z.object({ unsubscribed: z.boolean() }) },

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
    params: z.object({ username: z.string() }),
    result: whoAmISchema.extend({ username: z.string() }),
    rest: { verb: 'post', route: '/auth/login', summary: 'Check a user name and return its identity (groups are gids, primary first)', errors: [400, 401, 404, 500] },
  },
  'auth.bootstrap': {
    params: z.object({ username: z.string() }),
    result: z.object({ username: z.string(), uid: int, token: z.string() }),
    rest: { verb: 'post', route: '/auth/bootstrap', summary: 'Create the first admin (wheel) user and return its token; only while no user but root exists', errors: [400, 401, 409, 500] },
  },

  // admin (root/wheel)
  /** Creating an agent also issues its token: the raw `token` is in this answer only (users get none). */
  'admin.userAdd': {
    params: z.object({ name: z.string(), is_agent: z.boolean().optional() }),
    result: userRecordSchema.extend({ token: z.string().describe('only in the answer that creates an agent: its raw token, shown once').optional() }),
    rest: { verb: 'post', route: '/admin/users', summary: 'Create a user or agent', errors: [400, 401, 403, 409, 500] },
  },
  'admin.userList': {
    params: z.object({}),
    result: z.object({ users: z.array(userRecordSchema) }),
    rest: { verb: 'get', route: '/admin/users', summary: 'List users (never tokens)', errors: [401, 403, 500] },
  },
  'admin.userDel': {
    params: z.object({ name: z.string().describe('user name') }),
    result: z.object({ deleted: z.string() }),
    rest: { verb: 'delete', route: '/admin/users/:name', summary: 'Delete a user', from: { name: 'path' }, errors: [400, 401, 403, 404, 500] },
  },
  'admin.token': {
    params: z.object({ name: z.string().describe('user name') }),
    result: z.object({ name: z.string(), token: z.string() }),
    rest: { verb: 'post', route: '/admin/users/:name/tokens', summary: "Issue or regenerate the user's token; the raw token is shown only in this response", from: { name: 'path' }, errors: [400, 401, 403, 404, 500] },
  },
  'admin.groupAdd': {
    params: z.object({ name: z.string() }),
    result: groupRecordSchema,
    rest: { verb: 'post', route: '/admin/groups', summary: 'Create a group', errors: [400, 401, 403, 409, 500] },
  },
  'admin.groupList': {
    params: z.object({}),
    result: z.object({ groups: z.array(groupRecordSchema) }),
    rest: { verb: 'get', route: '/admin/groups', summary: 'List groups', errors: [401, 403, 500] },
  },
  'admin.groupMemberAdd': {
    params: z.object({ user: z.string().describe('user name'), group: z.string().describe('group name') }),
    result: groupRecordSchema,
    rest: { verb: 'post', route: '/admin/users/:user/groups/:group', summary: 'Add a user to a group', from: { user: 'path', group: 'path' }, errors: [400, 401, 403, 404, 500] },
  },
  'admin.groupMemberDel': {
    params: z.object({ user: z.string().describe('user name'), group: z.string().describe('group name') }),
    result: groupRecordSchema,
    rest: { verb: 'delete', route: '/admin/users/:user/groups/:group', summary: 'Remove a user from a group', from: { user: 'path', group: 'path' }, errors: [400, 401, 403, 404, 500] },
  },

  // workspaces
  'ws.create': {
    params: z.object({ name: z.string(), root_path: z.string() }),
    result: workspaceRecordSchema,
    rest: { verb: 'post', route: '/workspaces', summary: 'Create a workspace rooted at an absolute path', errors: [...COMMON, 409] },
  },
  'ws.list': {
    params: z.object({}),
    result: z.object({ workspaces: z.array(workspaceRecordSchema) }),
    rest: { verb: 'get', route: '/workspaces', summary: 'List workspaces', errors: [401, 403, 500] },
  },
  'ws.token': {
    params: z.object({ id: z.string().describe('workspace UUID'), name: z.string(), agent_token: z.string() }),
    result: z.object({ workspace_id: z.string(), name: z.string(), secret: z.string(), token_id: z.string() }),
    rest: { verb: 'post', route: '/workspaces/:id/tokens', summary: 'Issue a workspace secret against an existing agent token; use it as `Bearer <secret>` with `X-Service-Workspace: <id>`', from: { id: 'path' }, errors: COMMON },
  },
  'ws.tokenList': {
    params: z.object({ id: z.string().describe('workspace UUID') }),
    result: z.object({ workspace_id: z.string(), tokens: z.array(workspaceTokenRecordSchema) }),
    rest: { verb: 'get', route: '/workspaces/:id/tokens', summary: "List a workspace's secrets (id, name, agent, created; never the secret): its owner, root or wheel", from: { id: 'path' }, errors: COMMON },
  },
  'ws.tokenRevoke': {
    params: z.object({ id: z.string().describe('workspace UUID'), token_id: z.string().describe('the token id from the listing') }),
    result: z.object({ workspace_id: z.string(), revoked: z.string() }),
    rest: { verb: 'delete', route: '/workspaces/:id/tokens/:token_id', summary: 'Revoke one workspace secret by its id', from: { id: 'path', token_id: 'path' }, errors: COMMON },
  },

  // filesystem: paths are as the caller wrote them; the daemon resolves them (contract §2)
  /** Resolves a path for the caller without touching the tree: what `path` means for this identity. */
  'fs.resolve': { params: z.object({ path }), result: pathResult },
  'fs.stat': { params: z.object({ path, nofollow: z.boolean().optional() }), result: pathStatSchema },
  /**
   * A directory's entries in name order, at most `limit` (default and maximum LIST_PAGE_MAX). A cut
   * listing says `truncated: true` and gives `next_cursor`, an opaque string to pass as `cursor`.
   */
  'fs.list': { params: z.object({ path: pathOpt, limit: z.number().int().min(1).max(LIST_PAGE_MAX).optional(), cursor: z.string().max(2048).optional() }), result: listingSchema },
  /**
   * File content is returned as the frame's raw bytes, at most READ_CHUNK of them per answer (from
   * `offset`, at most `length`); `size` is the whole file's. `if_match` (an etag) makes a later part
   * fail with EPRECOND if the file changed meanwhile. DaemonClient assembles a whole file from parts.
   */
  'fs.read': {
    params: z.object({ path, if_none_match: z.string().optional(), if_match: z.string().optional(), offset: z.number().int().min(0).optional(), length: z.number().int().min(0).optional() }),
    result: z.object({ path: z.string(), etag: z.string(), size: int, not_modified: z.boolean().optional() }),
  },
  /**
   * File content comes as the frame's raw bytes. Creates missing parents unless `parents: false`.
   * `if_match` (etag) and `if_none_match: '*'` are preconditions (EPRECOND).
   */
  'fs.write': {
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
    }),
    result: z.object({ path: z.string(), size: int, etag: z.string(), created: z.boolean(), stat: statSchema.optional(), grant: z.string().optional() }),
  },
  /** `grant`: as in fs.write (ftruncate through a descriptor opened for writing). */
  'fs.truncate': { params: z.object({ path, size: z.number().int().min(0), grant: grantId.optional() }), result: z.object({ path: z.string(), size: int }) },
  /**
   * open(2) for writing, for the mount: checks write access (and read with `mode` 6) to the file now
   * and answers a write grant, an unguessable id that lets fs.write/fs.truncate of that file, by the
   * same principal over the same connection, skip the w-bit check until fs.releaseGrant or until the
   * connection closes (POSIX checks access at open, not at each write). Nothing else is skipped.
   */
  'fs.grantWrite': { params: z.object({ path, mode: z.union([z.literal(2), z.literal(6)]) }), result: z.object({ path: z.string(), grant: z.string() }) },
  /** Ends write grants of this connection (descriptors closed); `released` counts those that were live. */
  'fs.releaseGrant': { params: z.object({ grants: z.array(grantId).min(1).max(65536) }), result: z.object({ released: int }) },
  'fs.mkdir': { params: z.object({ path, parents: z.boolean().optional(), mode: modeSchema.optional() }), result: z.object({ path: z.string(), created: z.boolean() }) },
  /** Unlinks a file or symlink (EISDIR for a directory). */
  'fs.unlink': { params: z.object({ path }), result: pathResult },
  /** Removes an empty directory. */
  'fs.rmdir': { params: z.object({ path }), result: pathResult },
  /** REST-style delete: a file, an empty directory, or with `recursive` a whole subtree (all-or-nothing). */
  'fs.delete': { params: z.object({ path, recursive: z.boolean().optional() }), result: z.object({ path: z.string(), deleted: int }) },
  /**
   * `into_dir` (cp/mv, for the REST, MCP and CLI front ends): a `dst` that is an existing directory
   * (symlinks followed) means `dst/<basename of src>`. Without it `dst` is exactly the new path.
   */
  'fs.copy': { params: z.object({ src: path, dst: path, recursive: z.boolean().optional(), overwrite: z.boolean().optional(), into_dir: z.boolean().optional() }), result: z.object({ src: z.string(), dst: z.string(), copied: int }) },
  /** rename(2) semantics: replaces an existing file, or an empty directory with a directory. `into_dir` as for fs.copy. */
  'fs.move': { params: z.object({ src: path, dst: path, overwrite: z.boolean().optional(), into_dir: z.boolean().optional() }), result: z.object({ src: z.string(), dst: z.string() }) },
  'fs.symlink': { params: z.object({ target: z.string().max(4096), path }), result: z.object({ path: z.string(), target: z.string() }) },
  'fs.readlink': { params: z.object({ path }), result: z.object({ path: z.string(), target: z.string() }) },
  'fs.chmod': {
    params: z.object({ path, mode: modeSchema.describe('octal mode, e.g. "0644"') }),
    result: z.object({ path: z.string(), mode: z.string() }),
    rest: { verb: 'post', route: '/admin/chmod{/*path}', summary: 'chmod (owner, wheel or root)', from: { path: 'path' }, hints: { mode: 'octal string such as "0644"' }, errors: COMMON },
  },
  /** owner/group are names or numeric ids (as strings or numbers). */
  'fs.chown': {
    params: z.object({ path, owner: z.union([z.string(), z.number().int()]).optional(), group: z.union([z.string(), z.number().int()]).optional(), nofollow: z.boolean().optional() }),
    result: z.object({ path: z.string(), uid: int, gid: int }),
    rest: {
      verb: 'post', route: '/admin/chown{/*path}', summary: 'chown (only root gives files to another user; owners may chgrp to their own groups)', from: { path: 'path' }, errors: COMMON,
      check: (p) => (p.owner === undefined && p.group === undefined ? "missing field 'owner' (and optional 'group')" : undefined),
    },
  },
  /** Times in nanoseconds as decimal strings, or numbers of milliseconds; omitted means now. */
  'fs.utimens': { params: z.object({ path, atime: z.union([z.string(), z.number()]).optional(), mtime: z.union([z.string(), z.number()]).optional() }), result: pathResult },
  /** access(2): mode bits R=4 W=2 X=1, 0 for existence. */
  'fs.access': { params: z.object({ path, mode: z.number().int().min(0).max(7) }), result: pathResult },
  'fs.statfs': { params: z.object({}), result: z.object({ bsize: int, blocks: int, bfree: int, bavail: int, files: int, ffree: int, namemax: int }) },

  // search
  /**
   * Matching lines in path order, at most `max_results` (default 10,000), after the first `offset`
   * matches. Files with a NUL byte in their first 8 KiB are binary: not searched, counted in
   * `skipped_binary` (present when not 0). `next_offset` (present when more matches follow) is the
   * `offset` of the next page.
   */
  'search.grep': {
    params: z.object({
      pattern: z.string().max(10000).describe('regular expression'),
      path: pathOpt.describe('file or directory (default home)'),
      recursive: z.boolean().describe('include subdirectories').optional(),
      ignore_case: z.boolean().describe('case-insensitive').optional(),
      max_results: z.number().int().min(1).max(1_000_000).describe('stop after this many matches').optional(),
      offset: z.number().int().min(0).max(1_000_000_000).describe('pass over this many matches first (the next_offset of the previous page)').optional(),
    }),
    result: z
      .object({
        results: z.array(grepMatchSchema),
        count: int,
        truncated: z.boolean(),
        skipped_binary: int.describe('binary files (a NUL byte in the first 8 KiB) not searched; present when not 0').optional(),
        next_offset: int.describe('the offset of the next page, when more matches follow').optional(),
      })
      .meta({ id: 'GrepResult' }),
    rest: { verb: 'get', route: '/search/grep', summary: 'Regex search over file contents (JavaScript RegExp; bounded in time)', errors: COMMON },
  },
  'search.find': {
    params: z.object({ path: pathOpt.describe('directory to search (default home)'), name: z.string().max(4096).describe('glob on the entry name, e.g. `*.md`').optional(), type: z.enum(['f', 'd', 'l']).optional() }),
    result: z.object({ results: z.array(z.string()), count: int, truncated: z.boolean().optional() }),
    rest: { verb: 'get', route: '/search/find', summary: 'Find by name (glob)', errors: COMMON },
  },
  'search.tree': {
    params: z.object({ path: pathOpt, depth: z.number().int().min(1).max(1_000_000).describe('maximum depth').optional() }),
    result: z.object({ text: z.string(), directories: int, files: int, truncated: z.boolean().optional() }).meta({ id: 'Tree' }),
    rest: { verb: 'get', route: '/tree{/*path}', summary: 'Directory tree like the Unix `tree` command', from: { path: 'path' }, text: { field: 'text', newline: true }, errors: COMMON },
  },

  // version control (scoped to the caller's workspace, if any)
  'vcs.commit': {
    params: z.object({ message: z.string().max(100000), paths: z.array(z.string().min(1)).max(10000).describe('only the changes at or below these paths').optional() }),
    result: commitRecordSchema,
    rest: { verb: 'post', route: '/vcs/commit', summary: 'Commit the pending changes the caller may read (all of them for root and wheel), or those at or below `paths`', errors: [400, 401, 403, 500] },
  },
  'vcs.show': {
    params: z.object({ rev: z.string().describe('commit name: HEAD, HEAD~n, a hash prefix') }),
    result: z.object({ commit: commitRecordSchema, changes: z.array(changeRecordSchema), truncated: z.literal(true).optional(), more: int.optional() }),
    rest: { verb: 'get', route: '/vcs/show', summary: 'A commit and, per changed path the caller may read, what happened and who changed it', errors: COMMON },
  },
  'vcs.log': {
    params: z.object({ path: pathOpt.describe('only commits touching this path'), limit: z.number().int().min(1).max(1_000_000).describe('at most this many').optional(), cursor: z.string().describe('the `next` of the previous page').optional() }),
    result: z.object({ commits: z.array(commitRecordSchema), truncated: z.boolean().optional(), next_cursor: z.string().describe('present when older commits remain: pass it as `cursor`').optional() }),
    rest: { verb: 'get', route: '/vcs/log', summary: 'Commits, newest first', errors: [400, 401, 403, 500] },
  },
  'vcs.status': {
    params: z.object({}),
    result: statusResultSchema,
    rest: { verb: 'get', route: '/vcs/status', summary: 'Changes since the last commit (plain text; `?format=json` for JSON)', text: { field: 'text', newline: true }, errors: [400, 401, 403, 500] },
  },
  /** Unified diff; `from`/`to` are commit prefixes, `to` omitted means the working tree, `from` omitted means HEAD. */
  'vcs.diff': {
    params: z.object({ from: z.string().describe('commit prefix (default HEAD)').optional(), to: z.string().describe('commit prefix (default the working tree)').optional(), path: pathOpt.describe('limit to this path') }),
    result: z.object({ diff: z.string(), truncated: z.literal(true).describe('present (true) when the diff was cut').optional() }),
    rest: { verb: 'get', route: '/vcs/diff', summary: 'Unified diff between commits or against the working tree', text: { field: 'diff', type: 'text/x-diff; charset=utf-8' }, errors: COMMON },
  },
  'vcs.revert': {
    params: z.object({ hash: z.string(), paths: z.array(z.string().min(1)).max(10000).describe('only these paths and what is below them').optional() }),
    result: z.object({ hash: z.string(), reverted_to: z.string(), saved: z.string().nullable(), commit: commitRecordSchema }),
    rest: { verb: 'post', route: '/vcs/revert', summary: "Restore the paths the caller may read (or `paths`) to a commit's state, as a new commit (the caller's uncommitted changes among them are committed first); all-or-nothing", errors: [...COMMON, 409] },
  },
  'vcs.undo': {
    params: z.object({ actor: z.string().min(1).max(256).describe('the user or agent whose changes to undo'), since: z.string().max(200).describe('a commit name or an ISO date-time (default: the last commit)').optional() }),
    result: z.object({ hash: z.string(), reverted_to: z.string(), saved: z.string().nullable(), commit: commitRecordSchema, paths: z.array(z.string()) }),
    rest: { verb: 'post', route: '/vcs/undo', summary: 'Restore every path last changed by `actor` since a commit or time to its state then (a revert narrowed to those paths: all-or-nothing), as a new commit', errors: [...COMMON, 409] },
  },
  /** Read-only views of a commit's tree (for `.history` in the mount). Paths are absolute within the snapshot. */
  'vcs.ls': { params: z.object({ rev: z.string(), path: pathOpt }), result: listingSchema },
  'vcs.stat': { params: z.object({ rev: z.string(), path: pathOpt }), result: pathStatSchema },
  /** Content as the frame's raw bytes. */
  'vcs.cat': { params: z.object({ rev: z.string(), path }), result: z.object({ path: z.string(), size: int, etag: z.string() }) },
} as const satisfies Record<string, { params: z.ZodObject; result: z.ZodType; rest?: RestBinding }>;

export type Methods = typeof methods;
export type Method = keyof Methods;
export type Params<M extends Method> = z.input<Methods[M]['params']>;
export type ParsedParams<M extends Method> = z.output<Methods[M]['params']>;
export type Result<M extends Method> = z.infer<Methods[M]['result']>;

export function isMethod(m: unknown): m is Method {
  return typeof m === 'string' && Object.prototype.hasOwnProperty.call(methods, m);
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
