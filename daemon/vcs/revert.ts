/**
 * Revert: restores the scope to a commit, every change permission-checked before anything is
 * applied, and records that as a new commit. The working tree is changed through the core's
 * unchecked primitives, once the checks here have passed.
 */
import { VfsError } from '../errors.js';
import { depthOf, markDirty, type DirNode, type Node } from '../core/inode.js';
import { components, MAX_DEPTH } from '../core/paths.js';
import {
  actor,
  isAdminCred,
  W,
  X,
  requireUnlink,
  requireAccess,
  requireChmod,
  requireChown,
  type Cred,
} from '../core/perms.js';
import { shortId, type TreeEntry } from '../core/objects.js';
import type { CommitRecord } from '../rpc/protocol.js';
import { commit, find } from './history.js';
import { pathFilter, pendingFor, visibleIn, visibleNow } from './status.js';
import type { Layer } from './ignore.js';
import { findEntry, joinScope, type Change, type Scope, type Trees } from './trees.js';

/**
 * Restores the paths the caller may read (now, and as the commit recorded them), or those at or
 * below `paths`, to their state at a commit, and records that as a new commit. Every change is
 * permission-checked before anything is applied (all-or-nothing); the caller's own pending changes
 * among them are committed first (`saved`). root and wheel restore the whole scope.
 */
export function revert(
  v: Trees,
  cred: Cred,
  scope: Scope,
  prefix: string,
  paths?: readonly string[],
  as: { message?: string; op?: 'revert' | 'undo' } = {},
): { hash: string; reverted_to: string; saved: string | null; commit: CommitRecord } {
  const op = as.op ?? 'revert';
  const target = find(v, cred, scope, prefix, op);
  const targetTree = v.commits.get(target)!.tree;
  const dir = v.scopeDir(scope);
  // Security: a commit taken before the depth limit may hold a deeper tree; it is not rebuilt.
  const deepest = depthOf(dir) + v.treeHeight(targetTree);
  if (deepest > MAX_DEPTH)
    throw new VfsError(
      'ENAMETOOLONG',
      'revert',
      scope.root,
      `commit ${shortId(target)} holds a tree reaching level ${deepest}, and the tree may be at most ${MAX_DEPTH} levels deep`,
    );
  const work = v.treeOf(dir);
  const admin = isAdminCred(cred);
  // What the working tree becomes: the target where the caller may restore, as it is elsewhere.
  // Paths ignored now are left alone (the target may hold some, committed before they were ignored).
  let wanted = targetTree;
  const all = v.changesBetween(work, targetTree);
  const within = paths === undefined ? undefined : pathFilter(paths);
  const memo = new Map<string, boolean>();
  const ignored = v.ignoredNow();
  const mine = all.filter(
    (c) =>
      (within === undefined || within(c.path)) &&
      (admin || (visibleNow(v, cred, scope, c.path, memo) && visibleIn(v, cred, targetTree, c.path))) &&
      !ignored(joinScope(scope.root, c.path.replace(/\/$/, '')), (c.after ?? c.before)!.kind === 'd'),
  );
  // No empty commits: nothing to restore is an answer of its own, before any permission check or save.
  if (mine.length === 0)
    throw new VfsError(
      'EINVAL',
      op,
      undefined,
      `nothing to ${op}: ${paths === undefined ? 'what you may restore' : 'the paths given'} already ${
        paths === undefined ? 'is' : 'are'
      } as commit ${shortId(target)} has ${paths === undefined ? 'it' : 'them'} (no commit recorded)`,
    );
  if (mine.length !== all.length) wanted = v.graft(work, targetTree, mine);
  checkRevert(v, cred, scope, dir, wanted);
  const extra = paths === undefined ? {} : { paths };
  let saved: string | null = null;
  if (pendingFor(v, cred, scope, v.changesBetween(v.headTree(scope), work), paths).length > 0)
    saved = commit(v, cred, scope, `save uncommitted changes before revert to ${shortId(target)}`, extra).hash;
  applyTree(v, dir, wanted);
  const done = commit(v, cred, scope, as.message ?? `revert to ${shortId(target)}`, { ...extra, revert_of: target });
  return { hash: done.hash, reverted_to: shortId(target), saved, commit: done };
}

/**
 * Security: a non-admin may revert only entries they could change by hand, and never brings back
 * an entry owned by someone else (they could not have created it). The first denied path is named.
 */
function checkRevert(v: Trees, cred: Cred, scope: Scope, dir: DirNode, wanted: string): void {
  if (isAdminCred(cred)) return;
  const changes: Change[] = [];
  v.diffTrees(v.treeOf(dir), wanted, '', changes);
  const me = actor(cred).uid;
  const scopeDepth = components(scope.root).length;
  const removable = new Set<Node>(); // entries whose removal (and their ancestors') is checked
  try {
    for (const c of changes) {
      const rel = c.path.replace(/\/$/, '');
      const abs = joinScope(scope.root, rel);
      const parentAbs = abs.slice(0, abs.lastIndexOf('/')) || '/';
      const existing = lookupQuiet(v, abs);
      if (c.kind === 'modified' && existing !== undefined && c.after !== undefined) {
        checkModify(v, cred, existing, c.after, abs);
        continue;
      }
      if (c.kind === 'added') {
        const parent = nearestDir(v, parentAbs);
        requireAccess(cred, parent.dir, W | X, 'revert', abs);
        // every entry created on the way, and the entry itself, must be the caller's own (one walk
        // down the tree, not a look-up from the top per level: a deep chain costs O(depth))
        const from = parent.depth - scopeDepth;
        const parts = components(rel);
        let entries = v.trees.get(wanted);
        for (let i = 0; i < parts.length; i++) {
          const e = entries === undefined ? undefined : findEntry(entries, parts[i]!);
          if (e === undefined) break;
          if (i >= from && e.uid !== me)
            throw new VfsError(
              'EACCES',
              'revert',
              joinScope(scope.root, '/' + parts.slice(0, i + 1).join('/')),
              `revert would bring back an entry owned by uid ${e.uid}, which only its owner or an administrator may restore`,
            );
          entries = e.kind === 'd' ? v.trees.get(e.ref) : undefined;
        }
      } else if (existing !== undefined) checkRemove(v, cred, scope, dir, existing, rel, wanted, removable);
    }
  } catch (err) {
    // One answer for a denied revert, whichever rule denied it (chmod and chown say EPERM).
    if (err instanceof VfsError && err.code === 'EPERM') throw new VfsError('EACCES', 'revert', err.path, err.message);
    throw err;
  }
}

/** Changing an entry in place: content needs w, a link target needs replacing the link, attributes need chmod/chown rights. */
function checkModify(v: Trees, cred: Cred, node: Node, want: TreeEntry, abs: string): void {
  if (node.kind === 'file' && node.blob !== want.ref) requireAccess(cred, node, W, 'revert', abs);
  // a symlink's target cannot be written, only replaced (its 0777 mode grants nothing)
  if (node.kind === 'symlink' && node.target !== want.ref && node.parent !== null)
    requireUnlink(cred, node.parent, node, 'revert', abs);
  if (node.mode !== want.mode) requireChmod(cred, node, 'revert', abs);
  if (node.uid !== want.uid || node.gid !== want.gid) requireChown(cred, node, want.uid, want.gid, 'revert', abs);
}

/**
 * Removing an entry also removes each ancestor the target lacks: every one needs unlink rights in
 * its parent, like `rm -r`. `checked`: entries already checked so (with the ancestors they take
 * along), so the files of one deep directory walk its chain once.
 */
function checkRemove(
  v: Trees,
  cred: Cred,
  scope: Scope,
  scopeDir: DirNode,
  node: Node,
  rel: string,
  targetTree: string,
  checked: Set<Node>,
): void {
  // how many leading directories of `rel` the target keeps (one walk down, not one per level)
  const parts = components(rel);
  let kept = 0;
  let entries = v.trees.get(targetTree);
  for (; kept < parts.length - 1; kept++) {
    const e = entries === undefined ? undefined : findEntry(entries, parts[kept]!);
    if (e === undefined || e.kind !== 'd') break;
    entries = v.trees.get(e.ref);
  }
  let n = node;
  let r = rel;
  for (let depth = parts.length; !checked.has(n); depth--) {
    const parent = n.parent;
    if (parent === null) return;
    requireUnlink(cred, parent, n, 'revert', joinScope(scope.root, r));
    checked.add(n);
    if (parent === scopeDir || depth - 1 <= kept) return;
    r = r.slice(0, r.lastIndexOf('/'));
    n = parent;
  }
}

function lookupQuiet(v: Trees, abs: string): Node | undefined {
  let cur: Node = v.vfs.root;
  for (const name of components(abs)) {
    if (cur.kind !== 'directory') return undefined;
    const n: Node | undefined = cur.children.get(name);
    if (n === undefined) return undefined;
    cur = n;
  }
  return cur;
}

/** The deepest directory on the way to `abs` (itself when it is one) and its level below `/`: one walk down. */
function nearestDir(v: Trees, abs: string): { dir: DirNode; depth: number } {
  let dir = v.vfs.root;
  let depth = 0;
  for (const name of components(abs)) {
    const n = dir.children.get(name);
    if (n === undefined || n.kind !== 'directory') break;
    dir = n;
    depth++;
  }
  return { dir, depth };
}

/**
 * Makes `dir`'s contents equal to `tree`, touching only what differs (iterative, whatever the
 * depth). What is ignored is decided by the rules as they were when the revert began, those `tree`
 * was built with: an ignore file removed on the way does not expose (and remove) the files it
 * ignored below, which no commit holds. Its layers go down the walk (each directory's from its
 * parent's, read before the directory is changed), so a deep chain costs O(depth), not a look-up
 * to `/` from each directory. A directory the tree lacks that holds ignored entries is emptied of
 * the rest rather than removed, and goes at the end only if nothing is left in it.
 */
function applyTree(v: Trees, top: DirNode, topTree: string): void {
  const ignores = v.ignores;
  const stack: { dir: DirNode; tree: string; layers: Layer[]; emptying?: true }[] = [
    { dir: top, tree: topTree, layers: ignores.layersOf(top) },
  ];
  const emptied: DirNode[] = []; // directories the tree lacks, kept for the ignored entries below them
  const holding = new Set<DirNode>(); // directories found to hold ignored entries below them
  while (stack.length > 0) {
    const { dir, tree, layers, emptying } = stack.pop()!;
    if (dir.treeId === tree) continue;
    const entries = v.trees.get(tree) ?? [];
    const want = new Map(entries.map((e) => [e.name, e]));
    const below: { dir: DirNode; tree: string; emptying?: true }[] = [];
    for (const [name, child] of [...dir.children]) {
      const e = want.get(name);
      // an ignored entry is not in any tree of the working tree: it stays as it is
      if (e === undefined && v.ignores.ignored(layers, name, child.kind === 'directory')) continue;
      // below a directory being emptied, the scan that chose it has looked at every directory
      if (
        e === undefined &&
        child.kind === 'directory' &&
        (emptying === true ? holding.has(child) : scanForIgnored(v, child, layers, holding))
      ) {
        emptied.push(child);
        below.push({ dir: child, tree: v.emptyTree, emptying: true });
      } else if (e === undefined || kindOf(e) !== child.kind) v.vfs.removeUnchecked(child);
    }
    for (const e of entries) {
      const cur = dir.children.get(e.name);
      if (cur === undefined) {
        materialize(v, dir, e);
        continue;
      }
      if (cur.mode !== e.mode || cur.uid !== e.uid || cur.gid !== e.gid) {
        cur.mode = e.mode;
        cur.uid = e.uid;
        cur.gid = e.gid;
        v.vfs.changedUnchecked(cur, false);
      }
      if (cur.kind === 'file' && cur.blob !== e.ref) v.vfs.setBlobUnchecked(cur, e.ref, e.size);
      else if (cur.kind === 'symlink' && cur.target !== e.ref) {
        cur.target = e.ref;
        v.vfs.changedUnchecked(cur, true);
      } else if (cur.kind === 'directory') below.push({ dir: cur, tree: e.ref });
    }
    markDirty(dir);
    // a subdirectory's own ignore file is read now, before its turn changes it
    for (let k = below.length - 1; k >= 0; k--) {
      const sub = below[k]!;
      stack.push({ ...sub, layers: ignores.childLayers(layers, sub.dir) });
    }
  }
  // deepest first: a directory emptied of everything goes, and then maybe the one above it
  for (let k = emptied.length - 1; k >= 0; k--) {
    const d = emptied[k]!;
    if (d.children.size === 0) v.vfs.removeUnchecked(d);
  }
}

/**
 * Whether anything below `dir` (an entry of a directory governed by `above`) is ignored; every
 * directory of the subtree found to hold such an entry is added to `holding` (one post-order walk,
 * iterative, so emptying a deep chain scans it once).
 */
function scanForIgnored(v: Trees, dir: DirNode, above: Layer[], holding: Set<DirNode>): boolean {
  const stack: { d: DirNode; layers: Layer[]; open: boolean }[] = [
    { d: dir, layers: v.ignores.childLayers(above, dir), open: false },
  ];
  while (stack.length > 0) {
    const item = stack[stack.length - 1]!;
    if (!item.open) {
      item.open = true;
      for (const [name, c] of item.d.children) {
        if (v.ignores.ignored(item.layers, name, c.kind === 'directory')) holding.add(item.d);
        else if (c.kind === 'directory')
          stack.push({ d: c, layers: v.ignores.childLayers(item.layers, c), open: false });
      }
      continue;
    }
    stack.pop();
    if (holding.has(item.d) && item.d !== dir && item.d.parent !== null) holding.add(item.d.parent);
  }
  return holding.has(dir);
}

function materialize(v: Trees, parent: DirNode, top: TreeEntry): void {
  const stack: { parent: DirNode; e: TreeEntry }[] = [{ parent, e: top }];
  while (stack.length > 0) {
    const { parent: into, e } = stack.pop()!;
    const node = v.vfs.createUnchecked(into, {
      name: e.name,
      kind: kindOf(e),
      mode: e.mode,
      uid: e.uid,
      gid: e.gid,
      ...(e.kind === 'f'
        ? { blob: e.ref, size: e.size }
        : e.kind === 'l'
          ? { target: e.ref }
          : { height: v.treeHeight(e.ref) }),
    });
    if (node.kind !== 'directory') continue;
    const children = v.trees.get(e.ref) ?? [];
    for (let k = children.length - 1; k >= 0; k--) stack.push({ parent: node, e: children[k]! });
  }
}

function kindOf(e: TreeEntry): Node['kind'] {
  return e.kind === 'd' ? 'directory' : e.kind === 'f' ? 'file' : 'symlink';
}
