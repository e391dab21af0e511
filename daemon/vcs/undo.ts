/**
 * Undo an agent: restores every path whose last change was made by `actor` (directly or on behalf
 * of someone) since a commit (default: the last one), to its state at that commit, as a revert
 * narrowed to those paths (so with the same permission rules, all-or-nothing), recorded as a commit.
 */
import { VfsError } from '../errors.js';
import { isAdminCred, type Cred } from '../core/perms.js';
import { shortId } from '../core/objects.js';
import type { CommitRecord } from '../rpc/protocol.js';
import { find, seesCommit } from './history.js';
import { revert } from './revert.js';
import { visibleNow } from './status.js';
import { joinScope, type Scope, type Trees } from './trees.js';

export function undo(
  v: Trees,
  cred: Cred,
  scope: Scope,
  actor: string,
  since?: string,
): { hash: string; reverted_to: string; saved: string | null; commit: CommitRecord; paths: string[] } {
  const base = since === undefined ? v.head(scope) : sinceCommit(v, cred, scope, since);
  if (base === null)
    throw new VfsError('ENOENT', 'undo', undefined, 'nothing has been committed yet: there is no state to go back to');
  // Newest first: what is pending, then each commit back to `base`; a path's first sighting is its last change.
  const last = new Map<string, string>();
  const work = v.treeOf(v.scopeDir(scope));
  for (const c of v.changesBetween(v.headTree(scope), work)) {
    const who = v.attributed(joinScope(scope.root, c.path.replace(/\/$/, '')));
    if (who !== undefined) last.set(c.path, who.by);
  }
  for (let id = v.head(scope); id !== null && id !== base;) {
    const c = v.commits.get(id)!;
    const others = new Map((c.attribution ?? []).map((a) => [a[0], a[1]]));
    for (const ch of v.changesBetween(c.parent === null ? v.emptyTree : v.commits.get(c.parent)!.tree, c.tree))
      if (!last.has(ch.path)) last.set(ch.path, others.get(ch.path) ?? c.author);
    id = c.parent;
  }
  // Security: only paths the caller may read now are named or counted (a path elsewhere is no answer to give).
  const memo = new Map<string, boolean>();
  const paths = [...last]
    .filter(([p, by]) => by === actor && (isAdminCred(cred) || visibleNow(v, cred, scope, p, memo)))
    .map(([p]) => p.replace(/\/$/, '') || '/')
    .sort();
  if (paths.length === 0)
    throw new VfsError('ENOENT', 'undo', undefined, `no change by ${actor.slice(0, 64)} since ${shortId(base)}`);
  const r = revert(v, cred, scope, base, paths, { message: `undo ${actor} since ${shortId(base)}`, op: 'undo' });
  return { ...r, paths };
}

/** `since`: a commit name, or an ISO date-time (the newest commit made before it). */
function sinceCommit(v: Trees, cred: Cred, scope: Scope, since: string): string | null {
  if (!/^\d{4}-\d\d-\d\d/.test(since)) return find(v, cred, scope, since, 'undo');
  const t = Date.parse(since);
  if (Number.isNaN(t))
    throw new VfsError('EINVAL', 'undo', undefined, `'${since.slice(0, 80)}' is neither a commit nor a date`);
  // the newest commit before it that the caller may see (a hidden one is not named, even here)
  const memo = new Map<string, boolean>();
  for (let id = v.head(scope); id !== null; id = v.commits.get(id)!.parent)
    if (v.commits.get(id)!.timestamp * 1000 < t && seesCommit(v, cred, scope, id, memo)) return id;
  return null;
}
