/**
 * The depth limit (1,024 levels below `/`, DESIGN.md §3) and iterative walks, over the real daemon
 * socket: a user nesting chains must get a clear refusal, and a store that already holds a far
 * deeper tree (written before the limit) must still start, fsck, commit, search and serve everyone.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import path from 'node:path';
import pg from 'pg';
import { makePersonas, spawnDaemon, text, treeSnapshot, type TestDaemon } from '../helpers/daemon.js';
import { withCast } from '../helpers/http.js';
import { until } from '../helpers/poll.js';

const LIMIT = 1024;
const tooDeep = { code: 'ENAMETOOLONG', message: /at most 1024 levels deep/ };
/** `/home/alice` is level 2: `chain('/home/alice', k)` names level 2 + k. */
const chain = (base: string, levels: number, name = 'd'): string => base + `/${name}`.repeat(levels);

/**
 * Straight into the inodes table of the stopped daemon's store (SQLite, or the PostgreSQL database of
 * MDVFS_TEST_STORE=postgres): /home/bob/deep/d/d/... `levels` directories deep, with bob's x.md moved to
 * the bottom and a copy of it, mid.md, at level 1030 (deeper than the limit but still reachable by path).
 * Ids: the chain takes max(id) + 1 .. max(id) + levels, mid.md the next one.
 */
async function buildDeepChain(d: TestDaemon, levels: number): Promise<void> {
  const url = d.env.SERVICE_STORE;
  if (url !== undefined && url.startsWith('postgres')) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query('BEGIN');
      const row = (await c.query("SELECT * FROM inodes WHERE name = 'x.md'")).rows[0] as Record<string, unknown>;
      const home = (await c.query("SELECT id FROM inodes WHERE name = 'bob' AND kind = 'directory'")).rows[0].id;
      const maxId = Number((await c.query('SELECT max(id) AS m FROM inodes')).rows[0].m);
      const attrs = [row.uid, row.gid, row.atime, row.mtime, row.ctime, row.btime];
      // One statement for the whole chain: row g's parent is row g - 1 (the first one's is bob's home).
      await c.query(
        `INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target)
         SELECT $1::bigint + g, CASE WHEN g = 1 THEN $2::bigint ELSE $1::bigint + g - 1 END,
                CASE WHEN g = 1 THEN 'deep' ELSE 'd' END, 'directory', ${0o755}, $3, $4, $5, $6, $7, $8, NULL, 0, NULL
         FROM generate_series(1, $9::int) AS g`,
        [maxId, home, ...attrs, levels],
      );
      await c.query('UPDATE inodes SET parent = $1 WHERE id = $2', [maxId + levels, row.id]);
      await c.query(
        `INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target)
         VALUES ($1, $2, 'mid.md', 'file', ${0o644}, $3, $4, $5, $6, $7, $8, $9, $10, NULL)`,
        [maxId + 1 + levels, maxId + 1027, ...attrs, row.blob, row.size],
      );
      await c.query('COMMIT');
    } finally {
      await c.end();
    }
    return;
  }
  const db = new Database(path.join(d.dataDir, 'store.db'));
  const row = db.prepare("SELECT * FROM inodes WHERE name = 'x.md'").get() as Record<string, unknown>;
  const home = db.prepare("SELECT id FROM inodes WHERE name = 'bob' AND kind = 'directory'").pluck().get() as number;
  const maxId = db.prepare('SELECT max(id) FROM inodes').pluck().get() as number;
  const insert = db.prepare(
    'INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  // a row of bob's, with x.md's owner and times
  const put = (id: number, parent: number, name: string, kind: string, mode: number, blob: unknown, size: unknown) =>
    insert.run(
      id,
      parent,
      name,
      kind,
      mode,
      row.uid,
      row.gid,
      row.atime,
      row.mtime,
      row.ctime,
      row.btime,
      blob,
      size,
      null,
    );
  db.transaction(() => {
    let parent = home;
    for (let i = 0; i < levels; i++) {
      const id = maxId + 1 + i;
      put(id, parent, i === 0 ? 'deep' : 'd', 'directory', 0o755, null, 0);
      parent = id;
    }
    db.prepare('UPDATE inodes SET parent = ? WHERE id = ?').run(parent, row.id);
    put(maxId + 1 + levels, maxId + 1027, 'mid.md', 'file', 0o644, row.blob, row.size);
  })();
  db.close();
}

t.test('a user cannot build or nest chains past 1,024 levels', async (t) => {
  const d = await spawnDaemon(t);
  const { root, alice } = await makePersonas(d.client);

  t.test('mkdir -p up to the limit works; one more level is refused by name', async (t) => {
    const deepest = chain('/home/alice', LIMIT - 2);
    t.equal((await alice.call('fs.mkdir', { path: deepest, parents: true })).created, true);
    t.equal((await alice.call('fs.stat', { path: deepest })).kind, 'directory');
    await alice.call('fs.write', { path: chain('/home/alice', LIMIT - 3) + '/f.md' }, text('at the limit'));
    await alice.call('fs.symlink', { path: chain('/home/alice', LIMIT - 3) + '/l', target: 'f.md' });
    const before = await treeSnapshot(root, '/home/alice');
    const e = await alice.call('fs.mkdir', { path: deepest + '/x' }).then(
      () => undefined,
      (err: Error) => err,
    );
    t.match(e, tooDeep);
    t.match(e?.message, `'${deepest}/x'`, 'the message names the path');
    t.match(e?.message, /level 1025/);
    await t.rejects(alice.call('fs.mkdir', { path: deepest + '/x/y/z', parents: true }), tooDeep);
    await t.rejects(alice.call('fs.write', { path: deepest + '/f.md' }, text('x')), tooDeep);
    await t.rejects(
      alice.call('fs.write', { path: deepest + '/a/b/f.md' }, text('x')),
      tooDeep,
      'auto-created parents count',
    );
    await t.rejects(alice.call('fs.symlink', { path: deepest + '/l', target: '/tmp' }), tooDeep);
    t.equal(await treeSnapshot(root, '/home/alice'), before, 'nothing changed');
  });

  t.test('mkdir -p far past the limit makes none of the missing parents', async (t) => {
    await alice.call('fs.mkdir', { path: chain('/home/alice/p', 1000), parents: true });
    const before = await treeSnapshot(root, '/home/alice/p');
    await t.rejects(alice.call('fs.mkdir', { path: chain('/home/alice/p', 1100), parents: true }), tooDeep);
    await t.rejects(alice.call('fs.stat', { path: chain('/home/alice/p', 1001) }), { code: 'ENOENT' });
    t.equal(await treeSnapshot(root, '/home/alice/p'), before);
  });

  t.test('moving or copying a deep chain under another deep directory is refused', async (t) => {
    // /home/alice/a/d... reaches level 603, /home/alice/b/d... too: nested they would reach 1204.
    await alice.call('fs.mkdir', { path: chain('/home/alice/a', 600), parents: true });
    await alice.call('fs.write', { path: chain('/home/alice/b', 600) + '/f.md' }, text('deep'));
    const before = await treeSnapshot(root, '/home/alice');
    const into = chain('/home/alice/a', 600) + '/b';
    const e = await alice.call('fs.move', { src: '/home/alice/b', dst: into }).then(
      () => undefined,
      (err: Error) => err,
    );
    t.match(e, tooDeep);
    t.match(e?.message, /level 1205/, "the moved subtree's own height counts");
    await t.rejects(alice.call('fs.move', { src: '/home/alice/b', dst: into + '/more/parents' }), tooDeep);
    await t.rejects(alice.call('fs.copy', { src: '/home/alice/b', dst: into, recursive: true }), tooDeep);
    t.equal(await treeSnapshot(root, '/home/alice'), before, 'nothing changed');
    // what fits is still allowed: the same chain one level below the top
    await alice.call('fs.move', { src: '/home/alice/b', dst: '/home/alice/a/b' });
    await alice.call('fs.copy', { src: '/home/alice/a/b', dst: '/home/alice/c', recursive: true });
    t.equal((await alice.call('fs.stat', { path: chain('/home/alice/c', 600) + '/f.md' })).size, 4);
  });

  t.test('a directory emptied of a deep chain may go deep again (heights follow deletions)', async (t) => {
    await alice.call('fs.mkdir', { path: chain('/home/alice/e', 900), parents: true });
    await alice.call('fs.delete', { path: '/home/alice/e/d', recursive: true });
    await alice.call('fs.write', { path: '/home/alice/e/f.md' }, text('f'));
    await alice.call('fs.move', { src: '/home/alice/e', dst: chain('/home/alice/c', 600) + '/e' });
    t.equal((await alice.call('fs.stat', { path: chain('/home/alice/c', 600) + '/e/f.md' })).size, 1);
  });

  t.test('the whole tree still commits, diffs and searches', async (t) => {
    await alice.call('vcs.commit', { message: 'deep but legal' });
    t.equal((await alice.call('vcs.status', {})).clean, true);
    t.same((await alice.call('search.find', { path: '~', name: 'f.md' })).count, 4);
    t.equal((await alice.call('search.grep', { pattern: 'deep', path: '~', recursive: true })).count, 2);
  });
});

t.test('over REST: a PUT one level past the limit is 400 ENAMETOOLONG and creates nothing', async (t) => {
  const { alice } = await withCast(t);
  t.equal((await alice.put('/fs/' + chain('', LIMIT - 3).slice(1) + '/f.md', 'at the limit')).status, 200);
  const r = await alice.put('/fs/' + chain('', LIMIT - 2).slice(1) + '/f.md', 'one too deep');
  t.equal(r.status, 400);
  t.equal(r.json?.code, 'ENAMETOOLONG');
  t.match(r.json?.error, /at most 1024 levels deep, and this would reach level 1025/);
  t.equal(
    (await alice.get('/fs/' + chain('', LIMIT - 2).slice(1) + '?stat=true')).status,
    404,
    'not even the missing parent was made',
  );
});

t.test('a store holding a 10,000-level tree (written before the limit) starts and serves everyone', async (t) => {
  const LEVELS = 10_000;
  const d = await spawnDaemon(t);
  const first = await makePersonas(d.client);
  await first.alice.call('fs.write', { path: 'notes/a.md' }, text('alice notes'));
  await first.bob.call('fs.write', { path: 'x.md' }, text('needle at the bottom'));
  await d.kill('SIGTERM');

  await buildDeepChain(d, LEVELS);
  await d.restart();
  // The daemon logs before it listens, but its stderr pipe and its socket reach this process as
  // separate events: the line may be read a little after the connection.
  await until(() => /the tree is \d+ levels deep/.test(d.stderr()), 'the start-up depth warning', 10000).catch(
    () => {},
  );
  t.match(d.stderr(), /the tree is 10003 levels deep/, 'the start-up log says the tree is deeper than the limit');
  // callers on the new connection (the personas' users are in the store)
  const root = d.client.as({});
  const alice = d.client.as({ authorization: 'User alice' });
  const bob = d.client.as({ authorization: 'User bob' });

  t.test('fsck runs and reports the excess depth', async (t) => {
    const r = await root.call('sys.fsck', {});
    t.equal(r.ok, false);
    t.match(
      r.problems.join('\n'),
      /8980 inode\(s\) lie deeper than the 1024-level limit, down to level 10003 \(\/home\/bob\/deep\/d\/\.\.\.\/d\/d\/x\.md\)/,
    );
  });

  t.test('other users are served: status, commit, grep, find, tree', async (t) => {
    await alice.call('fs.write', { path: 'notes/b.md' }, text('more'));
    t.ok((await alice.call('vcs.status', {})).added.includes('/home/alice/notes/b.md'));
    t.ok((await alice.call('vcs.commit', { message: 'alice after the restart' })).hash);
    await alice.call('fs.write', { path: 'notes/c.md' }, text('more'));
    t.match((await alice.call('vcs.diff', {})).diff, /\+more/);
    t.equal((await alice.call('search.grep', { pattern: 'notes', path: '~', recursive: true })).count, 1);
    t.same((await alice.call('search.find', { path: '/', name: '*.md' })).results, [
      '/home/alice/notes/a.md',
      '/home/alice/notes/b.md',
      '/home/alice/notes/c.md',
    ]);
    t.match((await alice.call('search.tree', { path: '~' })).text, /c\.md/);
  });

  t.test('the deep tree itself is served: walks over it work for its owner and root', async (t) => {
    t.same((await bob.call('search.find', { path: '~', name: 'x.md' })).count, 1);
    t.equal(
      (await root.call('search.grep', { pattern: 'needle', path: '/', recursive: true })).count,
      2,
      'x.md at level 10003 and mid.md at 1030',
    );
    t.match((await root.call('search.tree', { path: '/home/bob', depth: 3 })).text, /deep/);
    t.ok((await root.call('vcs.commit', { message: 'everything, deep chain included' })).hash);
    t.equal((await root.call('vcs.status', {})).clean, true);
    t.ok((await root.call('sys.gc', {})).kept > 0);
  });

  t.test('it is not deepened further, but may be moved up or removed', async (t) => {
    const level1030 = chain('/home/bob/deep', 1027);
    t.equal((await bob.call('fs.stat', { path: level1030 })).kind, 'directory');
    await t.rejects(bob.call('fs.mkdir', { path: level1030 + '/more' }), tooDeep);
    await t.rejects(bob.call('fs.write', { path: level1030 + '/f.md' }, text('x')), tooDeep);
    await bob.call(
      'fs.write',
      { path: chain('/home/bob/deep', 1026) + '/mid.md' },
      text('an existing file may still be written'),
    );
    t.equal((await bob.call('fs.stat', { path: chain('/home/bob/deep', 1026) + '/mid.md' })).size, 37);
    await t.rejects(bob.call('fs.move', { src: '/home/bob/deep', dst: '/home/bob/sub/deep' }), tooDeep);
    await t.rejects(bob.call('fs.copy', { src: '/home/bob/deep', dst: '/home/bob/copy', recursive: true }), tooDeep);
    await bob.call('fs.move', { src: '/home/bob/deep', dst: '/home/bob/renamed' });
    await root.call('fs.move', { src: '/home/bob/renamed/d', dst: '/srv-deep' });
  });

  t.test('reverting to a commit that holds the deep tree is refused; deleting it works', async (t) => {
    const withDeep = (await root.call('vcs.commit', { message: 'moved' })).hash;
    t.equal(
      (await root.call('fs.delete', { path: '/srv-deep', recursive: true })).deleted,
      LEVELS + 1,
      'the 9,999 directories below its first level, x.md and mid.md',
    );
    await root.call('vcs.commit', { message: 'deep chain gone' });
    const before = await treeSnapshot(root, '/home');
    await t.rejects(root.call('vcs.revert', { hash: withDeep }), {
      code: 'ENAMETOOLONG',
      message: /reaching level 10000/,
    });
    t.equal(await treeSnapshot(root, '/home'), before, 'nothing changed');
    t.equal((await root.call('sys.fsck', {})).ok, true, 'the store is within the limit again');
  });

  t.test('and the daemon restarts on its own store', async (t) => {
    await d.kill('SIGTERM');
    await d.restart();
    t.equal(
      (await d.client.as({ authorization: 'User alice' }).call('fs.read', { path: 'notes/a.md' })).path,
      '/home/alice/notes/a.md',
    );
  });
});
