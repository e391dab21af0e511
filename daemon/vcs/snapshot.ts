/** Read-only views of a commit's tree (the mount's `.history/<commit>/`). */
import { VfsError } from '../errors.js';
import { components } from '../core/paths.js';
import { isAdminCred, type Cred } from '../core/perms.js';
import type { CommitObject, TreeEntry } from '../core/objects.js';
import { find } from './history.js';
import { visibleIn, visibleNow } from './status.js';
import type { Scope, Trees } from './trees.js';

function snapshotEntry(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
  path: string,
): { entry: TreeEntry; commit: CommitObject; rel: string } {
  const id = find(v, cred, scope, rev, 'history');
  const commit = v.commits.get(id)!;
  const rel = '/' + components(path.startsWith('/') ? path : '/' + path).join('/');
  // Security: the caller must be allowed to read the path now (a chmod today also closes its past)
  // and could have read it as the commit recorded it; checked before existence (no oracle).
  if (!isAdminCred(cred) && (!visibleNow(v, cred, scope, rel) || !visibleIn(v, cred, commit.tree, rel)))
    throw new VfsError('EACCES', 'history', rel);
  const entry = v.entryAt(commit.tree, rel);
  if (entry === undefined) throw new VfsError('ENOENT', 'history', rel);
  return { entry, commit, rel };
}

export function snapshotStat(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
  path: string,
): { entry: TreeEntry; timestamp: number; rel: string } {
  const { entry, commit, rel } = snapshotEntry(v, cred, scope, rev, path);
  return { entry, timestamp: commit.timestamp, rel };
}

export function snapshotList(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
  path: string,
): { entries: TreeEntry[]; timestamp: number; rel: string } {
  const { entry, commit, rel } = snapshotEntry(v, cred, scope, rev, path);
  if (entry.kind !== 'd') throw new VfsError('ENOTDIR', 'history', rel);
  return { entries: v.trees.get(entry.ref) ?? [], timestamp: commit.timestamp, rel };
}

export function snapshotRead(
  v: Trees,
  cred: Cred,
  scope: Scope,
  rev: string,
  path: string,
): { data: Buffer; entry: TreeEntry; rel: string } {
  const { entry, rel } = snapshotEntry(v, cred, scope, rev, path);
  if (entry.kind === 'd') throw new VfsError('EISDIR', 'history', rel);
  if (entry.kind === 'l') throw new VfsError('EINVAL', 'history', rel, 'a symbolic link');
  return { data: v.vfs.blobs.get(entry.ref), entry, rel };
}
