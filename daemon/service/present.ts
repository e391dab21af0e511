/**
 * How the daemon presents what the core holds: stats and listing entries of nodes and of snapshot
 * entries, listing cursors, records of users, groups and workspaces, and errors as a workspace
 * caller may see them.
 */
import { VfsError, type WireError } from '../errors.js';
import { actor, isWheel, mayCount, type Cred } from '../core/perms.js';
import { displayPath, isWithin } from '../core/paths.js';
import type { Node } from '../core/inode.js';
import type { TreeEntry } from '../core/objects.js';
import type { DelegationRow, GroupRow, Registry, UserRow, WorkspaceRow } from '../auth/registry.js';
import {
  formatMode,
  type DelegationRecord,
  type DirEntry,
  type GroupRecord,
  type Stat,
  type UserRecord,
  type WhoAmI,
  type WorkspaceRecord,
} from '../rpc/protocol.js';

const secs = (ns: bigint): number => Number(ns / 1_000_000_000n);

/** A node's size as `cred` may see it (a directory's entry count only for those who may list it). */
function sizeFor(cred: Cred, n: Node): number {
  if (n.kind === 'file') return n.size;
  if (n.kind === 'symlink') return Buffer.byteLength(n.target);
  return mayCount(cred, n) ? n.children.size : 0;
}

/** A node's stat as `cred` may see it (core/perms.ts `mayCount`). */
export function toStat(n: Node, cred: Cred): Stat {
  const s: Stat = {
    inode_id: n.id,
    kind: n.kind,
    size: sizeFor(cred, n),
    mode: formatMode(n.mode),
    uid: n.uid,
    gid: n.gid,
    // A directory: `.`, its entry in the parent, and each subdirectory's `..` (kept as a count: O(1)).
    nlink: n.kind !== 'directory' ? 1 : mayCount(cred, n) ? 2 + n.subdirs : 1,
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

export function toEntry(n: Node, cred: Cred, name = n.name): DirEntry {
  return {
    name,
    is_dir: n.kind === 'directory',
    is_symlink: n.kind === 'symlink',
    mode: formatMode(n.mode),
    uid: n.uid,
    gid: n.gid,
    size: sizeFor(cred, n),
    modified: secs(n.mtime),
    inode_id: n.id,
    mtime_ns: n.mtime.toString(),
    atime_ns: n.atime.toString(),
    ctime_ns: n.ctime.toString(),
  };
}

export function entryStat(e: TreeEntry, ts: number, id: number): Stat {
  const ns = tsNs(ts);
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
    mtime_ns: ns,
    atime_ns: ns,
    ctime_ns: ns,
  };
  if (e.kind === 'f') s.etag = e.ref;
  if (e.kind === 'l') s.target = e.ref;
  return s;
}

/** A stable pseudo inode number for snapshot entries. */
export function snapshotIno(ref: string, name: string): number {
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

export function encodeCursor(name: string): string {
  return `c1.${Buffer.from(name, 'utf8').toString('base64url')}`;
}

export function decodeCursor(cursor: string): string {
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

export const tsNs = (secsSinceEpoch: number): string => (BigInt(secsSinceEpoch) * 1_000_000_000n).toString();

export function userRecord(registry: Registry, u: UserRow): UserRecord {
  const p = registry.principal(u);
  return {
    name: u.name,
    uid: u.uid,
    gid: u.gid,
    groups: [...p.groups],
    home: p.home,
    is_agent: u.isAgent,
    is_admin: isWheel(p),
    has_token: u.tokenHash !== null,
    ...(u.tokenHash !== null && u.tokenExpires !== null ? { token_expires: u.tokenExpires } : {}),
  };
}

export function delegationRecord(registry: Registry, g: DelegationRow): DelegationRecord {
  const name = (uid: number): string => registry.users.get(uid)?.name ?? String(uid);
  const out: DelegationRecord = { user: name(g.userUid), agent: name(g.agentUid), created: g.created };
  if (registry.sharesGroup(g)) out.shares_group = true;
  return out;
}

export function whoami(cred: Cred): WhoAmI {
  const u = cred.user;
  const w: WhoAmI = {
    user: u.name,
    uid: u.uid,
    gid: u.gid,
    groups: [...u.groups],
    home: actor(cred).home,
    is_agent: u.isAgent,
    is_admin: isWheel(u),
  };
  if (cred.delegate !== undefined) w.on_behalf_of = cred.delegate.name;
  // Security: a workspace caller sees its workspace as `/`, never where it really lives.
  if (cred.workspace !== undefined) w.workspace = { id: cred.workspace.id, name: cred.workspace.name, root_path: '/' };
  return w;
}

export function wsRecord(registry: Registry, w: WorkspaceRow, cred: Cred): WorkspaceRecord {
  const owner = registry.users.get(w.ownerUid);
  return {
    id: w.id,
    name: w.name,
    root_path: cred.workspace === undefined ? w.root : '/',
    owner: owner?.name ?? String(w.ownerUid),
    created: w.created,
  };
}

export function groupRecord(registry: Registry, g: GroupRow): GroupRecord {
  return { name: g.name, gid: g.gid, members: registry.groupMembers(g) };
}
