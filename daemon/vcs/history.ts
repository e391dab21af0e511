/**
 * History: commits (a snapshot of the scope, as a new commit object), commit records, commit
 * names (`HEAD~2`, hash prefixes) and the log.
 */
import { VfsError } from '../errors.js';
import type { Cred } from '../core/perms.js';
import { encodeCommit, objectId, shortId, type CommitObject } from '../store/objects.js';
import type { CommitRecord } from '../rpc/protocol.js';
import { visibleNow } from './status.js';
import type { Scope, Trees } from './trees.js';

/**
 * Snapshots the scope, atomically (one turn of the event loop). Cost grows with what changed
 * since the last commit, and with what `prehash` and `prepersist` did not already do.
 */
export function commit(v: Trees, cred: Cred, scope: Scope, message: string, extra: { revert_of?: string } = {}): CommitRecord {
  if (message.trim() === '') throw new VfsError('EINVAL', 'commit', undefined, 'a commit needs a message');
  const tree = v.treeOf(v.scopeDir(scope));
  const parent = v.head(scope);
  v.persistTree(tree);
  const changes = v.countChanges(parent === null ? v.emptyTree : v.commits.get(parent)!.tree, tree);
  const c: CommitObject = { tree, parent, author: cred.user.name, scope: scope.id, root: scope.root, message, timestamp: Math.floor(Date.now() / 1000), changes };
  if (cred.delegate !== undefined) c.on_behalf_of = cred.delegate.name;
  if (extra.revert_of !== undefined) c.revert_of = extra.revert_of;
  const payload = encodeCommit(c);
  const id = objectId('commit', payload);
  v.commits.set(id, c);
  v.store.object(id, 'commit', payload);
  v.refs.set(scope.id, id);
  v.store.setRef(scope.id, id);
  return record(id, c);
}

function record(id: string, c: CommitObject): CommitRecord {
  const r: CommitRecord = { hash: shortId(id), message: c.message, author: c.author, timestamp: c.timestamp, parent: c.parent === null ? null : shortId(c.parent), changes: c.changes };
  if (c.on_behalf_of !== undefined) r.on_behalf_of = c.on_behalf_of;
  if (c.scope !== '') r.workspace = c.scope;
  return r;
}

/**
 * A commit named as git names it, within the scope's history: `HEAD`, a unique hash prefix (4+ hex
 * digits), either followed by ancestry steps `~n`, `~` or `^` (`HEAD~2`, `abcd^`; one parent per commit).
 * Every transport names commits through here (revert, diff, the mount's .history).
 */
export function find(v: Trees, scope: Scope, rev: string, op = 'revert'): string {
  const spec = rev.trim();
  const shown = spec.slice(0, 80);
  const m = /^([^~^]*)((?:~\d*|\^1?)*)$/.exec(spec);
  const base = m?.[1] ?? '';
  let id: string;
  if (base.toUpperCase() === 'HEAD' || base === '@') {
    const head = v.head(scope);
    if (head === null) throw new VfsError('ENOENT', op, undefined, `no commit ${shown}: nothing has been committed yet`);
    id = head;
  } else {
    const p = base.toLowerCase();
    if (m === null || !/^[0-9a-f]{4,64}$/.test(p)) throw new VfsError('EINVAL', op, undefined, `'${shown}' is not a commit: give HEAD, a hash of at least 4 hex digits, or either with ~n or ^`);
    const hits: string[] = [];
    for (let h = v.head(scope); h !== null; h = v.commits.get(h)?.parent ?? null) if (h.startsWith(p)) hits.push(h);
    if (hits.length === 0) throw new VfsError('ENOENT', op, undefined, `no commit ${p} in this history`);
    if (hits.length > 1) throw new VfsError('EINVAL', op, undefined, `commit prefix ${p} is ambiguous: give more hex digits`);
    id = hits[0]!;
  }
  let back = 0;
  for (const step of (m?.[2] ?? '').match(/~\d*|\^1?/g) ?? []) {
    const n = step.startsWith('~') && step.length > 1 ? Number(step.slice(1)) : 1;
    if (!Number.isSafeInteger(n)) throw new VfsError('EINVAL', op, undefined, `'${shown}' steps back too far`);
    back += n;
  }
  for (let i = 0; i < back; i++) {
    const parent = v.commits.get(id)?.parent ?? null;
    if (parent === null) throw new VfsError('ENOENT', op, undefined, `no commit ${shown}: ${base} has only ${i} commit${i === 1 ? '' : 's'} before it`);
    id = parent;
  }
  return id;
}

export function log(v: Trees, scope: Scope, opts: { path?: string; limit?: number }, cred?: Cred): CommitRecord[] {
  // Security: a path's history would tell whether a file exists where the caller cannot look.
  if (opts.path !== undefined && cred !== undefined && !visibleNow(v, cred, scope, opts.path)) throw new VfsError('EACCES', 'log', opts.path);
  const out: CommitRecord[] = [];
  const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
  for (let id = v.head(scope); id !== null && out.length < limit; ) {
    const c = v.commits.get(id);
    if (c === undefined) break;
    if (opts.path === undefined || touches(v, c, opts.path)) out.push(record(id, c));
    id = c.parent;
  }
  return out;
}

/** Whether a commit changed the entry at `rel` (relative to the scope root). */
function touches(v: Trees, c: CommitObject, rel: string): boolean {
  const now = v.entryAt(c.tree, rel);
  const before = c.parent === null ? undefined : v.entryAt(v.commits.get(c.parent)!.tree, rel);
  if (now === undefined && before === undefined) return false;
  if (now === undefined || before === undefined) return true;
  return now.ref !== before.ref || now.mode !== before.mode || now.kind !== before.kind || now.uid !== before.uid || now.gid !== before.gid;
}
