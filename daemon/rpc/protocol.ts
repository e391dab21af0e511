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

export type Kind = 'file' | 'directory' | 'symlink';

export interface Stat {
  inode_id: number;
  kind: Kind;
  size: number;
  mode: string; // four octal digits, e.g. "0644", "2775", "1777"
  uid: number;
  gid: number;
  nlink: number;
  created: number; // Unix seconds
  modified: number; // Unix seconds
  changed: number; // Unix seconds
  accessed: number; // Unix seconds
  mtime_ns: string; // nanoseconds since the epoch, decimal string (exact times for FUSE)
  atime_ns: string;
  ctime_ns: string;
  etag?: string; // files: content id
  target?: string; // symlinks: link target
}

export interface DirEntry {
  name: string;
  is_dir: boolean;
  is_symlink: boolean;
  mode: string;
  uid: number;
  gid: number;
  size: number;
  modified: number;
  inode_id: number;
  mtime_ns: string;
  /** Set by the daemon's listings (absent in entries a front end builds itself). */
  atime_ns?: string;
  ctime_ns?: string;
}

export interface Listing {
  path: string;
  entries: DirEntry[];
  /** Present (true) only when the listing was cut at `limit`: ask again with `cursor: next_cursor`. */
  truncated?: true;
  next_cursor?: string;
}

/**
 * Entries in one listing page, by default and at most. An entry is about 250 bytes of JSON, so a
 * page stays near 2.5 MB (far below a frame's limit, encoded in a few ms), while every directory
 * of up to 10,000 entries (any real notes folder) still answers in one page, exactly as before.
 */
export const LIST_PAGE_MAX = 10000;

export interface UserRecord {
  name: string;
  uid: number;
  gid: number;
  groups: number[]; // gids, primary first
  home: string;
  is_agent: boolean;
  is_admin: boolean;
  has_token: boolean;
}

export interface GroupRecord {
  name: string;
  gid: number;
  members: string[];
}

export interface WorkspaceRecord {
  id: string;
  name: string;
  root_path: string;
  owner: string;
  created: number;
}

/** A workspace secret as listed: never the secret or its hash. */
export interface WorkspaceTokenRecord {
  id: string;
  name: string;
  agent: string;
  created: number;
}

export interface WhoAmI {
  user: string;
  uid: number;
  gid: number;
  groups: number[];
  home: string;
  is_agent: boolean;
  is_admin: boolean;
  on_behalf_of?: string;
  workspace?: { id: string; name: string; root_path: string };
}

export interface GrepMatch {
  file: string;
  line_num: number;
  line: string;
}

export interface CommitRecord {
  hash: string; // 12 hex digits
  message: string;
  author: string;
  on_behalf_of?: string;
  timestamp: number;
  parent: string | null;
  changes: number;
  workspace?: string;
}

export interface StatusResult {
  added: string[];
  modified: string[];
  deleted: string[];
  clean: boolean;
  head: string | null;
  text: string; // git-style plain text
  /** Present only when the lists were cut (see STATUS_MAX): `more` changes were not listed. */
  truncated?: true;
  more?: number;
}

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

export type Empty = Record<string, never>;

// ---------- params helpers ----------

const path = z.string().max(65536);
const pathOpt = path.optional();
const modeSchema = z.union([z.number().int(), z.string()]);
/** A write grant id (fs.grantWrite, fs.write want_grant). */
const grantId = z.string().min(1).max(128);

/** What `sys.status` answers: the daemon process, its data dir and what it holds. */
export interface DaemonStatus {
  pid: number;
  version: string;
  data_dir: string;
  socket: string;
  /** Seconds since the daemon started. */
  uptime: number;
  /** How it was started: `background` (by a client, exits when idle), `serve`, or `foreground` (`mdvfs daemon`). */
  started_by: 'background' | 'serve' | 'foreground';
  /** The pid of the live `mdvfs serve` that keeps this daemon up, if any. */
  served_by?: number;
  /** Seconds with no client after which this daemon exits (0: it does not). */
  idle_exit: number;
  users: number;
  files: number;
  commits: number;
  /** Open connections, the asker's included. */
  clients: number;
}

// ---------- the table ----------

export const methods = {
  // service
  'sys.health': { params: z.object({}), result: {} as { status: 'ok'; version: string; uptime: number; inodes: number; commits: number; objects: number; needs_bootstrap: boolean } },
  'sys.gc': { params: z.object({}), result: {} as { removed: number; kept: number } },
  'sys.fsck': { params: z.object({}), result: {} as { ok: boolean; problems: string[]; objects: number; inodes: number } },
  'sys.ping': { params: z.object({}), result: {} as { pong: true; pid: number } },
  /** The daemon process (`mdvfs status`); local connections only, never through the HTTP sidecar. */
  'sys.status': { params: z.object({}), result: {} as DaemonStatus },
  /**
   * For `mdvfs serve` only: marks the daemon as held by the serve process `pid` (it restarts the
   * daemon when it dies). Answers the holder: another live serve's pid if one already holds it.
   */
  'sys.hold': { params: z.object({ pid: z.number().int().positive() }), result: {} as { held_by: number } },
  /** Subscribes this connection to change events (`event: 'change'`). */
  'sys.subscribe': { params: z.object({}), result: {} as { subscribed: true } },
  /**
   * Subscribes this connection, as the caller, to the change feed filtered by what the caller may
   * read (`event: 'feed'` frames carrying `sub`). `sub` names the subscription on this connection;
   * `since` replays what happened after that id (`reset: true` when it cannot: reload instead).
   */
  'events.subscribe': { params: z.object({ sub: z.string().min(1).max(64), since: z.string().max(64).optional() }), result: {} as { last_id: string; reset: boolean } },
  'events.unsubscribe': { params: z.object({ sub: z.string().min(1).max(64) }), result: {} as { unsubscribed: boolean } },

  // identity
  'auth.whoami': { params: z.object({}), result: {} as WhoAmI },
  /**
   * For front ends only (never exposed to callers): the real root of the caller's workspace ('/'
   * outside one), to map the daemon's global change events to the caller's paths. Security:
   * whoami and /workspaces show a workspace caller its root as '/', never where it lives.
   */
  'auth.scope': { params: z.object({}), result: {} as { root_path: string } },
  'auth.login': { params: z.object({ username: z.string() }), result: {} as WhoAmI & { username: string } },
  'auth.bootstrap': { params: z.object({ username: z.string() }), result: {} as { username: string; uid: number; token: string } },

  // admin (root/wheel)
  /** Creating an agent also issues its token: the raw `token` is in this answer only (users get none). */
  'admin.userAdd': { params: z.object({ name: z.string(), is_agent: z.boolean().optional() }), result: {} as UserRecord & { token?: string } },
  'admin.userList': { params: z.object({}), result: {} as { users: UserRecord[] } },
  'admin.userDel': { params: z.object({ name: z.string() }), result: {} as { deleted: string } },
  'admin.token': { params: z.object({ name: z.string() }), result: {} as { name: string; token: string } },
  'admin.groupAdd': { params: z.object({ name: z.string() }), result: {} as GroupRecord },
  'admin.groupList': { params: z.object({}), result: {} as { groups: GroupRecord[] } },
  'admin.groupMemberAdd': { params: z.object({ user: z.string(), group: z.string() }), result: {} as GroupRecord },
  'admin.groupMemberDel': { params: z.object({ user: z.string(), group: z.string() }), result: {} as GroupRecord },

  // workspaces
  'ws.create': { params: z.object({ name: z.string(), root_path: z.string() }), result: {} as WorkspaceRecord },
  'ws.list': { params: z.object({}), result: {} as { workspaces: WorkspaceRecord[] } },
  'ws.token': { params: z.object({ id: z.string(), name: z.string(), agent_token: z.string() }), result: {} as { workspace_id: string; name: string; secret: string; token_id: string } },
  'ws.tokenList': { params: z.object({ id: z.string() }), result: {} as { workspace_id: string; tokens: WorkspaceTokenRecord[] } },
  'ws.tokenRevoke': { params: z.object({ id: z.string(), token_id: z.string() }), result: {} as { workspace_id: string; revoked: string } },

  // filesystem: paths are as the caller wrote them; the daemon resolves them (contract §2)
  /** Resolves a path for the caller without touching the tree: what `path` means for this identity. */
  'fs.resolve': { params: z.object({ path }), result: {} as { path: string } },
  'fs.stat': { params: z.object({ path, nofollow: z.boolean().optional() }), result: {} as Stat & { path: string } },
  /**
   * A directory's entries in name order, at most `limit` (default and maximum LIST_PAGE_MAX). A cut
   * listing says `truncated: true` and gives `next_cursor`, an opaque string to pass as `cursor`.
   */
  'fs.list': { params: z.object({ path: pathOpt, limit: z.number().int().min(1).max(LIST_PAGE_MAX).optional(), cursor: z.string().max(2048).optional() }), result: {} as Listing },
  /**
   * File content is returned as the frame's raw bytes, at most READ_CHUNK of them per answer (from
   * `offset`, at most `length`); `size` is the whole file's. `if_match` (an etag) makes a later part
   * fail with EPRECOND if the file changed meanwhile. DaemonClient assembles a whole file from parts.
   */
  'fs.read': {
    params: z.object({ path, if_none_match: z.string().optional(), if_match: z.string().optional(), offset: z.number().int().min(0).optional(), length: z.number().int().min(0).optional() }),
    result: {} as { path: string; etag: string; size: number; not_modified?: boolean },
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
    result: {} as { path: string; size: number; etag: string; created: boolean; stat?: Stat; grant?: string },
  },
  /** `grant`: as in fs.write (ftruncate through a descriptor opened for writing). */
  'fs.truncate': { params: z.object({ path, size: z.number().int().min(0), grant: grantId.optional() }), result: {} as { path: string; size: number } },
  /**
   * open(2) for writing, for the mount: checks write access (and read with `mode` 6) to the file now
   * and answers a write grant, an unguessable id that lets fs.write/fs.truncate of that file, by the
   * same principal over the same connection, skip the w-bit check until fs.releaseGrant or until the
   * connection closes (POSIX checks access at open, not at each write). Nothing else is skipped.
   */
  'fs.grantWrite': { params: z.object({ path, mode: z.union([z.literal(2), z.literal(6)]) }), result: {} as { path: string; grant: string } },
  /** Ends write grants of this connection (descriptors closed); `released` counts those that were live. */
  'fs.releaseGrant': { params: z.object({ grants: z.array(grantId).min(1).max(65536) }), result: {} as { released: number } },
  'fs.mkdir': { params: z.object({ path, parents: z.boolean().optional(), mode: modeSchema.optional() }), result: {} as { path: string; created: boolean } },
  /** Unlinks a file or symlink (EISDIR for a directory). */
  'fs.unlink': { params: z.object({ path }), result: {} as { path: string } },
  /** Removes an empty directory. */
  'fs.rmdir': { params: z.object({ path }), result: {} as { path: string } },
  /** REST-style delete: a file, an empty directory, or with `recursive` a whole subtree (all-or-nothing). */
  'fs.delete': { params: z.object({ path, recursive: z.boolean().optional() }), result: {} as { path: string; deleted: number } },
  /**
   * `into_dir` (cp/mv, for the REST, MCP and CLI front ends): a `dst` that is an existing directory
   * (symlinks followed) means `dst/<basename of src>`. Without it `dst` is exactly the new path.
   */
  'fs.copy': { params: z.object({ src: path, dst: path, recursive: z.boolean().optional(), overwrite: z.boolean().optional(), into_dir: z.boolean().optional() }), result: {} as { src: string; dst: string; copied: number } },
  /** rename(2) semantics: replaces an existing file, or an empty directory with a directory. `into_dir` as for fs.copy. */
  'fs.move': { params: z.object({ src: path, dst: path, overwrite: z.boolean().optional(), into_dir: z.boolean().optional() }), result: {} as { src: string; dst: string } },
  'fs.symlink': { params: z.object({ target: z.string().max(4096), path }), result: {} as { path: string; target: string } },
  'fs.readlink': { params: z.object({ path }), result: {} as { path: string; target: string } },
  'fs.chmod': { params: z.object({ path, mode: modeSchema }), result: {} as { path: string; mode: string } },
  /** owner/group are names or numeric ids (as strings or numbers). */
  'fs.chown': { params: z.object({ path, owner: z.union([z.string(), z.number().int()]).optional(), group: z.union([z.string(), z.number().int()]).optional(), nofollow: z.boolean().optional() }), result: {} as { path: string; uid: number; gid: number } },
  /** Times in nanoseconds as decimal strings, or numbers of milliseconds; omitted means now. */
  'fs.utimens': { params: z.object({ path, atime: z.union([z.string(), z.number()]).optional(), mtime: z.union([z.string(), z.number()]).optional() }), result: {} as { path: string } },
  /** access(2): mode bits R=4 W=2 X=1, 0 for existence. */
  'fs.access': { params: z.object({ path, mode: z.number().int().min(0).max(7) }), result: {} as { path: string } },
  'fs.statfs': { params: z.object({}), result: {} as { bsize: number; blocks: number; bfree: number; bavail: number; files: number; ffree: number; namemax: number } },

  // search
  /**
   * Matching lines in path order, at most `max_results` (default 10,000), after the first `offset`
   * matches. Files with a NUL byte in their first 8 KiB are binary: not searched, counted in
   * `skipped_binary` (present when not 0). `next_offset` (present when more matches follow) is the
   * `offset` of the next page.
   */
  'search.grep': {
    params: z.object({ pattern: z.string().max(10000), path: pathOpt, recursive: z.boolean().optional(), ignore_case: z.boolean().optional(), max_results: z.number().int().min(1).optional(), offset: z.number().int().min(0).optional() }),
    result: {} as { results: GrepMatch[]; count: number; truncated: boolean; skipped_binary?: number; next_offset?: number },
  },
  'search.find': { params: z.object({ path: pathOpt, name: z.string().max(4096).optional(), type: z.enum(['f', 'd', 'l']).optional() }), result: {} as { results: string[]; count: number; truncated?: boolean } },
  'search.tree': { params: z.object({ path: pathOpt, depth: z.number().int().min(1).optional() }), result: {} as { text: string; directories: number; files: number; truncated?: boolean } },

  // version control (scoped to the caller's workspace, if any)
  'vcs.commit': { params: z.object({ message: z.string().max(100000) }), result: {} as CommitRecord },
  'vcs.log': { params: z.object({ path: pathOpt, limit: z.number().int().min(1).optional() }), result: {} as { commits: CommitRecord[]; truncated?: boolean } },
  'vcs.status': { params: z.object({}), result: {} as StatusResult },
  /** Unified diff; `from`/`to` are commit prefixes, `to` omitted means the working tree, `from` omitted means HEAD. */
  'vcs.diff': { params: z.object({ from: z.string().optional(), to: z.string().optional(), path: pathOpt }), result: {} as { diff: string; truncated?: true } },
  'vcs.revert': { params: z.object({ hash: z.string() }), result: {} as { hash: string; reverted_to: string; saved: string | null; commit: CommitRecord } },
  /** Read-only views of a commit's tree (for `.history` in the mount). Paths are absolute within the snapshot. */
  'vcs.ls': { params: z.object({ rev: z.string(), path: pathOpt }), result: {} as Listing },
  'vcs.stat': { params: z.object({ rev: z.string(), path: pathOpt }), result: {} as Stat & { path: string } },
  /** Content as the frame's raw bytes. */
  'vcs.cat': { params: z.object({ rev: z.string(), path }), result: {} as { path: string; size: number; etag: string } },
} as const;

export type Methods = typeof methods;
export type Method = keyof Methods;
export type Params<M extends Method> = z.input<Methods[M]['params']>;
export type ParsedParams<M extends Method> = z.output<Methods[M]['params']>;
export type Result<M extends Method> = Methods[M]['result'];

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

export interface ResponseHeader {
  id: number | null;
  result?: unknown;
  error?: { code: string; message: string; path?: string };
}

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
