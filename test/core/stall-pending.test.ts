/**
 * Status, diff and commit with many pending changes must not stall the daemon (issue 30, item 4):
 * while alice's status, diff or commit of 20,000 pending files runs, another client's small read is
 * answered (it completes before the heavy request does; no wall-clock limit), and bob, who may see
 * none of those files, gets his status without a walk over them. The answers stay exact: a status
 * is paged (`truncated`, `more`, `next_cursor`), the diff names every file, the commit takes every
 * change, and a change made while they run is either in them or left for the next one.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { Cred } from '../../daemon/core/perms.js';
import { configFromEnv, openCore } from '../../daemon/main.js';
import { connectSocket, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { diff } from '../../daemon/vcs/diff.js';
import { pendingStats, planPending, status } from '../../daemon/vcs/status.js';
import { makePersonas, spawnDaemon, text } from '../helpers/daemon.js';

const FILES = 20000;
const fileOf = (i: number): string =>
  `/home/alice/p/d${String(i % 100).padStart(2, '0')}/f${String(i).padStart(5, '0')}.md`;
const all = Array.from({ length: FILES }, (_, i) => fileOf(i));
const body = (p: string, tag: string): string => `${p}\n${tag}\n`;

// ---------- through a real daemon ----------

void t.test('through the socket: status, diff and commit of 20,000 pending files leave room for others', async (t) => {
  const d = await spawnDaemon(t, { SERVICE_FSYNC: 'off' });
  const p = await makePersonas(d.client);
  await p.root.call('vcs.commit', { message: 'the homes' });
  for (let s = 0; s < FILES; s += 500)
    await Promise.all(all.slice(s, s + 500).map((f) => p.alice.call('fs.write', { path: f }, text(body(f, 'v1')))));
  await p.bob.call('fs.write', { path: 'mine.md' }, text('bob\n')); // one change bob may see
  await p.alice.call('vcs.status', { limit: 1 }); // the working tree is hashed once: what follows is the walk

  /** Starts `heavy`, then (once the daemon has had time to take it up) `small` on a second connection; which answered first. */
  async function race<T>(
    heavy: () => Promise<T>,
    small: (c: DaemonClient) => Promise<unknown>,
  ): Promise<{ smallFirst: boolean; result: T }> {
    const other = await connectSocket(socketPathFor(d.dataDir));
    try {
      await other.call('fs.stat', { path: '/tmp' }); // connected and warm
      const order: string[] = [];
      const h = heavy().then((r) => {
        order.push('heavy');
        return r;
      });
      await new Promise((r) => setTimeout(r, 5));
      const s = small(other).then(() => order.push('small'));
      const [result] = await Promise.all([h, s]);
      return { smallFirst: order[0] === 'small', result };
    } finally {
      other.close();
    }
  }
  const stat = (c: DaemonClient): Promise<unknown> => c.call('fs.stat', { path: '/tmp' });

  await t.test("a small read is answered while alice's status runs; the status is paged", async (t) => {
    const { smallFirst, result } = await race(() => p.alice.call('vcs.status', {}), stat);
    t.ok(smallFirst, 'the stat answered before the status finished');
    t.equal(result.added.length, 10000, 'the first page lists 10,000 changes');
    t.equal(result.truncated, true);
    t.equal(result.more, FILES - 10000, 'and counts the rest');
    t.type(result.next_cursor, 'string');
    const next = await p.alice.call('vcs.status', { cursor: result.next_cursor! });
    t.equal(next.truncated, undefined, 'the second page is the last');
    t.same([...result.added, ...next.added], [...all].sort(), 'the two pages list every file once, in path order');
    const small = await p.alice.call('vcs.status', { limit: 3, cursor: result.next_cursor! });
    t.same(small.added, next.added.slice(0, 3), 'a smaller page starts at the same place');
    t.equal(small.more, FILES - 10000 - 3);
  });

  await t.test("bob's status, asked while alice's runs, is answered first: he sees none of her files", async (t) => {
    const { smallFirst } = await race(
      () => p.alice.call('vcs.status', {}),
      async (c) => {
        const bob = c.as({ authorization: 'User bob' });
        const st = await bob.call('vcs.status', {});
        t.same(st.added, ['/home/bob/mine.md'], 'bob sees his own change only');
      },
    );
    t.ok(smallFirst, "bob's status answered before alice's");
  });

  await t.test("a small read is answered while alice's diff runs; every file is in it", async (t) => {
    const { smallFirst, result } = await race(() => p.alice.call('vcs.diff', {}), stat);
    t.ok(smallFirst, 'the stat answered before the diff finished');
    t.equal(result.truncated, undefined, 'not cut');
    const named = (result.diff.match(/^\+\+\+ b\/.*$/gm) ?? []).map((l) => `/${l.slice(6)}`);
    t.same(named, [...all].sort(), 'every file once, in path order');
  });

  await t.test("a small read is answered while alice's commit runs; it takes her changes only", async (t) => {
    const { smallFirst, result } = await race(() => p.alice.call('vcs.commit', { message: 'many' }), stat);
    t.ok(smallFirst, 'the stat answered before the commit finished');
    t.equal(result.changes, FILES, 'every one of her files');
    t.ok((await p.alice.call('vcs.status', {})).clean, 'alice has nothing left to commit');
    t.same((await p.bob.call('vcs.status', {})).added, ['/home/bob/mine.md'], "bob's change is still pending");
  });
});

// ---------- in-process: the walks yield, skip what the caller cannot see, and stay exact ----------

type Core = ReturnType<typeof openCore>;
type Pauser = () => () => Promise<void> | undefined;
const scope = { id: '', root: '/' };

/** A core on its own store, with alice and bob, and alice's 20,000 pending files. */
async function withPending(t: Test): Promise<{ core: Core; alice: Cred; bob: Cred; root: Cred }> {
  const dataDir = path.join(t.testdir(), 'data');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const core = openCore({ ...configFromEnv({ SERVICE_FSYNC: 'off' }), dataDir });
  t.teardown(() => {
    core.store.close();
    core.grep.close();
  });
  const auth = (authorization?: string): Cred =>
    core.registry.authenticate(authorization === undefined ? {} : { authorization }, {
      anonymous: 'root',
      userAuth: true,
    });
  const root = auth();
  for (const name of ['alice', 'bob'])
    await core.service.handlers['admin.userAdd']({ creds: {}, data: undefined }, { name });
  const alice = auth('User alice');
  core.vcs.commit(root, scope, 'the homes');
  for (const f of all) core.vfs.write(alice, f, Buffer.from(body(f, 'v1')));
  return { core, alice, bob: auth('User bob'), root };
}

/** A pause function that yields at every check and runs `during(k)` in the k-th yield (from 0). */
function everyCheck(during: (k: number) => void = () => undefined): { pauser: Pauser; yields: () => number } {
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

void t.test("status walks alice's changes in slices, and skips them whole for bob", async (t) => {
  const { core, alice, bob } = await withPending(t);
  await core.vcs.prehash(scope);
  pendingStats.examined = 0;
  const b = await status(core.vcs, bob, scope);
  t.ok(b.clean, 'bob sees nothing to commit');
  t.ok(pendingStats.examined < 10, `bob's status looked at ${pendingStats.examined} entries, not at alice's files`);
  pendingStats.examined = 0;
  const { pauser, yields } = everyCheck();
  const a = await status(core.vcs, alice, scope, {}, pauser);
  t.ok(pendingStats.examined >= FILES, "alice's looked at each of her changes");
  t.ok(yields() >= FILES, 'and could yield the event loop between them');
  t.equal(a.added.length, 10000);
  t.equal(a.more, FILES - 10000);
});

void t.test('a commit takes the changes found ahead, or finds them again if the tree changed meanwhile', async (t) => {
  const { core, alice, bob } = await withPending(t);
  core.vfs.write(bob, '/home/bob/b.md', Buffer.from('bob\n'));
  await core.vcs.prehash(scope);
  await core.vcs.prepersist(scope);
  // A change while the changes are found: the plan is outdated, and the commit takes the tree as it is.
  const { pauser } = everyCheck((k) => {
    if (k === 100) core.vfs.write(alice, '/home/alice/p/late.md', Buffer.from('late\n'));
  });
  const stale = await planPending(core.vcs, alice, scope, undefined, pauser);
  t.equal(stale.changes.length, FILES, 'the plan has what was there when it began');
  t.equal(stale.partial, true, "bob's change is not alice's to take");
  const rec = core.vcs.commit(alice, scope, 'many', { pending: stale });
  t.equal(rec.changes, FILES + 1, 'the commit took the file written meanwhile too');
  t.same(
    (await status(core.vcs, bob, scope)).added,
    ['/home/bob/b.md'],
    "bob's change is still pending (the commit grafted alice's onto its parent)",
  );
  // A plan still current is what the commit takes.
  for (let i = 0; i < 50; i++) core.vfs.write(alice, fileOf(i), Buffer.from('v2\n'));
  await core.vcs.prehash(scope);
  const fresh = await core.vcs.planPending(alice, scope);
  fresh.changes.length = 10; // what the commit then takes shows that it used the plan
  const partialRec = core.vcs.commit(alice, scope, 'from the plan', { pending: fresh });
  t.equal(partialRec.changes, 10, 'the commit took the changes found ahead');
});

void t.test(
  "the trees written ahead of a commit and the store's batches of their rows take turns of their own",
  async (t) => {
    const { core } = await withPending(t);
    await core.vcs.prehash(scope);
    // What ran, in order: each tree written ahead, each batch the store wrote, and (queued by each
    // batch) a marker that runs in the next turn of the event loop, after its I/O.
    const ran: string[] = [];
    const flushNow = core.store.flushNow.bind(core.store);
    core.store.flushNow = () => {
      flushNow();
      ran.push('batch');
      setImmediate(() => ran.push('turn'));
    };
    const writeTree = core.vcs.writeTree.bind(core.vcs);
    core.vcs.writeTree = (id, entries) => {
      ran.push('tree');
      writeTree(id, entries);
    };
    const { pauser, yields } = everyCheck();
    t.equal(await core.vcs.prepersist(scope, pauser), true, 'every new tree written ahead');
    const trees = ran.filter((r) => r === 'tree').length;
    t.ok(trees > 100, `${trees} trees written ahead`);
    t.ok(yields() >= trees - 1, 'with a yield after each');
    let batches = 0;
    let shared = 0;
    for (let i = 0; i < ran.length; i++) {
      if (ran[i] !== 'batch') continue;
      batches++;
      const tree = ran.indexOf('tree', i);
      const turn = ran.indexOf('turn', i);
      if (tree !== -1 && (turn === -1 || tree < turn)) shared++;
    }
    t.ok(batches >= trees - 1, `the rows went in ${batches} batches, one per slice`);
    t.equal(shared, 0, 'no batch shared its turn with the next slice of trees');
  },
);

void t.test('a diff of the working tree shows it as it was when the diff began', async (t) => {
  const { core, alice, root } = await withPending(t);
  core.vcs.commit(root, scope, 'base');
  for (const f of all) core.vfs.write(alice, f, Buffer.from(body(f, 'v2')));
  await core.vcs.prehash(scope);
  const last = all[all.length - 1]!;
  const pending = diff(core.vcs, alice, scope, {});
  // Overwrite the last file while the diff runs: its v2 content is then referenced by nothing.
  let done = false;
  void pending.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  t.notOk(done, 'the diff is still running after a turn of the event loop');
  core.vfs.write(alice, last, Buffer.from('v3\n'));
  const r = await pending;
  t.equal(r.truncated, false);
  t.match(r.diff, `+++ b${last}\n@@ -1,2 +1,2 @@\n ${last}\n-v1\n+v2\n`, 'the last file as it was when the diff began');
  t.notMatch(r.diff, /\+v3/, 'not as written meanwhile');
  t.equal((r.diff.match(/^\+\+\+ b\/.*$/gm) ?? []).length, FILES, 'every file');
});
