/** Version control: commit, history, status, diff, revert, undo and the snapshot views. */
import { capItems, LOG_ANSWER_BYTES } from '../search/search.js';
import { formatMode } from '../rpc/protocol.js';
import { entryStat, snapshotIno, tsNs } from './present.js';
import type { PendingPlan } from '../vcs/status.js';
import type { AreaOps, Kit } from './context.js';

export const vcsOps = (k: Kit): AreaOps<'vcs'> => ({
  'vcs.commit': async (p, { cred }) => {
    const scope = k.scope(cred);
    const paths = p.paths?.map((x) => k.scopeRel(cred, scope, x));
    // Hash and write the new trees, and find the changes to take, off the atomic step; a change
    // meanwhile stops the writing or outdates the changes found, so try again (twice). The commit
    // itself finds them in one go if they are still outdated.
    let pending: PendingPlan | undefined;
    for (let attempt = 0; attempt < 3; attempt++) {
      await k.d.vcs.prehash(scope);
      if (!(await k.d.vcs.prepersist(scope))) continue;
      pending = await k.d.vcs.planPending(cred, scope, paths);
      const top = k.d.vcs.scopeDirOrNull(scope);
      if (top !== null && k.d.vcs.cached(top) && top.treeId === pending.work && k.d.vcs.head(scope) === pending.parent)
        break;
    }
    const extra: { paths?: readonly string[]; pending?: PendingPlan } = {};
    if (paths !== undefined) extra.paths = paths;
    if (pending !== undefined) extra.pending = pending;
    return k.d.vcs.commit(cred, scope, p.message, extra);
  },
  'vcs.show': (p, { cred }) => k.d.vcs.show(cred, k.scope(cred), p.rev),
  'vcs.log': (p, { cred }) => {
    const scope = k.scope(cred);
    const opts: { path?: string; limit?: number; cursor?: string } = {};
    if (p.path !== undefined && p.path !== '') opts.path = k.scopeRel(cred, scope, p.path);
    if (p.limit !== undefined) opts.limit = p.limit;
    if (p.cursor !== undefined && p.cursor !== '') opts.cursor = p.cursor;
    // The newest commits that fit one answer; `truncated` says older ones were left out (go on with `next_cursor`).
    const page = k.d.vcs.log(scope, opts, cred);
    const { results, truncated } = capItems(
      page.commits,
      (c) => Buffer.byteLength(JSON.stringify(c)) + 1,
      LOG_ANSWER_BYTES,
    );
    const next = truncated && results.length > 0 ? results[results.length - 1]!.hash : page.next_cursor;
    return {
      commits: results,
      ...(truncated ? { truncated } : {}),
      ...(next === undefined ? {} : { next_cursor: next }),
    };
  },
  'vcs.status': async (p, { cred }) => {
    await k.d.vcs.prehash(k.scope(cred));
    const page: { limit?: number; cursor?: string } = {};
    if (p.limit !== undefined) page.limit = p.limit;
    if (p.cursor !== undefined && p.cursor !== '') page.cursor = p.cursor;
    return await k.d.vcs.status(cred, k.scope(cred), page);
  },
  'vcs.diff': async (p, { cred }) => {
    const scope = k.scope(cred);
    const opts: { from?: string; to?: string; path?: string } = {};
    if (p.from !== undefined && p.from !== '') opts.from = p.from;
    if (p.to !== undefined && p.to !== '') opts.to = p.to;
    if (p.path !== undefined && p.path !== '') opts.path = k.scopeRel(cred, scope, p.path);
    if (opts.to === undefined) await k.d.vcs.prehash(scope);
    const r = await k.d.vcs.diff(cred, scope, opts);
    return r.truncated ? { diff: r.diff, truncated: true } : { diff: r.diff };
  },
  'vcs.revert': async (p, { cred }) => {
    const scope = k.scope(cred);
    await k.d.vcs.prehash(scope);
    return k.d.vcs.revert(
      cred,
      scope,
      p.hash,
      p.paths?.map((x) => k.scopeRel(cred, scope, x)),
    );
  },
  'vcs.undo': async (p, { cred }) => {
    const scope = k.scope(cred);
    await k.d.vcs.prehash(scope);
    return k.d.vcs.undo(cred, scope, p.actor, p.since === '' ? undefined : p.since);
  },
  'vcs.ls': (p, { cred }) => {
    const scope = k.scope(cred);
    const r = k.d.vcs.snapshotList(cred, scope, p.rev, k.scopeRel(cred, scope, p.path ?? '/'));
    return {
      path: r.rel,
      entries: r.entries.map((e) => ({
        name: e.name,
        is_dir: e.kind === 'd',
        is_symlink: e.kind === 'l',
        mode: formatMode(e.mode),
        uid: e.uid,
        gid: e.gid,
        size: e.size,
        modified: r.timestamp,
        inode_id: snapshotIno(e.ref, e.name),
        mtime_ns: tsNs(r.timestamp),
        atime_ns: tsNs(r.timestamp),
        ctime_ns: tsNs(r.timestamp),
      })),
    };
  },
  'vcs.stat': (p, { cred }) => {
    const scope = k.scope(cred);
    const r = k.d.vcs.snapshotStat(cred, scope, p.rev, k.scopeRel(cred, scope, p.path ?? '/'));
    return { ...entryStat(r.entry, r.timestamp, snapshotIno(r.entry.ref, r.entry.name)), path: r.rel };
  },
  'vcs.cat': (p, { ctx, cred }) => {
    const scope = k.scope(cred);
    const r = k.d.vcs.snapshotRead(cred, scope, p.rev, k.scopeRel(cred, scope, p.path));
    ctx.out = r.data;
    return { path: r.rel, size: r.data.length, etag: r.entry.ref };
  },
});
