/**
 * The daemon's handlers: one per protocol method. Each authenticates the request's credentials,
 * resolves paths for that identity (contract §2), calls the synchronous core, and for mutations
 * waits until the change is durable before answering.
 */
import { VERSION } from './rpc/version.js';
import { EventFeed, requestScope } from './events.js';
import { McpSessions } from './mcp-sessions.js';
import { VfsError, type WireError } from './errors.js';
import {
  actor,
  isAdminCred,
  isWheel,
  requireAdmin,
  requireTokenIssue,
  requireWorkspaceOwner,
  type Cred,
} from './core/perms.js';
import { displayPath, isWithin, resolveFor, normalize, splitParent } from './core/paths.js';
import { pathOf, type Node } from './core/inode.js';
import { slicer, type Vfs } from './core/vfs.js';
import type { GrantHolder } from './core/grants.js';
import {
  callerKey,
  capItems,
  capPaths,
  compilePattern,
  LOG_ANSWER_BYTES,
  find,
  grepFiles,
  tree,
  type GrepPool,
} from './search/search.js';
import type { AuthPolicy, GroupRow, Registry, UserRow, WorkspaceRow } from './auth/registry.js';
import type { Vcs, Scope } from './vcs/vcs.js';
import type { OpenedStore } from './store/store.js';
import type { TreeEntry } from './core/objects.js';
import {
  formatMode,
  LIST_PAGE_MAX,
  methods,
  parseMode,
  READ_CHUNK,
  type Creds,
  type GroupRecord,
  type Methods,
  type OpTraits,
  type DaemonStatus,
  type Listing,
  type DirEntry,
  type FeedHeader,
  type Method,
  type ParsedParams,
  type Result,
  type Stat,
  type UserRecord,
  type WhoAmI,
  type WorkspaceRecord,
} from './rpc/protocol.js';

export { VERSION };

/** Per-request context: the raw credentials, request bytes in, response bytes out. */
export interface Ctx {
  creds: Creds;
  data: Buffer | undefined;
  out?: Buffer;
  subscribe?: () => void;
  /** Sends an event frame on this request's connection (absent for in-process calls). */
  push?: (header: FeedHeader) => void;
  /** Set for workspace callers: rewrites real paths in an error to workspace paths. */
  mapError?: (w: WireError) => WireError;
  /** The socket connection the request came on (absent for in-process calls). */
  conn?: Connection;
}

/** One client connection, as handlers see it: what is bound to it ends when it closes. */
export interface Connection {
  readonly id: number;
  /** Runs `fn` once when the connection closes; one function per key (later ones are ignored). */
  onClose(key: string, fn: () => void): void;
}

type Handler<M extends Method> = (ctx: Ctx, p: ParsedParams<M>) => Result<M> | Promise<Result<M>>;
/** What `invoke` (daemon/rpc/server.ts) calls: params checked against the table, credentials not yet. */
export type Handlers = { [M in Method]: Handler<M> };

/** The params declared as paths (`paths` in the methods table). */
type PathKeys<M extends Method> = Methods[M] extends { paths: infer P } ? Extract<keyof P, string> : never;
/** A handler's params: as checked, with the path params resolved to absolute paths. */
type Resolved<M extends Method> = Omit<ParsedParams<M>, PathKeys<M>> & { [K in PathKeys<M>]: string };
/** The caller, for every operation that authenticates one. */
type CredOf<M extends Method> = Methods[M] extends { access: 'public' | 'local' } ? undefined : Cred;
/** An operation's own work, run by `Service.run`. */
type Op<M extends Method> = (p: Resolved<M>, r: { ctx: Ctx; cred: CredOf<M> }) => Result<M> | Promise<Result<M>>;
type Ops = { [M in Method]: Op<M> };

export interface ServiceDeps {
  vfs: Vfs;
  registry: Registry;
  vcs: Vcs;
  store: OpenedStore;
  grep: GrepPool;
  policy: AuthPolicy;
  /** The daemon process (`sys.status`, `sys.hold`); absent when the core runs without a socket. */
  process?: DaemonProcess;
}

/** The process-level facts and controls only daemon/main.ts knows. */
export interface DaemonProcess {
  status(): Omit<DaemonStatus, 'version' | 'users' | 'files' | 'commits'>;
  /** Makes `pid` the holder unless another live serve holds the daemon; returns the holder. */
  hold(pid: number): number;
}

const secs = (ns: bigint): number => Number(ns / 1_000_000_000n);

export function toStat(n: Node): Stat {
  const s: Stat = {
    inode_id: n.id,
    kind: n.kind,
    size: n.kind === 'file' ? n.size : n.kind === 'symlink' ? Buffer.byteLength(n.target) : n.children.size,
    mode: formatMode(n.mode),
    uid: n.uid,
    gid: n.gid,
    // A directory: `.`, its entry in the parent, and each subdirectory's `..` (kept as a count: O(1)).
    nlink: n.kind === 'directory' ? 2 + n.subdirs : 1,
    created: secs(n.btime),
    modified: secs(n.mtime),
    changed: secs(n.ctime),
    accessed: secs(n.atime),
    mtime_ns: n.mtime.toString(),
    atime_ns: n.atime.toString(),
    ctime_ns: n.ctime.toString(),
  };
  if (n.kind === 'file') s.etag = n.blob;
  if (n.kind === 'symlink') s.target = n.target;
  return s;
}

function toEntry(n: Node, name = n.name): DirEntry {
  return {
    name,
    is_dir: n.kind === 'directory',
    is_symlink: n.kind === 'symlink',
    mode: formatMode(n.mode),
    uid: n.uid,
    gid: n.gid,
    size: n.kind === 'file' ? n.size : n.kind === 'symlink' ? Buffer.byteLength(n.target) : n.children.size,
    modified: secs(n.mtime),
    inode_id: n.id,
    mtime_ns: n.mtime.toString(),
    atime_ns: n.atime.toString(),
    ctime_ns: n.ctime.toString(),
  };
}

function entryStat(e: TreeEntry, ts: number, id: number): Stat {
  const tsNs = (BigInt(ts) * 1_000_000_000n).toString();
  const s: Stat = {
    inode_id: id,
    kind: e.kind === 'd' ? 'directory' : e.kind === 'f' ? 'file' : 'symlink',
    size: e.size,
    mode: formatMode(e.mode),
    uid: e.uid,
    gid: e.gid,
    nlink: 1,
    created: ts,
    modified: ts,
    changed: ts,
    accessed: ts,
    mtime_ns: tsNs,
    atime_ns: tsNs,
    ctime_ns: tsNs,
  };
  if (e.kind === 'f') s.etag = e.ref;
  if (e.kind === 'l') s.target = e.ref;
  return s;
}

/** A stable pseudo inode number for snapshot entries. */
function snapshotIno(ref: string, name: string): number {
  let h = 0x811c9dc5;
  for (const ch of ref + '/' + name) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  return 0x40000000 + (h & 0x3fffffff);
}

/**
 * Security: a workspace caller never sees the real location of its workspace, in errors either.
 */
export function scrubPaths(w: WireError, jail: string): WireError {
  if (jail === '/') return w;
  const message = w.message.replace(/'(\/[^']*)'/g, (_m, p: string) =>
    isWithin(p, jail) ? `'${displayPath(p, jail)}'` : `'(outside the workspace)'`,
  );
  const out: WireError = { code: w.code, message };
  if (w.path !== undefined) out.path = displayPath(w.path, jail);
  return out;
}

/**
 * Listing cursors: the last name a page returned, opaque to clients (`c1.` + base64url). Paging
 * by name (not by position) keeps pages exact while entries come and go.
 */
const CURSOR = /^c1\.([A-Za-z0-9_-]{1,1400})$/;

function encodeCursor(name: string): string {
  return `c1.${Buffer.from(name, 'utf8').toString('base64url')}`;
}

function decodeCursor(cursor: string): string {
  const m = CURSOR.exec(cursor);
  const name = m === null ? '' : Buffer.from(m[1]!, 'base64url').toString('utf8');
  // Canonical encodings of a valid entry name only: anything else is not one of our cursors.
  if (
    name === '' ||
    encodeCursor(name) !== cursor ||
    name.includes('/') ||
    name.includes('\0') ||
    name === '.' ||
    name === '..'
  ) {
    throw new VfsError(
      'EINVAL',
      'scandir',
      undefined,
      `invalid cursor '${cursor.slice(0, 64)}' (pass back the next_cursor of the previous page)`,
    );
  }
  return name;
}

const tsNs = (secsSinceEpoch: number): string => (BigInt(secsSinceEpoch) * 1_000_000_000n).toString();

function parseTime(t: string | number | undefined, op: string): bigint | undefined {
  if (t === undefined) return undefined;
  if (typeof t === 'number') {
    if (!Number.isFinite(t)) throw new VfsError('EINVAL', op, undefined, 'invalid time');
    return BigInt(Math.round(t * 1_000_000));
  }
  if (!/^-?\d{1,22}$/.test(t)) throw new VfsError('EINVAL', op, undefined, 'invalid time');
  return BigInt(t);
}

function mode(m: number | string | undefined, op: string): number | undefined {
  if (m === undefined) return undefined;
  const v = parseMode(m);
  if (v === null) throw new VfsError('EINVAL', op, undefined, `invalid mode '${String(m)}' (octal, e.g. 0644)`);
  return v;
}

export class Service {
  readonly startedAt = Date.now();

  /** The attributed, permission-filtered change feed (`events.subscribe`). */
  readonly events: EventFeed;

  /** MCP over HTTP sessions, shared by every HTTP worker. */
  readonly mcpSessions = new McpSessions();

  constructor(private readonly d: ServiceDeps) {
    this.events = new EventFeed(d.vfs, (creds) => this.authenticate(creds));
  }

  /** The policy for a request: the one its server declared (the HTTP sidecar's settings), else ours. */
  private policyFor(creds: Creds): AuthPolicy {
    return creds.policy ?? this.d.policy;
  }

  authenticate(creds: Creds): Cred {
    return this.d.registry.authenticate(creds, this.policyFor(creds));
  }

  /** Authenticates a request; for workspace callers, errors will show workspace paths only. */
  private auth(ctx: Ctx): Cred {
    const cred = this.authenticate(ctx.creds);
    const slot = requestScope.getStore();
    if (slot !== undefined) slot.cred = cred;
    const jail = cred.workspace?.root;
    if (jail !== undefined) ctx.mapError = (w) => scrubPaths(w, jail);
    return cred;
  }

  private home(cred: Cred): string {
    return actor(cred).home;
  }

  /** The absolute path a caller means (contract §2), confined to its workspace. */
  private abs(cred: Cred, path: string | undefined, op: string): string {
    return resolveFor(path ?? '', this.home(cred), op, cred.workspace?.root);
  }

  /**
   * A path naming an entry to create, remove or rename. Its last component as written may not be
   * `.` or `..`: lexical normalisation would otherwise turn `a/..` into `a`'s parent (so a delete
   * of `notes/..` would remove the home) and `new/.` into a file named `new`.
   */
  private entryAbs(cred: Cred, path: string, op: string): string {
    const last = path.replace(/\/+$/, '').split('/').pop();
    if (last === '.' || last === '..')
      throw new VfsError('EINVAL', op, path.slice(0, 256), `'${last}' cannot name an entry`);
    return this.abs(cred, path, op);
  }

  /**
   * cp/mv: a destination that is an existing directory (symlinks followed) means `<dst>/<basename
   * of src>`. The core then applies its usual rules to that path (into itself: EINVAL; a non-empty
   * directory there: ENOTEMPTY; a file onto a directory: EISDIR). A destination that cannot be
   * resolved stays as it is: the operation itself reports why.
   */
  private intoDir(cred: Cred, src: string, dst: string, wanted: boolean, op: string): string {
    if (!wanted) return dst;
    const name = splitParent(src).name;
    if (name === '') return dst;
    let node: Node | undefined;
    try {
      node = this.d.vfs.lookup(cred, dst, op, true);
    } catch {
      return dst; // not ours to report: the operation itself says why
    }
    return node?.kind === 'directory' ? (dst === '/' ? `/${name}` : `${dst}/${name}`) : dst;
  }

  /** Write grants live as long as the connection that holds them (see core/grants.ts). */
  private grantHolder(ctx: Ctx, cred: Cred, op: string): GrantHolder {
    const conn = ctx.conn;
    if (conn === undefined)
      throw new VfsError('EINVAL', op, undefined, 'write grants exist only on a socket connection');
    conn.onClose('grants', () => this.d.vfs.grants.dropConnection(conn.id));
    return { cred, conn: conn.id };
  }

  private show(cred: Cred, abs: string): string {
    return displayPath(abs, cred.workspace?.root);
  }

  private scope(cred: Cred): Scope {
    return cred.workspace === undefined ? { id: '', root: '/' } : { id: cred.workspace.id, root: cred.workspace.root };
  }

  private durable(): Promise<void> {
    return this.d.store.durable();
  }

  private userRecord(u: UserRow): UserRecord {
    const p = this.d.registry.principal(u);
    return {
      name: u.name,
      uid: u.uid,
      gid: u.gid,
      groups: [...p.groups],
      home: p.home,
      is_agent: u.isAgent,
      is_admin: isWheel(p),
      has_token: u.tokenHash !== null,
    };
  }

  private whoami(cred: Cred): WhoAmI {
    const u = cred.user;
    const w: WhoAmI = {
      user: u.name,
      uid: u.uid,
      gid: u.gid,
      groups: [...u.groups],
      home: this.home(cred),
      is_agent: u.isAgent,
      is_admin: isWheel(u),
    };
    if (cred.delegate !== undefined) w.on_behalf_of = cred.delegate.name;
    // Security: a workspace caller sees its workspace as `/`, never where it really lives.
    if (cred.workspace !== undefined)
      w.workspace = { id: cred.workspace.id, name: cred.workspace.name, root_path: '/' };
    return w;
  }

  private wsRecord(w: WorkspaceRow, cred: Cred): WorkspaceRecord {
    const owner = this.d.registry.users.get(w.ownerUid);
    return {
      id: w.id,
      name: w.name,
      root_path: cred.workspace === undefined ? w.root : '/',
      owner: owner?.name ?? String(w.ownerUid),
      created: w.created,
    };
  }

  /** The workspace `id` for managing its secrets: owner, root or wheel, never a workspace caller. */
  private ownedWorkspace(cred: Cred, id: string, op: string): WorkspaceRow {
    this.noWorkspace(cred, op);
    const w = this.d.registry.workspaces.get(id);
    if (w === undefined) throw new VfsError('ENOENT', op, undefined, `no such workspace: ${id.slice(0, 64)}`);
    requireWorkspaceOwner(cred, w.ownerUid, op);
    return w;
  }

  /** The daemon process, for process control (`access: 'local'`: the runner refused remote requests). */
  private process(op: string): DaemonProcess {
    if (this.d.process === undefined)
      throw new VfsError('ENOSYS', op, undefined, 'this core runs without a daemon process');
    return this.d.process;
  }

  private groupRecord(g: GroupRow): GroupRecord {
    return { name: g.name, gid: g.gid, members: this.d.registry.groupMembers(g) };
  }

  private noWorkspace(cred: Cred, op: string): void {
    if (cred.workspace !== undefined) throw new VfsError('EACCES', op, undefined, 'not available to workspace tokens');
  }

  /**
   * The handlers, one per method. Each runs after the runner (see `run`) has checked who may call it,
   * resolved its path params for the caller, and before it shows the result's paths and, for a
   * mutation, waits until the change is durable: what is left here is each operation's own work.
   */
  private readonly ops: Ops = {
    // ---------- service ----------
    'sys.health': () => {
      // O(1): counting files and directories would walk every inode (half a second at 1,000,000).
      return {
        status: 'ok',
        version: VERSION,
        uptime: Math.floor((Date.now() - this.startedAt) / 1000),
        inodes: this.d.vfs.nodes.size,
        commits: this.d.vcs.countCommits(),
        objects: this.d.vfs.blobs.size + this.d.vcs.countTrees() + this.d.vcs.countCommits(),
        needs_bootstrap: this.d.registry.needsBootstrap(),
      };
    },
    'sys.ping': () => ({ pong: true, pid: process.pid }),
    'sys.status': () => {
      const p = this.process('status');
      return {
        ...p.status(),
        version: VERSION,
        users: this.d.registry.users.size,
        files: this.d.vfs.counts().files,
        commits: this.d.vcs.countCommits(),
      };
    },
    'sys.hold': (p) => ({ held_by: this.process('hold').hold(p.pid) }),
    'sys.subscribe': (_p, { ctx }) => {
      ctx.subscribe?.();
      return { subscribed: true };
    },
    'events.subscribe': (p, { ctx, cred }) => {
      const { push, conn } = ctx;
      if (push === undefined || conn === undefined)
        throw new VfsError('ENOTSUP', 'events.subscribe', undefined, 'events need a socket connection');
      const key = `${conn.id}:${p.sub}`;
      const r = this.events.subscribe(
        key,
        ctx.creds,
        cred,
        p.since,
        (event) => push({ event: 'feed', data: { sub: p.sub, event } }),
        (end) => push({ event: 'feed', data: { sub: p.sub, end } }),
      );
      conn.onClose(`events:${p.sub}`, () => this.events.unsubscribe(key));
      return r;
    },
    'events.unsubscribe': (p, { ctx }) => {
      if (ctx.conn === undefined) return { unsubscribed: false };
      return { unsubscribed: this.events.unsubscribe(`${ctx.conn.id}:${p.sub}`) };
    },
    'mcp.session.open': (p, { ctx, cred }) => ({
      id: this.mcpSessions.open(ctx.creds, cred, p.address, p.limits),
    }),
    'mcp.session.get': (p, { ctx }) => {
      const s = this.mcpSessions.get(ctx.creds, p.id);
      return { id: s.id, subscriptions: this.mcpSessions.subscriptions(s) };
    },
    'mcp.session.stream': (p, { ctx }) => {
      const s = this.mcpSessions.get(ctx.creds, p.id);
      const conn = ctx.conn;
      if (conn === undefined)
        throw new VfsError('ENOTSUP', 'mcp session', undefined, 'event streams need a socket connection');
      conn.onClose('mcp-streams', () => this.mcpSessions.dropConnection(conn.id));
      return { streams: this.mcpSessions.stream(s, conn.id, p.open ? 1 : -1) };
    },
    'mcp.session.subscribe': (p, { ctx }) => ({
      subscriptions: this.mcpSessions.subscribe(this.mcpSessions.get(ctx.creds, p.id), p.subscription),
    }),
    'mcp.session.unsubscribe': (p, { ctx }) => ({
      subscriptions: this.mcpSessions.unsubscribe(this.mcpSessions.get(ctx.creds, p.id), p.uri),
    }),
    'mcp.session.close': (p, { ctx }) => {
      this.mcpSessions.get(ctx.creds, p.id);
      return { closed: this.mcpSessions.close(p.id) };
    },
    'mcp.session.match': (p) => this.mcpSessions.match(p.ids, p.paths),
    'sys.gc': () => {
      this.d.vcs.pruneTrees();
      this.d.vcs.dropOrphanTrees();
      const reachable = this.d.vcs.reachableBlobs();
      for (const id of [...this.d.vfs.blobs.inHistory]) if (!reachable.has(id)) this.d.vfs.blobs.inHistory.delete(id);
      const removed = this.d.vfs.blobs.sweep();
      return { removed, kept: this.d.vfs.blobs.size };
    },
    'sys.fsck': async () => {
      await this.durable();
      const { Vcs } = await import('./vcs/vcs.js');
      const r = await this.d.store.fsck(Vcs.refsOf);
      return { ok: r.problems.length === 0, problems: r.problems, objects: r.objects, inodes: r.inodes };
    },

    // ---------- identity ----------
    'auth.whoami': (_p, { cred }) => this.whoami(cred),
    'auth.scope': (_p, { cred }) => ({ root_path: cred.workspace?.root ?? '/' }),
    'auth.login': (p, { ctx }) => {
      if (ctx.creds.origin === 'remote' && !this.policyFor(ctx.creds).userAuth)
        throw new VfsError('EAUTH', 'login', undefined, 'login by name is disabled on this server');
      const u = this.d.registry.user(p.username);
      if (u === undefined) throw new VfsError('EAUTH', 'login', undefined, `unknown user '${p.username.slice(0, 64)}'`);
      return { username: u.name, ...this.whoami({ user: this.d.registry.principal(u) }) };
    },
    'auth.bootstrap': (p) => {
      // Only while the store never had a user besides root; no credentials needed (that is its purpose).
      if (!this.d.registry.needsBootstrap())
        throw new VfsError(
          'EEXIST',
          'bootstrap',
          undefined,
          'already bootstrapped: this store has (or had) users besides root',
        );
      const u = this.d.registry.addUser(p.username, false);
      this.d.registry.addMember(u.name, 'wheel');
      this.d.vfs.ensureHome(this.d.registry.principal(u));
      const token = this.d.registry.issueToken(u.name);
      return { username: u.name, uid: u.uid, token };
    },

    // ---------- admin ----------
    'admin.userAdd': (p) => {
      const u = this.d.registry.addUser(p.name, p.is_agent ?? false);
      this.d.vfs.ensureHome(this.d.registry.principal(u));
      // An agent is only useful with a token: its raw token is answered here, once (never stored raw).
      const token = u.isAgent ? this.d.registry.issueToken(u.name) : undefined;
      return token === undefined ? this.userRecord(u) : { ...this.userRecord(u), token };
    },
    'admin.userList': () => ({
      users: [...this.d.registry.users.values()].sort((a, b) => a.uid - b.uid).map((u) => this.userRecord(u)),
    }),
    'admin.userDel': (p) => {
      this.d.registry.delUser(p.name);
      return { deleted: p.name };
    },
    'admin.token': (p, { cred }) => {
      requireTokenIssue(cred, this.d.registry.user(p.name)?.uid ?? -1, 'token');
      this.noWorkspace(cred, 'token');
      return { name: p.name, token: this.d.registry.issueToken(p.name) };
    },
    'admin.groupAdd': (p) => this.groupRecord(this.d.registry.addGroup(p.name)),
    'admin.groupList': () => ({
      groups: [...this.d.registry.groups.values()].sort((a, b) => a.gid - b.gid).map((g) => this.groupRecord(g)),
    }),
    // Security: making someone an administrator is for administrators who are root or wheel themselves (access: 'admin').
    'admin.groupMemberAdd': (p) => this.groupRecord(this.d.registry.addMember(p.user, p.group)),
    'admin.groupMemberDel': (p) => this.groupRecord(this.d.registry.delMember(p.user, p.group)),

    // ---------- workspaces ----------
    'ws.create': (p, { cred }) => {
      if (!p.root_path.startsWith('/'))
        throw new VfsError('EINVAL', 'workspace', p.root_path, 'root_path must be an absolute path');
      const root = resolveFor(p.root_path, '/', 'workspace');
      let node: Node;
      if (isAdminCred(cred)) node = this.d.vfs.mkdir(cred, root, { parents: true }).node;
      else {
        node = this.d.vfs.resolve(cred, root, 'workspace', true);
        requireWorkspaceOwner(cred, node.uid, 'workspace', root);
      }
      if (node.kind !== 'directory') throw new VfsError('ENOTDIR', 'workspace', root);
      const w = this.d.registry.addWorkspace(p.name, pathOf(node), actor(cred).uid);
      return this.wsRecord(w, cred);
    },
    'ws.list': (_p, { cred }) => {
      const all = [...this.d.registry.workspaces.values()].sort(
        (a, b) => a.created - b.created || a.name.localeCompare(b.name),
      );
      const mine =
        cred.workspace !== undefined
          ? all.filter((w) => w.id === cred.workspace!.id)
          : isAdminCred(cred)
            ? all
            : all.filter((w) => w.ownerUid === actor(cred).uid);
      return { workspaces: mine.map((w) => this.wsRecord(w, cred)) };
    },
    'ws.token': (p, { cred }) => {
      const w = this.ownedWorkspace(cred, p.id, 'workspace token');
      const { secret, row } = this.d.registry.issueWorkspaceToken(w.id, p.name, p.agent_token);
      return { workspace_id: w.id, name: p.name, secret, token_id: row.id };
    },
    'ws.tokenList': (p, { cred }) => {
      const w = this.ownedWorkspace(cred, p.id, 'workspace tokens');
      const tokens = this.d.registry.workspaceTokens(w.id).map((t) => ({
        id: t.id,
        name: t.name,
        agent: this.d.registry.users.get(t.agentUid)?.name ?? String(t.agentUid),
        created: t.created,
      }));
      return { workspace_id: w.id, tokens };
    },
    'ws.tokenRevoke': (p, { cred }) => {
      const w = this.ownedWorkspace(cred, p.id, 'revoke workspace token');
      const t = this.d.registry.revokeWorkspaceToken(w.id, p.token_id);
      return { workspace_id: w.id, revoked: t.id };
    },

    // ---------- filesystem (paths arrive resolved; results' paths are shown by the runner) ----------
    'fs.resolve': (p) => ({ path: p.path }),
    'fs.stat': (p, { cred }) => ({ ...toStat(this.d.vfs.stat(cred, p.path, p.nofollow === true)), path: p.path }),
    'fs.list': async (p, { cred }) => {
      const after = p.cursor === undefined ? undefined : decodeCursor(p.cursor);
      const limit = p.limit ?? LIST_PAGE_MAX;
      const { entries, more } = await this.d.vfs.listPage(cred, p.path, after, limit);
      // The names as the page was cut; the entries are then built in slices (a page of 10,000 costs
      // tens of ms on a loaded machine), each node as it is when its entry is built (readdir(3) allows
      // it). One that left the directory meanwhile is left out: it may now be somewhere the caller cannot look.
      const names = entries.map((n) => n.name);
      const dir = entries[0]?.parent;
      const built: DirEntry[] = [];
      const pause = slicer();
      for (let i = 0; i < entries.length; i++) {
        if (entries[i]!.parent === dir) built.push(toEntry(entries[i]!, names[i]!));
        if ((i & 511) === 511) {
          const w = pause();
          if (w !== undefined) await w;
        }
      }
      const out: Listing = { path: p.path, entries: built };
      const last = names[names.length - 1];
      if (more && last !== undefined) {
        out.truncated = true;
        out.next_cursor = encodeCursor(last);
      }
      return out;
    },
    'fs.read': (p, { ctx, cred }) => {
      const { node, data } = this.d.vfs.read(cred, p.path);
      const base = { path: p.path, etag: node.blob, size: node.size };
      if (p.if_none_match !== undefined && (p.if_none_match === node.blob || p.if_none_match === '*'))
        return { ...base, not_modified: true };
      if (p.if_match !== undefined && p.if_match !== node.blob)
        throw new VfsError('EPRECOND', 'read', p.path, 'the file changed while it was being read in parts');
      // Bounded parts: no answer carries more than READ_CHUNK bytes, whatever SERVICE_MAX_FILE_SIZE allows.
      const off = Math.min(p.offset ?? 0, data.length);
      const len = Math.min(p.length ?? READ_CHUNK, READ_CHUNK);
      ctx.out = off === 0 && data.length <= len ? data : data.subarray(off, off + len);
      return base;
    },
    'fs.write': (p, { ctx, cred }) => {
      const opts: Parameters<Vfs['write']>[3] = { parents: p.parents !== false };
      const m = mode(p.mode, 'write');
      if (m !== undefined) opts.mode = m;
      if (p.if_match !== undefined) opts.ifMatch = p.if_match;
      if (p.if_none_match !== undefined) opts.ifNoneMatch = p.if_none_match;
      if (p.exclusive !== undefined) opts.exclusive = p.exclusive;
      if (p.append !== undefined) opts.append = p.append;
      if (p.grant !== undefined || p.want_grant === true) {
        opts.holder = this.grantHolder(ctx, cred, 'write');
        if (p.grant !== undefined) opts.grant = p.grant;
        if (p.want_grant === true) opts.wantGrant = true;
      }
      const r = this.d.vfs.write(cred, p.path, ctx.data ?? Buffer.alloc(0), opts);
      // The stat is taken now: later requests may change the node while this one waits for durability.
      return {
        path: r.path,
        size: r.node.size,
        etag: r.node.blob,
        created: r.created,
        ...(p.stat === true ? { stat: toStat(r.node) } : {}),
        ...(r.grant !== undefined ? { grant: r.grant } : {}),
      };
    },
    'fs.truncate': (p, { ctx, cred }) => {
      const n = this.d.vfs.truncate(
        cred,
        p.path,
        p.size,
        p.grant === undefined ? undefined : { id: p.grant, holder: this.grantHolder(ctx, cred, 'truncate') },
      );
      return { path: p.path, size: n.size };
    },
    'fs.grantWrite': (p, { ctx, cred }) => ({
      path: p.path,
      grant: this.d.vfs.openForWrite(cred, p.path, p.mode, this.grantHolder(ctx, cred, 'open')).grant,
    }),
    'fs.releaseGrant': (p, { ctx }) => {
      const conn = ctx.conn;
      return {
        released: conn === undefined ? 0 : p.grants.filter((g) => this.d.vfs.grants.release(g, conn.id)).length,
      };
    },
    'fs.mkdir': (p, { cred }) => {
      const opts: { parents?: boolean; mode?: number } = { parents: p.parents === true };
      const m = mode(p.mode, 'mkdir');
      if (m !== undefined) opts.mode = m;
      return { path: p.path, created: this.d.vfs.mkdir(cred, p.path, opts).created };
    },
    'fs.unlink': (p, { cred }) => {
      this.d.vfs.unlink(cred, p.path);
      return { path: p.path };
    },
    'fs.rmdir': (p, { cred }) => {
      this.d.vfs.rmdir(cred, p.path);
      return { path: p.path };
    },
    'fs.delete': async (p, { cred }) => ({
      path: p.path,
      deleted: await this.d.vfs.removeSliced(cred, p.path, p.recursive === true),
    }),
    'fs.copy': (p, { cred }) => {
      const dst = this.intoDir(cred, p.src, p.dst, p.into_dir === true, 'copy');
      const opts: { recursive?: boolean; overwrite?: boolean } = { recursive: p.recursive === true };
      if (p.overwrite !== undefined) opts.overwrite = p.overwrite;
      const n = this.d.vfs.copy(cred, p.src, dst, opts);
      return { src: p.src, dst, copied: n };
    },
    'fs.move': (p, { cred }) => {
      const r = this.d.vfs.move(
        cred,
        p.src,
        this.intoDir(cred, p.src, p.dst, p.into_dir === true, 'rename'),
        p.overwrite === undefined ? {} : { overwrite: p.overwrite },
      );
      return { src: r.from, dst: r.to };
    },
    'fs.symlink': (p, { cred }) => {
      this.d.vfs.symlink(cred, p.target, p.path);
      return { path: p.path, target: p.target };
    },
    'fs.readlink': (p, { cred }) => ({ path: p.path, target: this.d.vfs.readlink(cred, p.path) }),
    'fs.chmod': (p, { cred }) => ({
      path: p.path,
      mode: formatMode(this.d.vfs.chmod(cred, p.path, mode(p.mode, 'chmod')!).mode),
    }),
    'fs.chown': (p, { cred }) => {
      const uid = p.owner === undefined || p.owner === '' ? undefined : this.d.registry.uidOf(p.owner);
      const gid = p.group === undefined || p.group === '' ? undefined : this.d.registry.gidOf(p.group);
      const n = this.d.vfs.chown(cred, p.path, uid, gid, p.nofollow === true);
      return { path: p.path, uid: n.uid, gid: n.gid };
    },
    'fs.utimens': (p, { cred }) => {
      this.d.vfs.utimens(cred, p.path, parseTime(p.atime, 'utime'), parseTime(p.mtime, 'utime'), p.nofollow === true);
      return { path: p.path };
    },
    'fs.access': (p, { cred }) => {
      this.d.vfs.access(cred, p.path, p.mode);
      return { path: p.path };
    },
    'fs.statfs': () => {
      const bsize = 4096;
      const blocks = 1 << 30;
      const used = Math.ceil(this.d.vfs.blobs.totalBytes() / bsize);
      const files = 1 << 30;
      return {
        bsize,
        blocks,
        bfree: blocks - used,
        bavail: blocks - used,
        files,
        ffree: files - this.d.vfs.nodes.size,
        namemax: 255,
      };
    },

    // ---------- search ----------
    'search.grep': async (p, { cred }) => {
      const flags = compilePattern(p.pattern, p.ignore_case === true);
      const files = await grepFiles(this.d.vfs, cred, p.path, p.recursive === true, (x) => this.show(cred, x));
      const offset = p.offset ?? 0;
      const r = await this.d.grep.run(
        { pattern: p.pattern, flags, max: p.max_results ?? 10000, offset, files },
        callerKey(cred),
      );
      return {
        results: r.results,
        count: r.results.length,
        truncated: r.truncated,
        ...(r.skipped_binary > 0 ? { skipped_binary: r.skipped_binary } : {}),
        ...(r.more ? { next_offset: offset + r.results.length } : {}),
      };
    },
    'search.find': async (p, { cred }) => {
      const all = await find(this.d.vfs, this.d.grep, cred, p.path, p.name, p.type, (x) => this.show(cred, x));
      const { results, truncated } = capPaths(all);
      return truncated ? { results, count: results.length, truncated } : { results, count: results.length };
    },
    'search.tree': (p, { cred }) => tree(this.d.vfs, cred, p.path, this.show(cred, p.path), p.depth),

    // ---------- version control ----------
    'vcs.commit': async (p, { cred }) => {
      // Hash and write the new trees off the atomic step; a change meanwhile stops the writing, so try again (twice).
      for (let attempt = 0; attempt < 3; attempt++) {
        await this.d.vcs.prehash(this.scope(cred));
        if (await this.d.vcs.prepersist(this.scope(cred))) break;
      }
      const scope = this.scope(cred);
      return this.d.vcs.commit(
        cred,
        scope,
        p.message,
        p.paths === undefined ? {} : { paths: p.paths.map((x) => this.scopeRel(cred, scope, x)) },
      );
    },
    'vcs.show': (p, { cred }) => this.d.vcs.show(cred, this.scope(cred), p.rev),
    'vcs.log': (p, { cred }) => {
      const scope = this.scope(cred);
      const opts: { path?: string; limit?: number; cursor?: string } = {};
      if (p.path !== undefined && p.path !== '') opts.path = this.scopeRel(cred, scope, p.path);
      if (p.limit !== undefined) opts.limit = p.limit;
      if (p.cursor !== undefined && p.cursor !== '') opts.cursor = p.cursor;
      // The newest commits that fit one answer; `truncated` says older ones were left out (go on with `next_cursor`).
      const page = this.d.vcs.log(scope, opts, cred);
      const { results, truncated } = capItems(
        page.commits,
        (c) => Buffer.byteLength(JSON.stringify(c)) + 1,
        LOG_ANSWER_BYTES,
      );
      const next = truncated && results.length > 0 ? results[results.length - 1]!.hash : page.next_cursor;
      return {
        commits: results,
        ...(truncated ? { truncated } : {}),
        ...(next === undefined ? {} : { next_cursor: next }),
      };
    },
    'vcs.status': async (_p, { cred }) => {
      await this.d.vcs.prehash(this.scope(cred));
      return this.d.vcs.status(cred, this.scope(cred));
    },
    'vcs.diff': async (p, { cred }) => {
      const scope = this.scope(cred);
      const opts: { from?: string; to?: string; path?: string } = {};
      if (p.from !== undefined && p.from !== '') opts.from = p.from;
      if (p.to !== undefined && p.to !== '') opts.to = p.to;
      if (p.path !== undefined && p.path !== '') opts.path = this.scopeRel(cred, scope, p.path);
      if (opts.to === undefined) await this.d.vcs.prehash(scope);
      const r = await this.d.vcs.diff(cred, scope, opts);
      return r.truncated ? { diff: r.diff, truncated: true } : { diff: r.diff };
    },
    'vcs.revert': async (p, { cred }) => {
      const scope = this.scope(cred);
      await this.d.vcs.prehash(scope);
      return this.d.vcs.revert(
        cred,
        scope,
        p.hash,
        p.paths?.map((x) => this.scopeRel(cred, scope, x)),
      );
    },
    'vcs.undo': async (p, { cred }) => {
      const scope = this.scope(cred);
      await this.d.vcs.prehash(scope);
      return this.d.vcs.undo(cred, scope, p.actor, p.since === '' ? undefined : p.since);
    },
    'vcs.ls': (p, { cred }) => {
      const scope = this.scope(cred);
      const r = this.d.vcs.snapshotList(cred, scope, p.rev, this.scopeRel(cred, scope, p.path ?? '/'));
      return {
        path: r.rel,
        entries: r.entries.map((e) => ({
          name: e.name,
          is_dir: e.kind === 'd',
          is_symlink: e.kind === 'l',
          mode: formatMode(e.mode),
          uid: e.uid,
          gid: e.gid,
          size: e.size,
          modified: r.timestamp,
          inode_id: snapshotIno(e.ref, e.name),
          mtime_ns: tsNs(r.timestamp),
          atime_ns: tsNs(r.timestamp),
          ctime_ns: tsNs(r.timestamp),
        })),
      };
    },
    'vcs.stat': (p, { cred }) => {
      const scope = this.scope(cred);
      const r = this.d.vcs.snapshotStat(cred, scope, p.rev, this.scopeRel(cred, scope, p.path ?? '/'));
      return { ...entryStat(r.entry, r.timestamp, snapshotIno(r.entry.ref, r.entry.name)), path: r.rel };
    },
    'vcs.cat': (p, { ctx, cred }) => {
      const scope = this.scope(cred);
      const r = this.d.vcs.snapshotRead(cred, scope, p.rev, this.scopeRel(cred, scope, p.path));
      ctx.out = r.data;
      return { path: r.rel, size: r.data.length, etag: r.entry.ref };
    },
  };

  /** What `invoke` calls: every method through the runner. */
  readonly handlers: Handlers = Object.fromEntries(
    (Object.keys(methods) as Method[]).map((m) => [m, (ctx: Ctx, p: ParsedParams<Method>) => this.run(m, ctx, p)]),
  ) as unknown as Handlers;

  /**
   * The runner: the steps every operation shares, as its traits in the methods table declare them
   * (access, workspace refusal, path params, shown result paths, durability), around its handler.
   */
  private run(method: Method, ctx: Ctx, params: ParsedParams<Method>): unknown {
    const spec = methods[method] as OpTraits;
    const op = spec.op ?? method;
    let cred: Cred | undefined;
    if (spec.access === 'local') {
      if (ctx.creds.origin === 'remote') throw new VfsError('EACCES', op, undefined, 'not available over the network');
    } else if (spec.access !== 'public') {
      cred = this.auth(ctx);
      if (spec.access === 'admin') requireAdmin(cred, op);
      if (spec.noWorkspace === true) this.noWorkspace(cred, op);
    }
    let p = params as Record<string, unknown>;
    if (spec.paths !== undefined && cred !== undefined) {
      p = { ...p };
      for (const [k, kind] of Object.entries(spec.paths)) {
        const written = p[k] as string | undefined;
        p[k] = kind === 'entry' ? this.entryAbs(cred, written ?? '', op) : this.abs(cred, written, op);
      }
    }
    const handler = this.ops[method] as (p: unknown, r: { ctx: Ctx; cred: Cred | undefined }) => unknown;
    const out = handler(p, { ctx, cred });
    return out instanceof Promise ? out.then((r) => this.finish(spec, cred, r)) : this.finish(spec, cred, out);
  }

  private finish(spec: OpTraits, cred: Cred | undefined, out: unknown): unknown {
    if (spec.shows !== undefined && cred !== undefined) {
      const rec = out as Record<string, string>;
      for (const k of spec.shows) rec[k] = this.show(cred, rec[k]!);
    }
    if (spec.mutates === undefined) return out;
    if (spec.mutates === 'users') this.d.vfs.notifyAll();
    return this.durable().then(() => out);
  }

  /** A user-written path as a path relative to the VCS scope's root ('/x/y'). */
  private scopeRel(cred: Cred, scope: Scope, path: string): string {
    const abs = this.abs(cred, path, 'vcs');
    if (scope.root === '/') return abs;
    if (abs === scope.root) return '/';
    return abs.startsWith(scope.root + '/') ? abs.slice(scope.root.length) : normalize(abs);
  }
}
