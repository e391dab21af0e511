/**
 * What every handler of the daemon shares: the request context, the handler types derived from the
 * methods table, and `Kit`, the steps handlers reuse (who the caller is, what a written path means
 * for it, how a path is shown to it, the VCS scope, durability).
 */
import { EventFeed, requestScope } from '../events.js';
import { VfsError, type WireError } from '../errors.js';
import { actor, requireWorkspaceOwner, type Cred } from '../core/perms.js';
import { displayPath, resolveFor, normalize, splitParent } from '../core/paths.js';
import type { Node } from '../core/inode.js';
import type { Vfs } from '../core/vfs.js';
import type { GrantHolder } from '../core/grants.js';
import type { GrepPool } from '../search/search.js';
import type { AuthPolicy, Registry, WorkspaceRow } from '../auth/registry.js';
import type { BootstrapSecret } from '../auth/bootstrap-secret.js';
import type { Vcs, Scope } from '../vcs/vcs.js';
import type { OpenedStore } from '../store/store.js';
import type { Creds, DaemonStatus, FeedHeader, Method, Methods, ParsedParams, Result } from '../rpc/protocol.js';
import { DEFAULT_PRINCIPAL_CAPS, type PrincipalCaps } from '../rpc/settings.js';
import { scrubPaths } from './present.js';

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
/** An operation's own work, run by the runner (service/runner.ts). */
type Op<M extends Method> = (p: Resolved<M>, r: { ctx: Ctx; cred: CredOf<M> }) => Result<M> | Promise<Result<M>>;
/** Every operation's handler. */
export type Ops = { [M in Method]: Op<M> };
/** The handlers of one area: the methods whose names start with one of `prefixes` and a dot. */
export type AreaOps<P extends string> = { [M in Extract<Method, `${P}.${string}`>]: Op<M> };

export interface ServiceDeps {
  vfs: Vfs;
  registry: Registry;
  vcs: Vcs;
  store: OpenedStore;
  grep: GrepPool;
  policy: AuthPolicy;
  /** The hosted bootstrap secret of the data dir. */
  bootstrap: BootstrapSecret;
  /** What one principal may hold (SERVICE_EVENTS_MAX_STREAMS*; default: the settings' defaults). */
  caps?: PrincipalCaps;
  /** The daemon process (`sys.status`, `sys.hold`); absent when the core runs without a socket. */
  process?: DaemonProcess;
}

/** The process-level facts and controls only daemon/main.ts knows. */
export interface DaemonProcess {
  status(): Omit<DaemonStatus, 'version' | 'users' | 'files' | 'commits'>;
  /** Makes `pid` the holder unless another live serve holds the daemon; returns the holder. */
  hold(pid: number): number;
}

/** The steps handlers share; one per service, handed to each area's handlers. */
export class Kit {
  readonly startedAt = Date.now();
  /** The attributed, permission-filtered change feed (`events.subscribe`). */
  readonly events: EventFeed;

  constructor(readonly d: ServiceDeps) {
    const caps = d.caps ?? DEFAULT_PRINCIPAL_CAPS;
    this.events = new EventFeed(d.vfs, (creds) => this.authenticate(creds), {
      total: caps.eventStreams,
      perUser: caps.eventStreamsPerUser,
    });
  }

  /** The policy for a request: the one its server declared (the HTTP sidecar's settings), else ours. */
  policyFor(creds: Creds): AuthPolicy {
    return creds.policy ?? this.d.policy;
  }

  /** Whether a request came through a hosted server (SERVICE_MODE=hosted): bootstrap needs the secret, health hides it. */
  hostedRemote(creds: Creds): boolean {
    return creds.origin === 'remote' && this.policyFor(creds).hosted === true;
  }

  authenticate(creds: Creds): Cred {
    return this.d.registry.authenticate(creds, this.policyFor(creds));
  }

  /** Authenticates a request; for workspace callers, errors will show workspace paths only. */
  auth(ctx: Ctx): Cred {
    const cred = this.authenticate(ctx.creds);
    const slot = requestScope.getStore();
    if (slot !== undefined) slot.cred = cred;
    const jail = cred.workspace?.root;
    if (jail !== undefined) ctx.mapError = (w) => scrubPaths(w, jail);
    return cred;
  }

  home(cred: Cred): string {
    return actor(cred).home;
  }

  /** The absolute path a caller means (contract §2), confined to its workspace. */
  abs(cred: Cred, path: string | undefined, op: string): string {
    return resolveFor(path ?? '', this.home(cred), op, cred.workspace?.root);
  }

  /**
   * A path naming an entry to create, remove or rename. Its last component as written may not be
   * `.` or `..`: lexical normalisation would otherwise turn `a/..` into `a`'s parent (so a delete
   * of `notes/..` would remove the home) and `new/.` into a file named `new`.
   */
  entryAbs(cred: Cred, path: string, op: string): string {
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
  intoDir(cred: Cred, src: string, dst: string, wanted: boolean, op: string): string {
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
  grantHolder(ctx: Ctx, cred: Cred, op: string): GrantHolder {
    const conn = ctx.conn;
    if (conn === undefined)
      throw new VfsError('EINVAL', op, undefined, 'write grants exist only on a socket connection');
    conn.onClose('grants', () => this.d.vfs.grants.dropConnection(conn.id));
    return { cred, conn: conn.id };
  }

  /** An absolute path as the caller names it (workspace callers see their workspace as `/`). */
  show(cred: Cred, abs: string): string {
    return displayPath(abs, cred.workspace?.root);
  }

  scope(cred: Cred): Scope {
    return cred.workspace === undefined ? { id: '', root: '/' } : { id: cred.workspace.id, root: cred.workspace.root };
  }

  /** A user-written path as a path relative to the VCS scope's root ('/x/y'). */
  scopeRel(cred: Cred, scope: Scope, path: string): string {
    const abs = this.abs(cred, path, 'vcs');
    if (scope.root === '/') return abs;
    if (abs === scope.root) return '/';
    return abs.startsWith(scope.root + '/') ? abs.slice(scope.root.length) : normalize(abs);
  }

  durable(): Promise<void> {
    return this.d.store.durable();
  }

  /** The workspace `id` for managing its secrets: owner, root or wheel, never a workspace caller. */
  ownedWorkspace(cred: Cred, id: string, op: string): WorkspaceRow {
    this.noWorkspace(cred, op);
    const w = this.d.registry.workspaces.get(id);
    if (w === undefined) throw new VfsError('ENOENT', op, undefined, `no such workspace: ${id.slice(0, 64)}`);
    requireWorkspaceOwner(cred, w.ownerUid, op);
    return w;
  }

  /** The daemon process, for process control (`access: 'local'`: the runner refused remote requests). */
  process(op: string): DaemonProcess {
    if (this.d.process === undefined)
      throw new VfsError('ENOSYS', op, undefined, 'this core runs without a daemon process');
    return this.d.process;
  }

  noWorkspace(cred: Cred, op: string): void {
    if (cred.workspace !== undefined) throw new VfsError('EACCES', op, undefined, 'not available to workspace tokens');
  }
}
