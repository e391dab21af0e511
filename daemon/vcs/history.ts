/**
 * History: commits (a snapshot of the scope, as a new commit object), commit records, commit
 * names (`HEAD~2`, hash prefixes) and the log.
 */
import { VfsError } from '../errors.js';
import { isAdminCred, type Cred } from '../core/perms.js';
import { encodeCommit, objectId, shortId, type CommitAttribution, type CommitObject } from '../core/objects.js';
import type { ChangeRecord, CommitRecord } from '../rpc/protocol.js';
import { pathFilter, pendingFor, visibleInHistory, visibleNow, type PendingPlan } from './status.js';
import {
  attributionOf,
  joinScope,
  type Attribution,
  type Change,
  type ChangedPath,
  type Scope,
  type Trees,
} from './trees.js';

/**
 * Commits the pending changes the caller may see (exactly what its status lists), optionally only
 * those at or below `paths` (scope-relative): the new tree is the parent's with those changes
 * applied, and changes the caller cannot see stay pending for those who can. Each changed path
 * records who last changed it when that is not the committer (`attribution`). Atomic (one turn
 * of the event loop); the cost grows with what changed since the last commit, and with what
 * `prehash` and `prepersist` did not already do.
 */
export function commit(
  v: Trees,
  cred: Cred,
  scope: Scope,
  message: string,
  extra: { revert_of?: string; paths?: readonly string[]; pending?: PendingPlan } = {},
): CommitRecord {
  if (message.trim() === '') throw new VfsError('EINVAL', 'commit', undefined, 'a commit needs a message');
  const work = v.treeOf(v.scopeDir(scope));
  const parent = v.head(scope);
  const base = parent === null ? v.emptyTree : v.commits.get(parent)!.tree;
  // root and wheel commit the whole tree: counted without listing it, unless attribution needs the paths
  const whole = isAdminCred(cred) && extra.paths === undefined;
  let mine: Change[] | undefined;
  let tree = work;
  // The changes found ahead (`planPending`, across turns) hold while the working tree and head are those they were found in.
  const planned = extra.pending?.work === work && extra.pending.parent === parent ? extra.pending : undefined;
  if (planned !== undefined) {
    mine = planned.changes;
    if (planned.partial) tree = v.graft(base, work, mine);
  } else if (!whole) {
    const all = v.changesBetween(base, work);
    mine = pendingFor(v, cred, scope, all, extra.paths);
    if (mine.length !== all.length) tree = v.graft(base, work, mine);
  }
  v.persistTree(tree);
  const me = attributionOf(cred);
  let attribution: CommitAttribution[] = [];
  if (v.markedByOthers(scope.root, me)) {
    mine ??= v.changesBetween(base, work);
    attribution = attribute(v, me, scope, mine);
  }
  const c: CommitObject = {
    tree,
    parent,
    author: cred.user.name,
    scope: scope.id,
    root: scope.root,
    message,
    timestamp: Math.floor(Date.now() / 1000),
    changes: mine?.length ?? v.countChanges(base, work),
  };
  if (cred.delegate !== undefined) c.on_behalf_of = cred.delegate.name;
  if (extra.revert_of !== undefined) c.revert_of = extra.revert_of;
  if (attribution.length > 0) c.attribution = attribution;
  const payload = encodeCommit(c);
  const id = objectId('commit', payload);
  v.commits.set(id, c);
  v.store.object(id, 'commit', payload);
  v.refs.set(scope.id, id);
  v.store.setRef(scope.id, id);
  if (tree === work) v.forgetMarks(scope.root);
  else for (const ch of mine!) v.unmark(joinScope(scope.root, ch.path.replace(/\/$/, '')));
  return record(id, c);
}

/** The committed paths whose last change was made by someone other than the committer, as [path, by, on_behalf_of?]. */
function attribute(v: Trees, me: Attribution, scope: Scope, changes: readonly Change[]): CommitAttribution[] {
  const out: CommitAttribution[] = [];
  for (const ch of changes) {
    const who = v.attributed(joinScope(scope.root, ch.path.replace(/\/$/, '')));
    if (who === undefined || (who.by === me.by && who.on_behalf_of === me.on_behalf_of)) continue;
    out.push(who.on_behalf_of === undefined ? [ch.path, who.by] : [ch.path, who.by, who.on_behalf_of]);
  }
  return out;
}

function record(id: string, c: CommitObject): CommitRecord {
  const r: CommitRecord = {
    hash: shortId(id),
    message: c.message,
    author: c.author,
    timestamp: c.timestamp,
    parent: c.parent === null ? null : shortId(c.parent),
    changes: c.changes,
  };
  if (c.on_behalf_of !== undefined) r.on_behalf_of = c.on_behalf_of;
  if (c.scope !== '') r.workspace = c.scope;
  return r;
}

/**
 * A commit named as git names it, within the caller's view of the scope's history (the commits its
 * `log` lists): `HEAD` (the newest of them), a unique hash prefix (4+ hex digits), either followed
 * by ancestry steps `~n`, `~` or `^` (`HEAD~2`, `abcd^`), each a step to the next older commit the
 * caller may see. Every transport names commits through here (show, diff, revert, undo, read at a
 * commit, the mount's .history). Security: a commit hidden from the caller is ENOENT, exactly as
 * one that does not exist (no oracle: neither hits nor counts include it). root and wheel see all.
 */
export function find(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
  op = 'revert',
  memo = new Map<string, boolean>(),
): string {
  const sees = (id: string): boolean => seesCommit(v, cred, scope, id, memo);
  /** `from` if the caller may see it, else the next older commit it may see. */
  const seen = (from: string | null): string | null => {
    for (let h = from; h !== null; h = v.commits.get(h)?.parent ?? null) if (sees(h)) return h;
    return null;
  };
  const spec = rev.trim();
  const shown = spec.slice(0, 80);
  const m = /^([^~^]*)((?:~\d*|\^1?)*)$/.exec(spec);
  const base = m?.[1] ?? '';
  let id: string;
  if (base.toUpperCase() === 'HEAD' || base === '@') {
    const head = seen(v.head(scope));
    if (head === null)
      throw new VfsError('ENOENT', op, undefined, `no commit ${shown}: nothing has been committed yet`);
    id = head;
  } else {
    const p = base.toLowerCase();
    if (m === null || !/^[0-9a-f]{4,64}$/.test(p))
      throw new VfsError(
        'EINVAL',
        op,
        undefined,
        `'${shown}' is not a commit: give HEAD, a hash of at least 4 hex digits, or either with ~n or ^`,
      );
    const hits: string[] = [];
    for (let h = v.head(scope); h !== null; h = v.commits.get(h)?.parent ?? null)
      if (h.startsWith(p) && sees(h)) hits.push(h);
    if (hits.length === 0) throw new VfsError('ENOENT', op, undefined, `no commit ${p} in this history`);
    if (hits.length > 1)
      throw new VfsError('EINVAL', op, undefined, `commit prefix ${p} is ambiguous: give more hex digits`);
    id = hits[0]!;
  }
  let back = 0;
  for (const step of (m?.[2] ?? '').match(/~\d*|\^1?/g) ?? []) {
    const n = step.startsWith('~') && step.length > 1 ? Number(step.slice(1)) : 1;
    if (!Number.isSafeInteger(n)) throw new VfsError('EINVAL', op, undefined, `'${shown}' steps back too far`);
    back += n;
  }
  for (let i = 0; i < back; i++) {
    const parent = seen(v.commits.get(id)?.parent ?? null);
    if (parent === null)
      throw new VfsError(
        'ENOENT',
        op,
        undefined,
        `no commit ${shown}: ${base} has only ${i} commit${i === 1 ? '' : 's'} before it`,
      );
    id = parent;
  }
  return id;
}

/**
 * Commits newest first, those the caller may see (`visibleCommit`); with `path` (scope-relative),
 * those of them that changed it, in a change the caller may see (or made it themselves). `cursor` names the last commit of a previous page: the log goes on
 * from its parent. `next_cursor` is set when the page is full and older commits remain.
 */
export function log(
  v: Trees,
  scope: Scope,
  opts: { path?: string; limit?: number; cursor?: string },
  cred: Cred,
): { commits: CommitRecord[]; next_cursor?: string } {
  // Security: a path's history would tell whether a file exists where the caller cannot look.
  if (opts.path !== undefined && !visibleNow(v, cred, scope, opts.path)) throw new VfsError('EACCES', 'log', opts.path);
  const out: CommitRecord[] = [];
  const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
  const memo = new Map<string, boolean>();
  const within = opts.path === undefined ? undefined : pathFilter([opts.path]);
  let id =
    opts.cursor === undefined
      ? v.head(scope)
      : (v.commits.get(find(v, cred, scope, opts.cursor, 'log', memo))?.parent ?? null);
  for (; id !== null && out.length < limit;) {
    const c = v.commits.get(id);
    if (c === undefined) break;
    // a commit with a change the caller may see is visible to it, whatever else it changed
    if ((opts.path === undefined || touches(v, c, opts.path)) && visibleCommit(v, cred, scope, id, c, memo, within))
      out.push(record(id, c));
    id = c.parent;
  }
  return id !== null && out.length === limit && out.length > 0
    ? { commits: out, next_cursor: out[out.length - 1]!.hash }
    : { commits: out };
}

/** Whether the caller may see the commit `id` (`visibleCommit`); false for no such commit. */
export function seesCommit(v: Trees, cred: Cred, scope: Scope, id: string, memo = new Map<string, boolean>()): boolean {
  const c = v.commits.get(id);
  return c !== undefined && visibleCommit(v, cred, scope, id, c, memo);
}

/**
 * Security: whether a caller may see a commit at all (its message, author, changes). root and
 * wheel see every commit; anyone else their own (made by them, or by an agent on their behalf)
 * and those with at least one change it may see (`changeVisible`), only among the paths `within`
 * accepts if given.
 */
function visibleCommit(
  v: Trees,
  cred: Cred,
  scope: Scope,
  id: string,
  c: CommitObject,
  memo: Map<string, boolean>,
  within?: (path: string) => boolean,
): boolean {
  if (isAdminCred(cred)) return true;
  const me = cred.delegate ?? cred.user;
  if (c.author === me.name || c.on_behalf_of === me.name) return true;
  for (const ch of changedPaths(v, id, c))
    if ((within === undefined || within(ch.path)) && changeVisible(v, cred, scope, c, ch, memo)) return true;
  return false;
}

/**
 * Security: whether a caller may see one change of a commit (its path and what happened to it):
 * the history rule (`visibleInHistory`), judged in the commit's tree, or for a path the commit
 * deleted, in its parent's (the version deleted).
 */
function changeVisible(
  v: Trees,
  cred: Cred,
  scope: Scope,
  c: CommitObject,
  ch: ChangedPath,
  memo: Map<string, boolean>,
): boolean {
  const tree = ch.gone ? parentTree(v, c) : c.tree;
  return visibleInHistory(v, cred, scope, ch.path, [tree], memo);
}

function parentTree(v: Trees, c: CommitObject): string {
  return c.parent === null ? v.emptyTree : v.commits.get(c.parent)!.tree;
}

/** The paths a commit changed, and whether it deleted each (memoised for commits of up to CHANGES_MEMO paths). */
function changedPaths(v: Trees, id: string, c: CommitObject): readonly ChangedPath[] {
  const known = v.changedPaths.get(id);
  if (known !== undefined) return known;
  const paths = v
    .changesBetween(parentTree(v, c), c.tree)
    .map((ch) => ({ path: ch.path, gone: ch.after === undefined }));
  if (paths.length <= CHANGES_MEMO) v.changedPaths.set(id, paths);
  return paths;
}
const CHANGES_MEMO = 1000;

/** The most changes a commit's detail lists (like status); `truncated` and `more` count the rest. */
const SHOW_MAX = 10000;

/**
 * A commit's detail: its record and, per changed path the caller may read now, what happened to it
 * and who last changed it (the committer unless the commit recorded someone else). A commit the
 * caller may not see is answered as one that does not exist.
 */
export function show(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
): { commit: CommitRecord; changes: ChangeRecord[]; truncated?: true; more?: number } {
  const memo = new Map<string, boolean>();
  const id = find(v, cred, scope, rev, 'show', memo);
  const c = v.commits.get(id)!;
  const others = new Map((c.attribution ?? []).map((a) => [a[0], a]));
  const changes: ChangeRecord[] = [];
  let more = 0;
  for (const ch of v.changesBetween(parentTree(v, c), c.tree)) {
    if (!changeVisible(v, cred, scope, c, { path: ch.path, gone: ch.after === undefined }, memo)) continue;
    if (changes.length >= SHOW_MAX) {
      more++;
      continue;
    }
    const a = others.get(ch.path);
    const by = a === undefined ? c.author : a[1];
    const obo = a === undefined ? c.on_behalf_of : a[2];
    changes.push(
      obo === undefined ? { path: ch.path, op: ch.kind, by } : { path: ch.path, op: ch.kind, by, on_behalf_of: obo },
    );
  }
  return more > 0 ? { commit: record(id, c), changes, truncated: true, more } : { commit: record(id, c), changes };
}

/** Whether a commit changed the entry at `rel` (relative to the scope root). */
function touches(v: Trees, c: CommitObject, rel: string): boolean {
  const now = v.entryAt(c.tree, rel);
  const before = c.parent === null ? undefined : v.entryAt(v.commits.get(c.parent)!.tree, rel);
  if (now === undefined && before === undefined) return false;
  if (now === undefined || before === undefined) return true;
  return (
    now.ref !== before.ref ||
    now.mode !== before.mode ||
    now.kind !== before.kind ||
    now.uid !== before.uid ||
    now.gid !== before.gid
  );
}
