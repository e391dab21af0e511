/**
 * Status, and the visibility rules status, diff, log, show and the snapshot views share: what the
 * caller may read now, what it could read as a snapshot recorded it, and the two together as the
 * one rule for every history answer (`visibleInHistory`).
 */
import type { Node } from '../core/inode.js';
import { components } from '../core/paths.js';
import { may, principalMay, isAdminCred, R, X, type Cred } from '../core/perms.js';
import { shortId } from '../core/objects.js';
import type { StatusResult } from '../rpc/protocol.js';
import { findEntry, joinScope, type Change, type Scope, type Trees } from './trees.js';

/** The most paths a status lists (about 1 MB of answer); the rest are counted in `more`. */
const STATUS_MAX = 10000;

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
    if (isAdminCred(cred)) {
      out.push(c);
      continue;
    }
    if (!visibleNow(v, cred, scope, c.path, memo)) continue;
    if (c.kind !== 'added' && !visibleIn(v, cred, headTree, c.path)) continue;
    out.push(c);
  }
  return out;
}

/** A test for scope-relative paths: is it one of `paths` or below one of them? ('' or '/' is everything.) */
export function pathFilter(paths: readonly string[]): (path: string) => boolean {
  const set = new Set(paths.map((p) => p.replace(/\/+$/, '')));
  if (set.has('')) return () => true;
  return (path) => {
    for (let p = path.replace(/\/$/, ''); p !== ''; p = p.slice(0, p.lastIndexOf('/'))) if (set.has(p)) return true;
    return false;
  };
}

export function status(v: Trees, cred: Cred, scope: Scope): StatusResult {
  const head = v.head(scope);
  const changes = pendingFor(v, cred, scope, v.changesBetween(v.headTree(scope), v.treeOf(v.scopeDir(scope))));
  const added: string[] = [];
  const modified: string[] = [];
  const deleted: string[] = [];
  // Bounded answer: at most STATUS_MAX paths are listed; `truncated` and a last line count the rest.
  let more = 0;
  for (const c of changes) {
    if (added.length + modified.length + deleted.length >= STATUS_MAX) more++;
    else (c.kind === 'added' ? added : c.kind === 'modified' ? modified : deleted).push(c.path);
  }
  const lines: string[] = [head === null ? 'No commits yet' : `On commit ${shortId(head)}`];
  if (added.length + modified.length + deleted.length === 0) lines.push('nothing to commit, working tree clean');
  else {
    lines.push('Changes since the last commit:');
    for (const p of added) lines.push(`\tadded:    ${p}`);
    for (const p of modified) lines.push(`\tmodified: ${p}`);
    for (const p of deleted) lines.push(`\tdeleted:  ${p}`);
    if (more > 0) lines.push(`\t... and ${more} more changes (only the first ${STATUS_MAX} are listed)`);
  }
  const r: StatusResult = {
    added,
    modified,
    deleted,
    clean: added.length + modified.length + deleted.length === 0,
    head: head === null ? null : shortId(head),
    text: lines.join('\n') + '\n',
  };
  if (more > 0) {
    r.truncated = true;
    r.more = more;
  }
  return r;
}
