/**
 * The permission engine: the only place that decides who may do what (DESIGN.md §3).
 * Every check runs for the caller and, when delegating, for the delegate too (intersection).
 */
import { VfsError } from '../errors.js';
import { pathOf, S_ISVTX, type DirNode, type Node } from './inode.js';
import { displayPath, isWithin } from './paths.js';

export const R = 4;
export const W = 2;
export const X = 1;

export const ROOT_UID = 0;
export const WHEEL_GID = 1;

/** One authenticated identity. */
export interface Principal {
  readonly uid: number;
  readonly gid: number; // primary group
  readonly groups: ReadonlySet<number>; // every gid, primary included
  readonly name: string;
  readonly home: string;
  readonly isAgent: boolean;
}

export interface Workspace {
  readonly id: string;
  readonly name: string;
  readonly root: string;
}

/** The effective credential of one request. */
export interface Cred {
  readonly user: Principal;
  /** The user acted on behalf of: home and ownership follow it; every check must pass for both. */
  readonly delegate?: Principal;
  /** Workspace confinement: paths resolve and stay inside `root`. */
  readonly workspace?: Workspace;
}

export function isRoot(p: Principal): boolean {
  return p.uid === ROOT_UID;
}

export function isWheel(p: Principal): boolean {
  return p.uid === ROOT_UID || p.groups.has(WHEEL_GID);
}

/** Who new files belong to and whose home relative paths use. */
export function actor(cred: Cred): Principal {
  return cred.delegate ?? cred.user;
}

function principals(cred: Cred): Principal[] {
  return cred.delegate === undefined ? [cred.user] : [cred.user, cred.delegate];
}

/**
 * The mode of an entry created under delegation (DESIGN.md §3): group write wherever the group may
 * read, so that an agent the user shares a folder with (a member of the entry's group) can revise
 * what it wrote for the user. Root needs no such help; outside delegation the mode is as asked.
 */
export function createMode(cred: Cred, mode: number): number {
  const d = cred.delegate;
  if (d === undefined || d.uid === cred.user.uid || isRoot(cred.user)) return mode;
  return (mode & 0o040) !== 0 ? mode | 0o020 : mode;
}

/** Whether one principal has `bits` (R|W|X) on a node under POSIX rules plus wheel's read-all. */
export function principalMay(p: Principal, node: Node, bits: number): boolean {
  if (p.uid === ROOT_UID) return true;
  // wheel reads every file and lists/traverses every directory (not write, not exec of files)
  if (p.groups.has(WHEEL_GID) && (bits & W) === 0 && ((bits & X) === 0 || node.kind === 'directory')) return true;
  let granted: number;
  if (node.uid === p.uid) granted = (node.mode >> 6) & 7;
  else if (p.groups.has(node.gid)) granted = (node.mode >> 3) & 7;
  else granted = node.mode & 7;
  return (granted & bits) === bits;
}

/** Whether the credential (caller and delegate) has `bits` on `node`. */
export function may(cred: Cred, node: Node, bits: number): boolean {
  for (const p of principals(cred)) if (!principalMay(p, node, bits)) return false;
  return true;
}

/**
 * Security: whether a stat of `node` may show what is inside it. A directory's entry count (its
 * size) and its number of subdirectories (nlink) are part of its listing, so only those who may
 * list it (read) see them; others see size 0 and nlink 1 (the usual "not counted").
 */
export function mayCount(cred: Cred, node: Node): boolean {
  return node.kind !== 'directory' || may(cred, node, R);
}

/**
 * Throws EACCES unless the credential has `bits` on `node`. Under delegation the message names the
 * principal that lacked the right, the right, the entry it lacked it on (the directory, for a create
 * or rename in it) and the permission bits that applied
 * (`helper (acting for alice) lacks write on /home/alice/notes/todo.md: group bits r--`).
 */
export function requireAccess(cred: Cred, node: Node, bits: number, op: string, path: string): void {
  if (may(cred, node, bits)) return;
  const d = cred.delegate;
  if (d === undefined) throw new VfsError('EACCES', op, path);
  const who = principalMay(cred.user, node, bits)
    ? `${d.name} (on whose behalf ${cred.user.name} acts)`
    : `${cred.user.name} (acting for ${d.name})`;
  const p = principalMay(cred.user, node, bits) ? d : cred.user;
  const on = shownPath(cred, pathOf(node));
  throw new VfsError('EACCES', op, path, `${who} lacks ${rightsLacking(p, node, bits)} on ${on}: ${bitsOf(p, node)}`);
}

/** A path as the caller may see it: a workspace caller sees its workspace as `/` and nothing outside. */
function shownPath(cred: Cred, abs: string): string {
  const jail = cred.workspace?.root;
  if (jail === undefined) return abs;
  return isWithin(abs, jail) ? displayPath(abs, jail) : '(outside the workspace)';
}

/** The rights among `bits` that `p` lacks on `node`, in words (`write and search`). */
function rightsLacking(p: Principal, node: Node, bits: number): string {
  const names: string[] = [];
  for (const [bit, name] of [
    [R, 'read'],
    [W, 'write'],
    [X, node.kind === 'directory' ? 'search' : 'execute'],
  ] as const)
    if ((bits & bit) !== 0 && !principalMay(p, node, bit)) names.push(name);
  return names.length > 0 ? names.join(' and ') : 'access';
}

/** Which class of `node`'s mode applies to `p`, and its bits (`group bits r--`). */
function bitsOf(p: Principal, node: Node): string {
  const [cls, shift] = node.uid === p.uid ? ['owner', 6] : p.groups.has(node.gid) ? ['group', 3] : ['other', 0];
  const b = (node.mode >> shift) & 7;
  return `${cls} bits ${b & R ? 'r' : '-'}${b & W ? 'w' : '-'}${b & X ? 'x' : '-'}`;
}

/**
 * May the credential remove or rename `child` out of `dir`? Needs w+x on the directory, and in a
 * sticky directory ownership of the entry or the directory (root excepted).
 */
export function requireUnlink(cred: Cred, dir: DirNode, child: Node, op: string, path: string): void {
  requireAccess(cred, dir, W | X, op, path);
  if ((dir.mode & S_ISVTX) !== 0) {
    for (const p of principals(cred)) {
      if (p.uid !== ROOT_UID && p.uid !== child.uid && p.uid !== dir.uid)
        throw new VfsError(
          'EACCES',
          op,
          path,
          cred.delegate === undefined
            ? 'sticky directory: only the owner may remove or rename this entry'
            : `sticky directory: only the owner may remove or rename this entry, and ${p.name} does not own it`,
        );
    }
  }
}

/**
 * Linux `fs.protected_symlinks`: in a sticky world-writable directory (`/tmp`) a symlink is followed
 * only when the follower owns it or the directory's owner does, root included. The follower is the
 * acting user (the delegate when delegating, like Linux's fsuid): the links a delegated session
 * makes belong to the delegate. Security: else anyone may plant `/tmp/x -> ~victim/secret` and turn
 * the victim's write to `/tmp/x` into a write to their own secret.
 */
export function requireFollow(cred: Cred, dir: DirNode, link: Node, op: string, path: string): void {
  if ((dir.mode & (S_ISVTX | 0o002)) !== (S_ISVTX | 0o002)) return;
  if (link.uid === actor(cred).uid || link.uid === dir.uid) return;
  throw new VfsError(
    'EACCES',
    op,
    path,
    'a symbolic link in a sticky world-writable directory is followed only by its owner or when the directory owner owns it',
  );
}

/** chmod: the owner, root, or a wheel member (for both principals when delegating). */
export function requireChmod(cred: Cred, node: Node, op: string, path: string): void {
  for (const p of principals(cred)) {
    if (!isWheel(p) && p.uid !== node.uid) throw new VfsError('EPERM', op, path);
  }
}

/**
 * chown: changing the owner needs uid 0; changing the group needs ownership (or root) and
 * membership of the new group.
 */
export function requireChown(cred: Cred, node: Node, uid: number, gid: number, op: string, path: string): void {
  for (const p of principals(cred)) {
    if (isRoot(p)) continue;
    if (uid !== node.uid) throw new VfsError('EPERM', op, path, 'only root may change the owner of a file');
    if (gid !== node.gid) {
      if (p.uid !== node.uid) throw new VfsError('EPERM', op, path);
      if (!p.groups.has(gid))
        throw new VfsError('EPERM', op, path, 'you may only change the group to one you belong to');
    }
  }
}

/** Admin operations (users, groups, tokens): root or wheel, for both principals. */
export function requireAdmin(cred: Cred, op: string): void {
  for (const p of principals(cred))
    if (!isWheel(p)) throw new VfsError('EACCES', op, undefined, 'administrators only (root or wheel)');
}

/** Whether the credential bypasses per-file checks entirely (root, not delegating to a non-root). */
export function isSuper(cred: Cred): boolean {
  return principals(cred).every(isRoot);
}

/** Root or wheel for every principal: may revert anything, read anything. */
export function isAdminCred(cred: Cred): boolean {
  return principals(cred).every(isWheel);
}

/** Security: a token for root is all of root's power; only root itself may mint one (wheel may not). */
export function requireTokenIssue(cred: Cred, targetUid: number, op: string): void {
  requireAdmin(cred, op);
  if (targetUid === ROOT_UID && !isSuper(cred))
    throw new VfsError('EPERM', op, undefined, 'only root may issue a token for root');
}

/**
 * Delegation grants are a user's own consent: given or revoked by that user in person (not on
 * someone's behalf), or by root/wheel for them.
 */
export function requireGrantor(cred: Cred, userUid: number, op: string): void {
  if (cred.delegate !== undefined)
    throw new VfsError(
      'EPERM',
      op,
      undefined,
      'a delegation grant is given by the user in person, not on their behalf',
    );
  if (userUid !== cred.user.uid && !isWheel(cred.user))
    throw new VfsError('EACCES', op, undefined, "only root or wheel may manage another user's delegation grants");
}

/** Workspaces (and their tokens) belong to their owner; administrators may manage any of them. */
export function requireWorkspaceOwner(cred: Cred, ownerUid: number, op: string, path?: string): void {
  if (!isAdminCred(cred) && ownerUid !== actor(cred).uid)
    throw new VfsError('EACCES', op, path, 'only the owner or an administrator may do this');
}
