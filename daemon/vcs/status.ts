/**
 * Status, and the visibility rules status, diff, log, show and the snapshot views share: what the
 * caller may read now, what it could read as a snapshot recorded it, and the two together as the
 * one rule for every history answer (`visibleInHistory`).
 */
import { VfsError } from '../errors.js';
import { compareNames, type Node } from '../core/inode.js';
import { components, isWithin } from '../core/paths.js';
import { may, principalMay, isAdminCred, R, X, type Cred } from '../core/perms.js';
import { shortId } from '../core/objects.js';
import { slicer } from '../core/vfs.js';
import type { StatusResult } from '../rpc/protocol.js';
import { findEntry, joinScope, type Change, type Scope, type Trees } from './trees.js';

/** Whether the caller may read `rel` (scope-relative) in the working tree, or for a path that is gone, list its nearest existing ancestor. */
export function visibleNow(v: Trees, cred: Cred, scope: Scope, rel: string, memo?: Map<string, boolean>): boolean {
  const abs = joinScope(scope.root, rel.replace(/\/$/, ''));
  let p = abs;
  let exact = true;
  const tried: string[] = [];
  const answer = (v: boolean): boolean => {
    // Within one request the answer for a missing path's ancestors is the same for all its siblings.
    if (memo !== undefined) for (const q of tried) memo.set(q, v);
    return v;
  };
  for (;;) {
    if (!exact) {
      const known = memo?.get(p);
      if (known !== undefined) return answer(known);
      tried.push(p);
    }
    let n: Node | undefined;
    try {
      n = v.vfs.lookup(cred, p, 'status', false);
    } catch {
      return answer(false);
    }
    if (n !== undefined) {
      if (exact) return n.kind === 'directory' ? may(cred, n, R | X) : n.kind === 'symlink' || may(cred, n, R);
      return answer(n.kind === 'directory' && may(cred, n, R | X));
    }
    if (p === '/') return answer(false);
    p = p.slice(0, p.lastIndexOf('/')) || '/';
    exact = false;
  }
}

/** Whether the caller could read `rel` as it was in a snapshot (its stored modes and owners). */
export function visibleIn(v: Trees, cred: Cred, tree: string, rel: string): boolean {
  if (isAdminCred(cred)) return true;
  const parts = components(rel.replace(/\/$/, ''));
  let entries = v.trees.get(tree);
  for (let i = 0; i < parts.length; i++) {
    const e = entries === undefined ? undefined : findEntry(entries, parts[i]!);
    if (e === undefined) return true; // absent here: nothing to hide
    const node = {
      mode: e.mode,
      uid: e.uid,
      gid: e.gid,
      kind: e.kind === 'd' ? 'directory' : e.kind === 'f' ? 'file' : 'symlink',
    } as Node;
    const last = i === parts.length - 1;
    const bits = e.kind === 'd' ? (last ? R | X : X) : e.kind === 'f' ? R : 0;
    for (const p of cred.delegate === undefined ? [cred.user] : [cred.user, cred.delegate])
      if (bits !== 0 && !principalMay(p, node, bits)) return false;
    if (e.kind !== 'd') return true;
    entries = v.trees.get(e.ref);
  }
  return true;
}

/**
 * Security: the one rule for a path in a history answer (a diff, a commit's changes, the log).
 * Its name and content are shown only if the caller may read it now and list its nearest existing
 * ancestor now, and could read it and list its parent in each of `trees` (the snapshots it is
 * shown from; a snapshot without the path has nothing to hide). root and wheel see everything.
 * `memo` is kept for one request: it holds the answers for directories shared by many paths.
 */
export function visibleInHistory(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rel: string,
  trees: readonly string[],
  memo: Map<string, boolean>,
): boolean {
  if (isAdminCred(cred)) return true;
  const path = rel.replace(/\/$/, '');
  const parent = path.slice(0, path.lastIndexOf('/'));
  // (memo keys: absolute paths are visibleNow's own; "now:" and "<tree>:" prefix the parents' answers)
  const remembered = (key: string, f: () => boolean): boolean => {
    let known = memo.get(key);
    if (known === undefined) memo.set(key, (known = f()));
    return known;
  };
  if (!remembered(`now:${parent}`, () => visibleNow(v, cred, scope, parent || '/', memo))) return false;
  if (!visibleNow(v, cred, scope, path, memo)) return false;
  for (const tree of trees) {
    if (!remembered(`${tree}:${parent}`, () => visibleIn(v, cred, tree, parent || '/'))) return false;
    if (!visibleIn(v, cred, tree, path)) return false;
  }
  return true;
}

/**
 * The pending changes a caller may see (what its status lists and its commit takes): each must be
 * readable now (for a path that is gone: its nearest existing directory listable) and, unless it is
 * new, readable as the last commit recorded it. `paths` (scope-relative) narrows them to those
 * paths and what is below them.
 */
export function pendingFor(v: Trees, cred: Cred, scope: Scope, changes: Change[], paths?: readonly string[]): Change[] {
  const headTree = v.headTree(scope);
  const memo = new Map<string, boolean>();
  const within = paths === undefined ? undefined : pathFilter(paths);
  const out: Change[] = [];
  for (const c of changes) {
    if (within !== undefined && !within(c.path)) continue;
    if (maySee(v, cred, scope, headTree, c, memo)) out.push(c);
  }
  return out;
}

/** The rule of `pendingFor` for one change against the head tree `headTree`. */
function maySee(v: Trees, cred: Cred, scope: Scope, headTree: string, c: Change, memo: Map<string, boolean>): boolean {
  if (isAdminCred(cred)) return true;
  if (!visibleNow(v, cred, scope, c.path, memo)) return false;
  return c.kind === 'added' || visibleIn(v, cred, headTree, c.path);
}

/**
 * Whether a path strictly below the directory at `rel` (scope-relative) can pass `visibleNow`:
 * not when the caller may not search that directory now (every lookup below it fails), nor when it
 * is gone and its nearest existing ancestor may not be listed. Lets the walks of pending changes
 * skip whole subtrees the caller cannot see (their cost follows what the caller may see).
 */
export function mayLookBelow(v: Trees, cred: Cred, scope: Scope, rel: string, memo: Map<string, boolean>): boolean {
  let n: Node | undefined;
  try {
    n = v.vfs.lookup(cred, joinScope(scope.root, rel), 'status', false);
  } catch {
    return true; // decided below, path by path
  }
  if (n === undefined) return visibleNow(v, cred, scope, rel, memo); // what every missing path below it gets
  if (n.kind === 'directory') return may(cred, n, X);
  return n.kind === 'symlink'; // a lookup through a file fails
}

/** Debug counters of the walks of pending changes (tests): directories and changes looked at. */
export const pendingStats = { examined: 0 };

/**
 * The pending changes (from the head tree `base` to the working tree `work`) a caller may see, as
 * `pendingFor` chooses them, one at a time in path order, with `undefined` for each change looked at
 * and left out, so that the consumer can yield the event loop between them (the trees never change;
 * hold them with `Trees.reading`). Subtrees the caller cannot see, or outside `paths`, or wholly
 * before `after` (a scope-relative path), are skipped without looking at what they hold.
 * `partial()`: whether a pending change was left out (not the caller's to see, or outside `paths`).
 */
export function pendingWalk(
  v: Trees,
  cred: Cred,
  scope: Scope,
  base: string,
  work: string,
  opts: { paths?: readonly string[]; after?: string } = {},
): { changes: Generator<Change | undefined>; partial: () => boolean } {
  const memo = new Map<string, boolean>();
  const within = opts.paths === undefined ? undefined : pathFilter(opts.paths);
  const towards = opts.paths === undefined ? undefined : pathFilter(opts.paths, true);
  const admin = isAdminCred(cred);
  let partial = false;
  const enter = (dir: string): boolean => {
    pendingStats.examined++;
    if (opts.after !== undefined && comparePaths(dir, opts.after) < 0 && !isWithin(opts.after, dir)) return false;
    if ((towards !== undefined && !towards(dir)) || (!admin && !mayLookBelow(v, cred, scope, dir, memo))) {
      partial = true;
      return false;
    }
    return true;
  };
  function* changes(): Generator<Change | undefined> {
    for (const c of v.changes(base, work, '', enter)) {
      pendingStats.examined++;
      if ((within === undefined || within(c.path)) && maySee(v, cred, scope, base, c, memo)) yield c;
      else {
        partial = true;
        yield undefined;
      }
    }
  }
  return { changes: changes(), partial: () => partial };
}

/** The pending changes a commit takes, found ahead of it (`planPending`), and the trees they lead between. */
export interface PendingPlan {
  parent: string | null;
  work: string;
  changes: Change[];
  /** some pending change is left out (then the commit grafts these onto its parent's tree) */
  partial: boolean;
}

/**
 * The caller's pending changes at or below `paths` (exactly what `pendingFor` takes), found in
 * slices that yield the event loop, for a commit to take in its atomic step as long as neither the
 * scope's working tree nor its head has changed meanwhile (`commit` checks: the tree ids cover every
 * mode and owner in the scope, hence what the caller may see).
 */
export async function planPending(
  v: Trees,
  cred: Cred,
  scope: Scope,
  paths?: readonly string[],
  pauser: () => () => Promise<void> | undefined = slicer,
): Promise<PendingPlan> {
  const parent = v.head(scope);
  const base = v.headTree(scope);
  const work = v.treeOf(v.scopeDir(scope));
  v.reading++;
  try {
    const walk = pendingWalk(v, cred, scope, base, work, paths === undefined ? {} : { paths });
    const changes: Change[] = [];
    const pause = pauser();
    for (const c of walk.changes) {
      const p = pause();
      if (p !== undefined) await p;
      if (c !== undefined) changes.push(c);
    }
    return { parent, work, changes, partial: walk.partial() };
  } finally {
    v.reading--;
  }
}

/** Scope-relative paths in the order the walks list them: name by name, a directory before what it holds. */
function comparePaths(a: string, b: string): number {
  const pa = components(a.replace(/\/$/, ''));
  const pb = components(b.replace(/\/$/, ''));
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const c = compareNames(pa[i]!, pb[i]!);
    if (c !== 0) return c;
  }
  return pa.length - pb.length;
}

/**
 * A test for scope-relative paths: is it one of `paths` or below one of them? ('' or '/' is
 * everything.) `orAbove`: or above one of them (a directory on the way to one).
 */
export function pathFilter(paths: readonly string[], orAbove = false): (path: string) => boolean {
  const set = new Set(paths.map((p) => p.replace(/\/+$/, '')));
  if (set.has('')) return () => true;
  return (path) => {
    const p0 = path.replace(/\/$/, '');
    for (let p = p0; p !== ''; p = p.slice(0, p.lastIndexOf('/'))) if (set.has(p)) return true;
    if (orAbove) for (const q of set) if (isWithin(q, p0 === '' ? '/' : p0)) return true;
    return false;
  };
}

/** The most paths a status lists by default, and at most (about 1 MB of answer); the rest are counted in `more`. */
export const STATUS_MAX = 10000;

/** What a status page's cursor names: the last change listed (its kind and path). */
function cursorOf(c: Change): string {
  return `${c.kind[0]}${c.path}`;
}

function parseCursor(cursor: string): { kind: string; path: string } {
  const kind = { a: 'added', m: 'modified', d: 'deleted' }[cursor[0] ?? ''];
  if (kind === undefined || cursor[1] !== '/')
    throw new VfsError('EINVAL', 'status', undefined, 'not a status cursor: pass the next_cursor of the previous page');
  return { kind, path: cursor.slice(1) };
}

/**
 * The caller's pending changes (see `pendingFor`) as a bounded page: at most `limit` (default and
 * at most STATUS_MAX) are listed, in path order, after `cursor` (the `next_cursor` of the previous
 * page); `truncated`, `more` and `next_cursor` say what is left. The working tree is taken as it is
 * when the status begins (hash it first with `prehash`); the walk then yields the event loop
 * between slices, and costs what the caller may see (subtrees it cannot search are skipped whole).
 */
export async function status(
  v: Trees,
  cred: Cred,
  scope: Scope,
  page: { limit?: number; cursor?: string } = {},
  pauser: () => () => Promise<void> | undefined = slicer,
): Promise<StatusResult> {
  const limit = Math.min(page.limit ?? STATUS_MAX, STATUS_MAX);
  const after = page.cursor === undefined ? undefined : parseCursor(page.cursor);
  const head = v.head(scope);
  const base = v.headTree(scope);
  const work = v.treeOf(v.scopeDir(scope));
  const listed: Change[] = [];
  let more = 0;
  v.reading++;
  try {
    const walk = pendingWalk(v, cred, scope, base, work, after === undefined ? {} : { after: after.path });
    let started = after === undefined;
    const pause = pauser();
    for (const c of walk.changes) {
      const p = pause();
      if (p !== undefined) await p;
      if (c === undefined) continue;
      if (!started) {
        // The cursor's change itself (a path changing kind is listed twice, deleted then added), or
        // failing that (changed since), the first change past it that is not below it.
        if (c.path === after!.path && c.kind === after!.kind) started = true;
        else if (comparePaths(c.path, after!.path) > 0 && !isWithin(c.path, after!.path.replace(/\/$/, '')))
          started = true;
        if (!started || c.path === after!.path) continue;
      }
      if (listed.length < limit) listed.push(c);
      else more++;
    }
  } finally {
    v.reading--;
  }
  const added: string[] = [];
  const modified: string[] = [];
  const deleted: string[] = [];
  for (const c of listed) (c.kind === 'added' ? added : c.kind === 'modified' ? modified : deleted).push(c.path);
  const lines: string[] = [head === null ? 'No commits yet' : `On commit ${shortId(head)}`];
  if (listed.length === 0)
    lines.push(after === undefined ? 'nothing to commit, working tree clean' : 'no more changes after the cursor');
  else {
    lines.push('Changes since the last commit:');
    for (const p of added) lines.push(`\tadded:    ${p}`);
    for (const p of modified) lines.push(`\tmodified: ${p}`);
    for (const p of deleted) lines.push(`\tdeleted:  ${p}`);
    if (more > 0)
      lines.push(
        `\t... and ${more} more changes (${after === undefined ? `only the first ${limit}` : `${limit} per page`} are listed; the next page: cursor ${cursorOf(listed[listed.length - 1]!)})`,
      );
  }
  const r: StatusResult = {
    added,
    modified,
    deleted,
    clean: listed.length === 0 && after === undefined,
    head: head === null ? null : shortId(head),
    text: lines.join('\n') + '\n',
  };
  if (more > 0) {
    r.truncated = true;
    r.more = more;
    r.next_cursor = cursorOf(listed[listed.length - 1]!);
  }
  return r;
}
