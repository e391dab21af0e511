/**
 * One request must not stall the daemon for everyone (issue 12, item 6): while a huge diff or a
 * huge recursive delete runs for one client, another client's small read is answered (it completes
 * before the heavy request does; no wall-clock limit). The heavy requests stay correct: the diff
 * names every changed file (and is cut with a marker past its size bound), the delete removes
 * everything, and the store still loads after a restart.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { GrepPool, grepFiles } from '../../daemon/search/search.js';
import { InodeTable } from '../../daemon/core/inode-table.js';
import { encodeFrame, encodeReplySliced, ENCODE_SLICE_CHARS, ENCODE_SLICE_ITEMS } from '../../daemon/rpc/framing.js';
import type { Cred } from '../../daemon/core/perms.js';
import { configFromEnv, openCore } from '../../daemon/main.js';
import { Vcs } from '../../daemon/vcs/vcs.js';
import { connectSocket, type Caller } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { spawnDaemon } from '../helpers/daemon.js';

const d = await spawnDaemon(t, { SERVICE_FSYNC: 'off' });
const root = d.client.as({});

async function fill(c: Caller, paths: string[], body: (p: string) => string): Promise<void> {
  for (let s = 0; s < paths.length; s += 500)
    await Promise.all(
      paths.slice(s, s + 500).map((p) => c.call('fs.write', { path: p }, { data: Buffer.from(body(p)) })),
    );
}

/**
 * Starts `heavy` on the shared connection, then (once the daemon has had time to take it up) a
 * stat from a second connection; says which answered first.
 */
async function race<T>(heavy: () => Promise<T>): Promise<{ smallFirst: boolean; result: T }> {
  const other = await connectSocket(socketPathFor(d.dataDir));
  try {
    await other.call('fs.stat', { path: '/tmp' }); // connected and warm
    const order: string[] = [];
    const h = heavy().then((r) => {
      order.push('heavy');
      return r;
    });
    await new Promise((r) => setTimeout(r, 5));
    const s = other.call('fs.stat', { path: '/tmp' }).then(() => order.push('small'));
    const [result] = await Promise.all([h, s]);
    return { smallFirst: order[0] === 'small', result };
  } finally {
    other.close();
  }
}

const lines = (p: string, tag: string): string =>
  Array.from({ length: 40 }, (_, i) => `${p} line ${i}${i === 20 ? ` ${tag}` : ''}`).join('\n') + '\n';

void t.test('a small read is answered while a diff of 3,000 changed files runs', async (t) => {
  const files = Array.from(
    { length: 3000 },
    (_, i) => `/srv/diff/d${String(i % 30).padStart(2, '0')}/f${String(i).padStart(4, '0')}.md`,
  );
  await fill(root, files, (p) => lines(p, 'old'));
  await root.call('vcs.commit', { message: 'base' });
  await fill(root, files, (p) => lines(p, 'new'));
  const { smallFirst, result } = await race(() => root.call('vcs.diff', {}));
  t.ok(smallFirst, 'the stat answered before the diff finished');
  t.equal(result.truncated, undefined, 'not cut');
  const named = result.diff.match(/^\+\+\+ b\/.*$/gm) ?? [];
  t.same(named.map((l) => `/${l.slice(6)}`).sort(), [...files].sort(), 'every changed file is in the diff once');
  t.equal((result.diff.match(/^\+.* new$/gm) ?? []).length, 3000, 'with its changed line');
});

void t.test('a diff past its size bound is cut with a clear marker', async (t) => {
  const big = Array.from({ length: 6 }, (_, i) => `/srv/bigdiff/b${i}.md`);
  await fill(root, big, (p) => `${p}\n`.repeat(40000));
  const r = await root.call('vcs.diff', { path: '/srv/bigdiff' });
  t.equal(r.truncated, true);
  t.match(r.diff, /\[diff truncated: the output is limited to 4194304 bytes; \d+ of 6 changed files not shown/);
  t.ok(Buffer.byteLength(r.diff) <= 4 * 1024 * 1024 + 1024, 'within the bound');
  await root.call('fs.delete', { path: '/srv/bigdiff', recursive: true });
});

void t.test('a small read is answered while a recursive delete of 60,000 entries runs', async (t) => {
  const files = Array.from({ length: 60000 }, (_, i) => `/srv/del/sub${i % 3}/f${String(i).padStart(5, '0')}.md`);
  await fill(root, files, (p) => p);
  const { smallFirst, result } = await race(() => root.call('fs.delete', { path: '/srv/del', recursive: true }));
  t.ok(smallFirst, 'the stat answered before the delete finished');
  t.equal(result.deleted, 60004, 'every entry (and the four directories) deleted');
  await t.rejects(root.call('fs.stat', { path: '/srv/del' }), { code: 'ENOENT' });
  await d.kill('SIGTERM');
  await d.restart();
  await t.rejects(d.client.call('fs.stat', { path: '/srv/del' }), { code: 'ENOENT' }, 'still gone after a restart');
  const fsck = await d.client.call('sys.fsck', {});
  t.same(fsck.problems, [], 'and the store is consistent');
});

// ---------- in-process: the sliced parts of grep and commit stay exact under concurrent changes ----------

type Core = ReturnType<typeof openCore>;
type Pauser = () => () => Promise<void> | undefined;

/** A core on its own store in a fresh directory, and root's credential. */
function inProcess(t: Test, dataDir = path.join(t.testdir(), 'data')): { core: Core; root: Cred; dataDir: string } {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const core = openCore({ ...configFromEnv({ SERVICE_FSYNC: 'off' }), dataDir });
  t.teardown(() => {
    core.store.close();
    core.grep.close();
  });
  return { core, root: core.registry.authenticate({}, { anonymous: 'root', userAuth: true }), dataDir };
}

/** A pause function that yields at every check and runs `during(k)` in the k-th yield (from 0). */
function everyCheck(during: (k: number) => void): { pauser: Pauser; yields: () => number } {
  let k = 0;
  const pauser: Pauser = () => () =>
    new Promise<void>((resolve) =>
      setImmediate(() => {
        during(k++);
        resolve();
      }),
    );
  return { pauser, yields: () => k };
}

const id = (p: string): string => p;
const summary = (files: { path: string; id: string; len: number }[]): string[] =>
  files.map((f) => `${f.path} ${f.id} ${f.len}`);

void t.test(
  'grep collects its files in slices, and a change meanwhile is collected again (a snapshot of one moment)',
  async (t) => {
    const { core, root } = inProcess(t);
    const w = (p: string, s: string): void => void core.vfs.write(root, p, Buffer.from(s));
    for (let i = 0; i < 2000; i++)
      w(`/g/d${String(i % 20).padStart(2, '0')}/f${String(i).padStart(4, '0')}.md`, `note ${i}\n`);
    const before = await grepFiles(core.vfs, root, '/g', true, id, false);
    t.equal(before.length, 2000);
    // In the first yield (after 256 files, all of /g/d00 and more): change a file already collected,
    // add one where the walk has been and remove one it has not reached yet.
    const { pauser, yields } = everyCheck((k) => {
      if (k !== 0) return;
      w('/g/d00/f0000.md', 'changed while grep collected\n');
      w('/g/d00/new.md', 'created while grep collected\n');
      core.vfs.remove(root, '/g/d19/f1999.md', false);
    });
    const got = await grepFiles(core.vfs, root, '/g', true, id, true, pauser);
    t.ok(yields() > 1, 'the collection yielded the event loop');
    const after = await grepFiles(core.vfs, root, '/g', true, id, false);
    t.same(summary(got), summary(after), 'identical to a collection in one go after the change');
    t.not(summary(got).join('\n'), summary(before).join('\n'), 'which differs from before it');
    t.ok(
      got.some((f) => f.path === '/g/d00/new.md'),
      'the new file is there',
    );
    t.notOk(
      got.some((f) => f.path === '/g/d19/f1999.md'),
      'the removed one is not',
    );
    const pool = new GrepPool(1, 600000); // no time bound that a loaded machine could hit
    t.teardown(() => pool.close());
    const hits = await pool.run({ pattern: 'changed while', flags: 'u', max: 100, offset: 0, files: got }, 'test');
    t.same(
      hits.results.map((r) => r.file),
      ['/g/d00/f0000.md'],
      'and the search reads the new content',
    );
  },
);

void t.test('grep under changes in every slice falls back to one go after three attempts, still exact', async (t) => {
  const { core, root } = inProcess(t);
  const w = (p: string, s: string): void => void core.vfs.write(root, p, Buffer.from(s));
  for (let i = 0; i < 1000; i++) w(`/h/d${i % 4}/f${String(i).padStart(4, '0')}.md`, `n ${i}\n`);
  const { pauser, yields } = everyCheck((k) => w(`/h/d0/churn${k}.md`, `churn ${k}\n`));
  const got = await grepFiles(core.vfs, root, '/h', true, id, true, pauser);
  t.equal(yields(), 3 * Math.floor(1003 / 256), 'three sliced attempts (each cut short by a change), then one go');
  t.same(
    summary(got),
    summary(await grepFiles(core.vfs, root, '/h', true, id, false)),
    'identical to a collection in one go',
  );
});

void t.test('a commit counts its changes as the full list would, for adds, deletes, kinds and modes', async (t) => {
  const { core, root } = inProcess(t);
  const scope = { id: '', root: '/' };
  const w = (p: string, s: string): void => void core.vfs.write(root, p, Buffer.from(s));
  const steps: (() => void)[] = [
    () => {
      for (let i = 0; i < 300; i++) w(`/c/d${i % 7}/s${i % 3}/f${i}.md`, `v1 ${i}`);
      core.vfs.mkdir(root, '/c/empty', {});
    },
    () => {
      w('/c/d1/s0/f0.md', 'v2');
      core.vfs.remove(root, '/c/d2', true);
      core.vfs.chmod(root, '/c/d3', 0o700);
      core.vfs.mkdir(root, '/c/empty/inner', {});
    },
    () => {
      core.vfs.remove(root, '/c/d4/s1', true);
      w('/c/d4/s1', 'a file where a directory was');
      core.vfs.symlink(root, 'd1', '/c/link');
      core.vfs.move(root, '/c/d5', '/c/moved');
    },
    () => core.vfs.remove(root, '/c', true),
  ];
  let prev = core.vcs.head(scope);
  for (const [i, step] of steps.entries()) {
    step();
    await core.vcs.prehash(scope);
    await core.vcs.prepersist(scope);
    const rec = core.vcs.commit(root, scope, `step ${i}`);
    const head = core.vcs.head(scope)!;
    const parentTree = prev === null ? emptyTreeOf(core) : core.vcs.commits.get(prev)!.tree;
    const listed = core.vcs.listChanges(parentTree, core.vcs.commits.get(head)!.tree);
    t.ok(listed.length > 0, `step ${i} changed something`);
    t.equal(rec.changes, listed.length, `step ${i}: ${listed.length} changes counted`);
    prev = head;
  }
});

/** The id of the empty tree (the parent tree of a first commit). */
function emptyTreeOf(core: Core): string {
  for (const [tid, entries] of core.vcs.trees) if (entries.length === 0) return tid;
  throw new Error('no empty tree');
}

void t.test(
  'trees written ahead of a commit: a change meanwhile is in the commit, and the store stays whole',
  async (t) => {
    const { core, root, dataDir } = inProcess(t);
    const scope = { id: '', root: '/' };
    const w = (p: string, s: string): void => void core.vfs.write(root, p, Buffer.from(s));
    for (let i = 0; i < 500; i++) w(`/p/d${i % 50}/f${i}.md`, `first ${i}`);
    core.vcs.commit(root, scope, 'base');
    for (let i = 0; i < 500; i++) w(`/p/e${i % 50}/g${i}.md`, `second ${i}`);
    await core.vcs.prehash(scope);
    const { pauser, yields } = everyCheck((k) => {
      if (k !== 5) return;
      w('/p/e0/g0.md', 'changed while the trees were written');
      core.vfs.remove(root, '/p/e1', true); // its tree may be written already, or not yet
    });
    t.equal(await core.vcs.prepersist(scope, pauser), false, 'a change stops the writing ahead');
    t.equal(yields(), 6, 'the trees were written in slices, up to the change');
    // gc between the trees written ahead and the commit must not take the blobs those trees hold
    await core.service.handlers['sys.gc']({ creds: {}, data: undefined }, {});
    const rec = core.vcs.commit(root, scope, 'second');
    t.equal(rec.changes, 500 - 10, 'every new file but those of the removed directory');
    const head = core.vcs.head(scope)!;
    t.equal(core.vcs.commits.get(head)!.tree, core.vcs.treeOf(core.vfs.root), 'the commit is the tree as it is now');
    t.equal(
      core.vcs.snapshotRead(root, scope, rec.hash, '/p/e0/g0.md').data.toString(),
      'changed while the trees were written',
    );
    // the working tree moves on: history must still hold what the commit recorded
    w('/p/e49/g49.md', 'later'); // its directory's tree was written ahead (the walk takes the last first)
    await core.service.handlers['sys.gc']({ creds: {}, data: undefined }, {});
    t.equal(
      core.vcs.snapshotRead(root, scope, rec.hash, '/p/e49/g49.md').data.toString(),
      'second 49',
      'a blob only history holds is kept',
    );
    await core.store.durable();
    t.same(core.store.fsck(Vcs.refsOf).problems, [], 'fsck finds nothing wrong');
    core.store.close();
    core.grep.close();
    const again = inProcess(t, dataDir);
    t.equal(
      again.core.vcs.snapshotRead(again.root, scope, rec.hash, '/p/e0/g0.md').data.toString(),
      'changed while the trees were written',
      'and after a reopen',
    );
  },
);

void t.test(
  'gc drops trees written ahead for a commit that lost a race, but not while trees are being written ahead',
  async (t) => {
    const { core, root, dataDir } = inProcess(t);
    const scope = { id: '', root: '/' };
    const w = (p: string, s: string): void => void core.vfs.write(root, p, Buffer.from(s));
    const gc = async (): Promise<unknown> => await core.service.handlers['sys.gc']({ creds: {}, data: undefined }, {});
    for (let i = 0; i < 200; i++) w(`/q/d${i % 20}/f${i}.md`, `first ${i}`);
    core.vcs.commit(root, scope, 'base');
    const committed = core.vcs.countTrees();
    for (let i = 0; i < 200; i++) w(`/q/e${i % 20}/g${i}.md`, `only ahead ${i}`);
    await core.vcs.prehash(scope);
    t.equal(await core.vcs.prepersist(scope), true, 'every new tree written ahead');
    t.ok(core.vcs.countTrees() > committed, 'the store holds them');
    // The commit loses the race: the new files go before it is made.
    core.vfs.remove(root, '/q', true);
    w('/q/d0/f0.md', 'first 0');
    await gc();
    t.equal(core.vcs.countTrees(), committed, 'gc dropped every tree no commit reaches');

    // A gc while trees are being written ahead drops none of them (they are for the commit to come;
    // its pruning of cached trees may make the writing ahead stop early, and the commit writes the rest).
    for (let i = 0; i < 200; i++) w(`/q/h${i % 20}/k${i}.md`, `next ${i}`);
    await core.vcs.prehash(scope);
    let before = -1;
    let during = -1;
    const { pauser } = everyCheck((k) => {
      if (k !== 2) return;
      before = core.vcs.countTrees();
      void gc().then(() => (during = core.vcs.countTrees()));
    });
    await core.vcs.prepersist(scope, pauser);
    await gc();
    t.ok(before > committed, 'trees were written ahead before the gc');
    t.ok(during >= before, 'the gc during the writing ahead dropped none of them');
    const rec = core.vcs.commit(root, scope, 'next');
    const written = core.vcs.countTrees();
    await gc();
    t.equal(core.vcs.countTrees(), written, 'gc keeps every tree the history reaches');
    t.equal(core.vcs.snapshotRead(root, scope, rec.hash, '/q/h7/k7.md').data.toString(), 'next 7');
    t.equal(core.vcs.snapshotRead(root, scope, rec.hash, '/q/d0/f0.md').data.toString(), 'first 0');
    await core.store.durable();
    t.same(core.store.fsck(Vcs.refsOf).problems, [], 'fsck finds nothing wrong');
    core.store.close();
    core.grep.close();
    const again = inProcess(t, dataDir);
    t.equal(again.core.vcs.countTrees(), written, 'the dropped trees are gone from disk too');
  },
);

void t.test('a listing page of 10,000 entries is encoded in slices, into the bytes of JSON.stringify', async (t) => {
  const { core, root } = inProcess(t);
  core.vfs.mkdir(root, '/wide', {});
  for (let i = 0; i < 10001; i++) core.vfs.write(root, `/wide/é${i}.md`, Buffer.from(`${i}`)); // a non-ASCII name: UTF-8 lengths
  const page = await core.service.handlers['fs.list']({ creds: {}, data: undefined }, { path: '/wide' });
  t.equal(page.entries.length, 10000);
  t.equal(page.truncated, true);
  const { pauser, yields } = everyCheck(() => undefined);
  const encoded = await encodeReplySliced(7, page, pauser);
  t.ok(encoded !== undefined, 'sliced');
  t.equal(yields(), 10000 / ENCODE_SLICE_ITEMS, 'a turn of the event loop per slice of entries');
  const sliced = Buffer.concat(encodeFrame(encoded));
  t.ok(
    sliced.equals(Buffer.concat(encodeFrame({ id: 7, result: page }))),
    'the same frame, byte for byte, as one JSON.stringify',
  );
  const small = await core.service.handlers['fs.list'](
    { creds: {}, data: undefined },
    { path: '/wide', limit: ENCODE_SLICE_ITEMS },
  );
  t.equal(await encodeReplySliced(8, small, pauser), undefined, 'a small result is encoded in one go');
  t.equal(yields(), 10000 / ENCODE_SLICE_ITEMS, 'without a yield');
});

void t.test('a long string in a reply (a diff) is encoded in slices, surrogate pairs and escapes intact', async (t) => {
  // a pair astride each slice boundary, a lone surrogate, quotes, backslashes, control characters
  const unit = `${'x'.repeat(ENCODE_SLICE_CHARS - 1)}😀 "q" \\ \t\u0001 \ud800 é\n`;
  const result = { diff: unit.repeat(6), truncated: false, note: undefined };
  const { pauser, yields } = everyCheck(() => undefined);
  const encoded = await encodeReplySliced(3, result, pauser);
  t.ok(encoded !== undefined, 'sliced');
  t.ok(yields() >= 6, 'a turn per slice');
  t.ok(
    Buffer.concat(encodeFrame(encoded)).equals(Buffer.concat(encodeFrame({ id: 3, result }))),
    'the same frame, byte for byte, as one JSON.stringify',
  );
});

void t.test('the inode table: sharded Maps that behave as one', (t) => {
  const table = new InodeTable();
  const ref = new Map<number, unknown>();
  const { core, root } = inProcess(t);
  const { node } = core.vfs.write(root, '/one.md', Buffer.from('x'));
  // ids over many shards, including ids past 2^31 (no bitwise arithmetic on ids)
  const ids = [...Array.from({ length: 5000 }, (_, i) => i * 7 + 1), 2 ** 31 + 5, 2 ** 40 + 1];
  for (const id of ids) {
    table.set(id, node);
    ref.set(id, node);
  }
  table.set(8, node); // again: no new entry
  ref.set(8, node);
  for (const id of [1, 15, 2 ** 31 + 5, 999999]) t.equal(table.delete(id), ref.delete(id), `delete ${id}`);
  t.equal(table.size, ref.size);
  t.equal([...table.values()].length, ref.size, 'values() visits every entry once');
  t.ok(
    ids.every((id) => (table.get(id) === undefined) === !ref.has(id)),
    'get agrees with a Map',
  );
  t.end();
});
