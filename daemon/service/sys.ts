/** The service's own operations: health, status, process control, the change feeds, gc and fsck. */
import { VERSION } from '../rpc/version.js';
import { VfsError } from '../errors.js';
import { daemonMetrics } from '../metrics.js';
import type { AreaOps, Kit } from './context.js';

export const sysOps = (k: Kit): AreaOps<'sys' | 'events'> => ({
  'sys.health': (_p, { ctx }) => {
    // O(1): counting files and directories would walk every inode (half a second at 1,000,000).
    // Security: a hosted server does not advertise to anonymous callers that it waits for an administrator.
    const hidden = k.hostedRemote(ctx.creds);
    return {
      status: 'ok',
      version: VERSION,
      uptime: Math.floor((Date.now() - k.startedAt) / 1000),
      inodes: k.d.vfs.nodes.size,
      commits: k.d.vcs.countCommits(),
      objects: k.d.vfs.blobs.size + k.d.vcs.countTrees() + k.d.vcs.countCommits(),
      ...(hidden ? {} : { needs_bootstrap: k.d.registry.needsBootstrap() }),
      store: k.d.store.identity(),
    };
  },
  'sys.metrics': () => {
    const m = daemonMetrics;
    const st = k.process('metrics').status();
    return {
      uptime: st.uptime,
      clients: st.clients,
      rpc_in_flight: m.rpcInFlight,
      rpc_requests: m.rpcRequests,
      store_batches: m.storeBatches.snapshot(),
      store_batch_errors: m.storeBatchErrors,
      lease_state: m.state,
      lease_epoch: st.epoch ?? k.d.store.identity().epoch ?? 0,
      takeovers: m.takeovers,
      store_reconnects: m.storeReconnects,
    };
  },
  'sys.ping': () => ({ pong: true, pid: process.pid, store: k.d.store.identity() }),
  'sys.status': () => {
    const p = k.process('status');
    return {
      ...p.status(),
      version: VERSION,
      users: k.d.registry.users.size,
      files: k.d.vfs.counts().files,
      commits: k.d.vcs.countCommits(),
    };
  },
  'sys.hold': (p) => ({ held_by: k.process('hold').hold(p.pid) }),
  'sys.subscribe': (_p, { ctx }) => {
    ctx.subscribe?.();
    return { subscribed: true };
  },
  'events.subscribe': (p, { ctx, cred }) => {
    const { push, conn } = ctx;
    if (push === undefined || conn === undefined)
      throw new VfsError('ENOTSUP', 'events.subscribe', undefined, 'events need a socket connection');
    const key = `${conn.id}:${p.sub}`;
    const r = k.events.subscribe(
      key,
      ctx.creds,
      cred,
      p.since,
      (event) => push({ event: 'feed', data: { sub: p.sub, event } }),
      (end) => push({ event: 'feed', data: { sub: p.sub, end } }),
    );
    conn.onClose(`events:${p.sub}`, () => k.events.unsubscribe(key));
    return r;
  },
  'events.unsubscribe': (p, { ctx }) => {
    if (ctx.conn === undefined) return { unsubscribed: false };
    return { unsubscribed: k.events.unsubscribe(`${ctx.conn.id}:${p.sub}`) };
  },
  'sys.gc': () => {
    k.d.vcs.pruneTrees();
    k.d.vcs.dropOrphanTrees();
    const reachable = k.d.vcs.reachableBlobs();
    for (const id of [...k.d.vfs.blobs.inHistory]) if (!reachable.has(id)) k.d.vfs.blobs.inHistory.delete(id);
    const removed = k.d.vfs.blobs.sweep();
    return { removed, kept: k.d.vfs.blobs.size };
  },
  'sys.fsck': async () => {
    await k.durable();
    const { Vcs } = await import('../vcs/vcs.js');
    const r = await k.d.store.fsck(Vcs.refsOf);
    return { ok: r.problems.length === 0, problems: r.problems, objects: r.objects, inodes: r.inodes };
  },
});
