/**
 * A standby keeps its tree current as it follows (docs/deploy.md, Standbys): its warm state after
 * mixed change batches (creates, writes, renames and swaps, deletes, chmod and chown, symlinks,
 * commits and reverts, users and groups, a deep tree) equals what a start loads from the same
 * store, node by node (attributes, places, heights, link counts), blob by blob and commit by
 * commit; and a real standby that takes over after kill -9 serves what a fresh start serves.
 */
import t from 'tap';
import type { Node } from '../../daemon/core/inode.js';
import type { Vfs } from '../../daemon/core/vfs.js';
import { loadTree } from '../../daemon/main.js';
import { PostgresStore } from '../../daemon/store/postgres.js';
import type { Vcs } from '../../daemon/vcs/vcs.js';
import { WarmState } from '../../daemon/warm.js';
import type { Caller } from '../../daemon/rpc/client.js';
import { spawnDaemon, text, type TestDaemon } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

/** Everything a start loads, in a canonical order (node ids, names, blob ids sorted). */
function dump({ vfs, vcs }: { vfs: Vfs; vcs: Vcs }): unknown {
  const nodes = [...vfs.nodes.values()]
    .sort((a, b) => a.id - b.id)
    .map((n: Node) => ({
      id: n.id,
      parent: n.parent?.id ?? null,
      name: n.name,
      kind: n.kind,
      mode: n.mode,
      uid: n.uid,
      gid: n.gid,
      times: [n.atime, n.mtime, n.ctime, n.btime].map(String),
      ...(n.kind === 'file' ? { blob: n.blob, size: n.size } : {}),
      ...(n.kind === 'symlink' ? { target: n.target } : {}),
      ...(n.kind === 'directory'
        ? { height: n.height, subdirs: n.subdirs, entries: [...n.children.keys()].sort() }
        : {}),
      linked: n.parent === null ? n === vfs.root : n.parent.children.get(n.name) === n,
    }));
  const blobs = [...vfs.blobs.ids()].sort().map((id) => ({
    id,
    bytes: vfs.blobs.get(id).length,
    working: vfs.blobs.inWorkingTree(id),
    history: vfs.blobs.inHistory.has(id),
  }));
  return {
    root: vfs.root.id,
    nodes,
    blobs,
    inHistory: [...vfs.blobs.inHistory].sort(),
    trees: [...vcs.trees.keys()].sort(),
    persisted: [...vcs.persisted].sort(),
    commits: [...vcs.commits.keys()].sort(),
    refs: [...vcs.refs].sort(),
  };
}

/** One round of mixed changes through the active daemon (`r`: the round, so that each differs). */
async function changes(root: Caller, r: number): Promise<void> {
  const base = `/w${r}`;
  const files = Array.from({ length: 40 }, (_, i) => `${base}/d${i % 4}/f${i}.md`);
  await Promise.all(files.map((p, i) => root.call('fs.write', { path: p, parents: true }, text(`r${r} ${i}`))));
  let deep = `${base}/deep`;
  for (let i = 0; i < 30; i++) deep += `/l${i}`;
  await root.call('fs.write', { path: `${deep}/bottom.md`, parents: true }, text(`deep ${r}`));
  await root.call('fs.write', { path: files[0]!, parents: true }, text(`overwritten ${r}`));
  await root.call('fs.write', { path: files[1]! }, text(`r${r} 0`)); // the same content as another file
  await root.call('fs.symlink', { target: files[2]!, path: `${base}/link` });
  await root.call('fs.chmod', { path: files[3]!, mode: '0600' });
  await root.call('fs.chmod', { path: `${base}/d1`, mode: '2775' });
  await root.call('admin.userAdd', { name: `u${r}` });
  await root.call('admin.groupAdd', { name: `g${r}` });
  await root.call('admin.groupMemberAdd', { user: `u${r}`, group: `g${r}` });
  await root.call('fs.chown', { path: files[4]!, owner: `u${r}`, group: `g${r}` });
  const first = await root.call('vcs.commit', { message: `round ${r}` });
  // Swap two files' names, move a directory below another, delete a file and a subtree.
  await root.call('fs.move', { src: files[5]!, dst: `${base}/tmp.md` });
  await root.call('fs.move', { src: files[6]!, dst: files[5]! });
  await root.call('fs.move', { src: `${base}/tmp.md`, dst: files[6]! });
  await root.call('fs.move', { src: `${base}/d2`, dst: `${base}/d3/d2` });
  await root.call('fs.move', { src: `${base}/deep/l0/l1`, dst: `${base}/shallow` });
  await root.call('fs.delete', { path: files[7]! });
  await root.call('fs.delete', { path: `${base}/d0`, recursive: true });
  await root.call('vcs.commit', { message: `round ${r}, moved` });
  if (r > 0) {
    await root.call('fs.delete', { path: `/w${r - 1}`, recursive: true });
    await root.call('admin.userDel', { name: `u${r - 1}` });
  }
  await root.call('vcs.revert', { hash: first.hash, paths: [`${base}/d1`] });
  await root.call('sys.gc', {});
  await root.call('fs.write', { path: `${base}/pending.md` }, text('not committed'));
}

t.test('after mixed batches, the warm state equals a fresh load of the same store', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const active = await spawnDaemon(t, { SERVICE_STORE: url });
  const root = active.client.as({});
  await root.call('fs.write', { path: '/before.md' }, text('written before the standby started'));
  const standby = await PostgresStore.connect(url);
  t.teardown(() => standby.close());
  t.equal(await standby.tryLead(), false, 'the daemon holds the lease');
  const warm = new WarmState(1 << 30, standby);
  await standby.follow(warm);
  // As a standby daemon does: polling the lease keeps its connection busy.
  const leased = standby.waitForLease();
  leased.catch(() => undefined);
  standby.onFatal = (err) => t.error(err, 'the standby follows without failing');
  // Only read from: its lease connection, never used, is ended when idle (which is no matter here).
  const fresh = await PostgresStore.connect(url);
  fresh.onFatal = () => undefined;
  t.teardown(() => fresh.close());
  const caughtUp = async (): Promise<void> => {
    const { committed_seq } = await active.client.call('sys.status', {});
    await until(() => standby.leaseStatus().applied >= committed_seq!, 'the standby to apply every batch');
  };
  for (let r = 0; r < 4; r++) {
    await changes(root, r);
    await caughtUp();
    const loaded = loadTree(fresh, await fresh.load(), 1 << 30, 'test');
    t.same(dump(warm), dump(loaded), `round ${r}: the warm state is what a start loads`);
  }
  t.ok(warm.vfs.root.height > 30, `the deep tree is there (height ${warm.vfs.root.height})`);
  // The pending attribution is followed too (written, and removed by a commit of a subtree): taking over reads none of it.
  await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      root.call('fs.write', { path: `/pend/${i % 2 === 0 ? 'a' : 'b'}/f${i}.md`, parents: true }, text(`${i}`)),
    ),
  );
  await root.call('vcs.commit', { message: 'a only', paths: ['/pend/a'] });
  await caughtUp();
  const marks = await fresh.markRows();
  t.ok(marks.size > 0, `${marks.size} paths have pending changes`);
  await active.kill('SIGKILL');
  await leased;
  t.same(
    [...((await standby.takeover(true)) ?? [])].sort(),
    [...marks].sort(),
    'the followed pending attribution is what the store holds',
  );
});

/** What a daemon serves: every entry (stat and content), the log, users and groups. */
async function served(d: TestDaemon): Promise<unknown> {
  const root = d.client.as({});
  const { results } = await root.call('search.find', { path: '/' });
  const entries = [];
  for (const p of [...results].sort()) {
    const st = await root.call('fs.stat', { path: p, nofollow: true });
    const data = st.kind === 'file' ? (await root.request('fs.read', { path: p })).data.toString('base64') : undefined;
    entries.push({ p, st, data });
  }
  return {
    entries,
    log: await root.call('vcs.log', {}),
    users: await root.call('admin.userList', {}),
    groups: await root.call('admin.groupList', {}),
    status: await root.call('vcs.status', {}),
  };
}

t.test('a standby that takes over after kill -9 serves what a fresh start serves', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const active = await spawnDaemon(t, { SERVICE_STORE: url });
  const standby = await spawnDaemon(t, { SERVICE_STORE: url });
  for (let r = 0; r < 3; r++) await changes(active.client.as({}), r);
  const { committed_seq } = await active.client.call('sys.status', {});
  await until(
    async () => ((await standby.client.call('sys.status', {})).applied_seq ?? 0) >= committed_seq!,
    'the standby to apply every batch',
  );
  await active.kill('SIGKILL');
  await until(async () => (await standby.client.call('sys.status', {})).role === 'active', 'the standby to take over');
  const took = await served(standby);
  t.same((await standby.client.call('sys.fsck', {})).problems, [], 'fsck clean after the takeover');
  await standby.kill('SIGTERM');
  await active.restart(); // the only daemon left: it loads the store afresh
  await until(async () => (await active.client.call('sys.status', {})).role === 'active', 'a fresh start');
  t.same(took, await served(active), 'the taken-over daemon served what a fresh start serves');
});
