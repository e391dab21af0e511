/**
 * Version control over the working tree, the facade the daemon holds: commits snapshot a scope
 * ('' = the whole filesystem, or a workspace id for its subtree) as tree objects. The state and the
 * tree walks are `Trees` (trees.ts); each operation lives in its own module beside it.
 */
import type { Cred } from '../core/perms.js';
import type { TreeEntry } from '../core/objects.js';
import type { CommitRecord, StatusResult } from '../rpc/protocol.js';
import { diff } from './diff.js';
import { countCommits, countTrees, dropOrphanTrees, pruneTrees, reachableBlobs } from './gc.js';
import { commit, find, log, show } from './history.js';
import { revert } from './revert.js';
import { undo } from './undo.js';
import { snapshotList, snapshotRead, snapshotStat } from './snapshot.js';
import { planPending, status, type PendingPlan } from './status.js';
import { Trees, type Scope } from './trees.js';

export type { Scope };

export class Vcs extends Trees {
  commit(
    cred: Cred,
    scope: Scope,
    message: string,
    extra: { revert_of?: string; paths?: readonly string[]; pending?: PendingPlan } = {},
  ): CommitRecord {
    return commit(this, cred, scope, message, extra);
  }

  /** The caller's pending changes for a commit, found in slices (see `planPending`). */
  planPending(cred: Cred, scope: Scope, paths?: readonly string[]): Promise<PendingPlan> {
    return planPending(this, cred, scope, paths);
  }

  show(cred: Cred, scope: Scope, rev: string): ReturnType<typeof show> {
    return show(this, cred, scope, rev);
  }

  find(cred: Cred, scope: Scope, rev: string, op = 'revert'): string {
    return find(this, cred, scope, rev, op);
  }

  log(scope: Scope, opts: { path?: string; limit?: number; cursor?: string }, cred: Cred): ReturnType<typeof log> {
    return log(this, scope, opts, cred);
  }

  status(cred: Cred, scope: Scope, page: { limit?: number; cursor?: string } = {}): Promise<StatusResult> {
    return status(this, cred, scope, page);
  }

  diff(
    cred: Cred,
    scope: Scope,
    opts: { from?: string; to?: string; path?: string },
  ): Promise<{ diff: string; truncated: boolean }> {
    return diff(this, cred, scope, opts);
  }

  revert(
    cred: Cred,
    scope: Scope,
    prefix: string,
    paths?: readonly string[],
  ): { hash: string; reverted_to: string; saved: string | null; commit: CommitRecord } {
    return revert(this, cred, scope, prefix, paths);
  }

  undo(cred: Cred, scope: Scope, actor: string, since?: string): ReturnType<typeof undo> {
    return undo(this, cred, scope, actor, since);
  }

  snapshotStat(
    cred: Cred,
    scope: Scope,
    rev: string,
    path: string,
  ): { entry: TreeEntry; timestamp: number; rel: string } {
    return snapshotStat(this, cred, scope, rev, path);
  }

  snapshotList(
    cred: Cred,
    scope: Scope,
    rev: string,
    path: string,
  ): { entries: TreeEntry[]; timestamp: number; rel: string } {
    return snapshotList(this, cred, scope, rev, path);
  }

  snapshotRead(cred: Cred, scope: Scope, rev: string, path: string): { data: Buffer; entry: TreeEntry; rel: string } {
    return snapshotRead(this, cred, scope, rev, path);
  }

  reachableBlobs(): Set<string> {
    return reachableBlobs(this);
  }

  dropOrphanTrees(): number {
    return dropOrphanTrees(this);
  }

  countCommits(): number {
    return countCommits(this);
  }

  countTrees(): number {
    return countTrees(this);
  }

  pruneTrees(): number {
    return pruneTrees(this);
  }
}
