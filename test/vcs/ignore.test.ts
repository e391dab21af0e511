/**
 * `.mdvfsignore` (issue 15), in-process: ignored paths (the default list and per-directory files in
 * gitignore syntax) never appear in status, are never committed, are not in a diff against the
 * working tree and are left alone by revert and undo; they stay in the live tree. The rules apply
 * to everyone, also to a user who cannot read the ignore file.
 */
import t from 'tap';
import { makePersonas, readText, text } from '../helpers/daemon.js';
import { coreFrom } from '../helpers/core.js';
import { quickCore } from './lib.js';
import type { Caller } from '../../daemon/rpc/client.js';
import ignore from 'ignore';
import { DEFAULT_IGNORES, Ignores, ignoreStats, requiredText } from '../../daemon/vcs/ignore.js';

async function world(t: Parameters<typeof quickCore>[0]) {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/shared', parents: true, mode: '1777' });
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v1\n'));
  await p.root.call('vcs.commit', { message: 'base' });
  return p;
}

async function pending(c: Caller): Promise<string[]> {
  const st = await c.call('vcs.status', {});
  return [...st.added.map((x) => `A ${x}`), ...st.modified.map((x) => `M ${x}`), ...st.deleted.map((x) => `D ${x}`)];
}

async function inCommit(root: Caller, rev: string, path: string): Promise<boolean> {
  try {
    await root.request('vcs.cat', { rev, path });
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw err;
  }
}

t.test('the default list: swap files, backups and .git/ stay out of status and commits, and in the tree', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/.a.md.swp' }, text('vim swap'));
  await p.alice.call('fs.write', { path: '/shared/4913' }, text(''));
  await p.alice.call('fs.write', { path: '/shared/a.md~' }, text('backup'));
  await p.alice.call('fs.write', { path: '/shared/.#a.md' }, text('emacs lock'));
  await p.alice.call('fs.write', { path: '/shared/repo/.git/objects/ab/cdef' }, text('git object'));
  await p.alice.call('fs.write', { path: '/shared/repo/README.md' }, text('# repo\n'));
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v2\n'));

  t.same(await pending(p.alice), ['A /shared/repo/README.md', 'M /shared/a.md'], 'alice sees only real changes');
  t.same(await pending(p.root), ['A /shared/repo/README.md', 'M /shared/a.md'], 'so does root');
  const c = await p.alice.call('vcs.commit', { message: 'work' });
  t.equal(c.changes, 2);
  for (const f of [
    '/shared/.a.md.swp',
    '/shared/4913',
    '/shared/a.md~',
    '/shared/.#a.md',
    '/shared/repo/.git/objects/ab/cdef',
  ])
    t.notOk(await inCommit(p.root, c.hash, f), `${f} is not committed`);
  t.ok(await inCommit(p.root, c.hash, '/shared/repo/README.md'));
  t.equal(await readText(p.alice, '/shared/.a.md.swp'), 'vim swap', 'the swap file is still in the live tree');
  t.equal(await readText(p.alice, '/shared/repo/.git/objects/ab/cdef'), 'git object');
  t.ok((await p.root.call('vcs.status', {})).clean, "root's whole-tree commit is clean afterwards too");

  await p.alice.call('fs.write', { path: '/shared/repo/.git/objects/ab/cdef' }, text('changed'));
  t.ok((await p.root.call('vcs.status', {})).clean, 'a change inside .git/ is no change');
  const d = await p.alice.call('vcs.diff', {});
  t.equal(d.diff, '', 'nor in a diff against the working tree');
});

t.test('a .mdvfsignore: patterns, directories, anchors, negation, deeper files decide', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/proj/.mdvfsignore' }, text('*.tmp\nbuild/\n/local.md\n!keep.swp\n'));
  for (const f of ['x.tmp', 'build/out.md', 'local.md', 'keep.swp', 'sub/local.md', 'sub/y.tmp', 'note.md', 'build.md'])
    await p.alice.call('fs.write', { path: `/shared/proj/${f}` }, text(f));
  await p.alice.call('fs.write', { path: '/shared/proj/sub/.mdvfsignore' }, text('!y.tmp\n'));
  t.same(
    await pending(p.alice),
    [
      'A /shared/proj/.mdvfsignore',
      'A /shared/proj/build.md',
      'A /shared/proj/keep.swp',
      'A /shared/proj/note.md',
      'A /shared/proj/sub/.mdvfsignore',
      'A /shared/proj/sub/local.md',
      'A /shared/proj/sub/y.tmp',
    ],
    'the ignore files are versioned; an anchored pattern matches only at its directory; the deeper file brings y.tmp back',
  );
  t.equal(await readText(p.alice, '/shared/proj/build/out.md'), 'build/out.md');
  // an ignore file outside the directory has no say there
  await p.alice.call('fs.write', { path: '/shared/other/x.tmp' }, text('x'));
  t.ok((await pending(p.alice)).includes('A /shared/other/x.tmp'));
});

t.test('changing the ignore file changes status at once (cached trees are rehashed)', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/deep/er/x.log' }, text('log'));
  await p.alice.call('fs.write', { path: '/shared/deep/er/y.md' }, text('y'));
  await p.root.call('vcs.commit', { message: 'both' });
  t.ok((await p.root.call('vcs.status', {})).clean);

  await p.alice.call('fs.write', { path: '/shared/.mdvfsignore' }, text('*.log\n'));
  t.same(
    await pending(p.alice),
    ['A /shared/.mdvfsignore', 'D /shared/deep/er/x.log'],
    'a committed file that becomes ignored leaves history at the next commit',
  );
  const c = await p.alice.call('vcs.commit', { message: 'ignore logs' });
  t.notOk(await inCommit(p.root, c.hash, '/shared/deep/er/x.log'));
  t.ok(await inCommit(p.root, 'HEAD~1', '/shared/deep/er/x.log'), 'its past stays in history');
  t.equal(await readText(p.alice, '/shared/deep/er/x.log'), 'log', 'and the file in the live tree');

  await p.alice.call('fs.write', { path: '/shared/.mdvfsignore' }, text('# nothing\n'));
  t.same(
    await pending(p.alice),
    ['A /shared/deep/er/x.log', 'M /shared/.mdvfsignore'],
    'dropping the rule brings it back',
  );
  await p.alice.call('fs.delete', { path: '/shared/.mdvfsignore' });
  await p.alice.call('fs.write', { path: '/shared/deep/.mdvfsignore' }, text('er/\n'));
  t.same(
    await pending(p.alice),
    ['A /shared/deep/.mdvfsignore', 'D /shared/.mdvfsignore', 'D /shared/deep/er/y.md'],
    'a new file deeper down: its directory pattern',
  );
});

t.test('moving a directory into or out of a place where an ignore file applies', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/in/.mdvfsignore' }, text('*.log\n'));
  await p.alice.call('fs.write', { path: '/shared/out/d/e/x.log' }, text('x'));
  await p.root.call('vcs.commit', { message: 'base' });
  t.ok((await p.root.call('vcs.status', {})).clean);
  await p.alice.call('fs.move', { src: '/shared/out/d', dst: '/shared/in/d' });
  t.same(
    await pending(p.alice),
    ['A /shared/in/d/e/', 'D /shared/out/d/e/x.log'],
    'moved under the rule: ignored (the directory holding only it is an empty one)',
  );
  await p.alice.call('fs.move', { src: '/shared/in/d', dst: '/shared/back' });
  t.same(await pending(p.alice), ['A /shared/back/e/x.log', 'D /shared/out/d/e/x.log'], 'moved out again: seen again');
});

t.test('the rules apply to everyone, also to a user who cannot read the ignore file', async (t) => {
  const p = await world(t);
  await p.root.call('fs.write', { path: '/shared/.mdvfsignore', mode: '0600' }, text('*.secret-draft\n'));
  await t.rejects(p.alice.request('fs.read', { path: '/shared/.mdvfsignore' }), { code: 'EACCES' });
  await p.alice.call('fs.write', { path: '/shared/mine.secret-draft' }, text('d'));
  await p.alice.call('fs.write', { path: '/shared/mine.md' }, text('m'));
  t.same(await pending(p.alice), ['A /shared/mine.md'], "alice's status follows the rule she cannot read");
  const c = await p.alice.call('vcs.commit', { message: 'mine' });
  t.equal(c.changes, 1);
  t.notOk(await inCommit(p.root, c.hash, '/shared/mine.secret-draft'));
  t.same(await pending(p.root), ['A /shared/.mdvfsignore'], "root's status: only the ignore file itself");
});

t.test('revert and undo leave ignored paths alone', async (t) => {
  const p = await world(t);
  await p.root.call('fs.chmod', { path: '/shared/a.md', mode: '0666' }); // the agent writes it later
  await p.alice.call('fs.write', { path: '/shared/notes.log' }, text('committed log'));
  const c1 = await p.root.call('vcs.commit', { message: 'with a log' });
  await p.root.call('fs.write', { path: '/.mdvfsignore' }, text('*.log\n'));
  await p.root.call('vcs.commit', { message: 'logs ignored' });
  await p.alice.call('fs.write', { path: '/shared/notes.log' }, text('live log'));
  await p.alice.call('fs.write', { path: '/shared/a.md.swp' }, text('swap'));
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v2\n'));

  const r = await p.alice.call('vcs.revert', { hash: c1.hash, paths: ['/shared'] });
  t.ok(r.hash);
  t.equal(await readText(p.alice, '/shared/a.md'), 'a v1\n', 'a real change is restored');
  t.equal(
    await readText(p.alice, '/shared/notes.log'),
    'live log',
    'a path ignored now is not brought back from the commit',
  );
  t.equal(await readText(p.alice, '/shared/a.md.swp'), 'swap', 'nor is an ignored file removed');

  // undo: the agent's ignored files stay, its real change goes
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('agent\n'));
  await p.agentForAlice.call('fs.write', { path: '/shared/agent.swp' }, text('agent swap'));
  const u = await p.alice.call('vcs.undo', { actor: 'agent' });
  t.same(u.paths, ['/shared/a.md']);
  t.equal(await readText(p.alice, '/shared/a.md'), 'a v1\n');
  t.equal(await readText(p.alice, '/shared/agent.swp'), 'agent swap');
});

t.test('a hostile pattern is skipped, a huge file is read only in part', async (t) => {
  const p = await world(t);
  const name = 'a'.repeat(250);
  await p.alice.call(
    'fs.write',
    { path: '/shared/h/.mdvfsignore' },
    text(`*a*a*a*a*a*a*a*a*a*a*b\n${'x\n'.repeat(300)}${name}\n`),
  );
  await p.alice.call('fs.write', { path: `/shared/h/${name}` }, text('n'));
  // without the bounds this status would hold the event loop for a long time; with them the
  // pattern is skipped and the 302nd rule (the name itself) is past the 256 that count
  t.same(await pending(p.alice), ['A /shared/h/.mdvfsignore', `A /shared/h/${name}`]);
});

/**
 * A core holding a 1,000-level chain /deep/d/…/d with `*.tmp` ignored from /deep/d down, and a
 * count of the look-ups of a directory's ignore files that walk up to `/` (what made deep trees O(depth²)).
 */
async function deepChain(t: Parameters<typeof coreFrom>[0]) {
  const c = await coreFrom(t);
  const chain = '/deep' + '/d'.repeat(999);
  await c.root.call('fs.mkdir', { path: chain, parents: true });
  await c.root.call('fs.write', { path: '/deep/d/.mdvfsignore' }, text('*.tmp\n'));
  const ignores = c.core.vcs.ignores;
  const layersOf = ignores.layersOf.bind(ignores);
  const count = { lookups: 0 };
  ignores.layersOf = (dir) => {
    count.lookups++;
    return layersOf(dir);
  };
  return { c, chain, count };
}

t.test('a deep chain: the ignore rules are passed down the walk, not looked up from each directory', async (t) => {
  const { c, chain, count } = await deepChain(t);
  await c.root.call('fs.write', { path: `${chain}/keep.md` }, text('kept'));
  await c.root.call('fs.write', { path: `${chain}/x.tmp` }, text('ignored'));
  // Looking a directory's ignore files up walks to `/`: once per directory of a 10,000-level tree
  // that was O(depth²), and held the event loop for tens of seconds (the PostgreSQL lease expired).
  count.lookups = 0;
  const st = await c.root.call('vcs.status', {});
  t.same(
    st.added.filter((p) => p.startsWith('/deep/')),
    ['/deep/d/.mdvfsignore', `${chain}/keep.md`],
    'the rule applies 998 levels below its file',
  );
  const commit = await c.root.call('vcs.commit', { message: 'deep' });
  t.ok(await inCommit(c.root, commit.hash, `${chain}/keep.md`));
  t.notOk(await inCommit(c.root, commit.hash, `${chain}/x.tmp`));
  t.ok(count.lookups <= 10, `${count.lookups} lookups from a directory up to / for 1000 directories hashed`);
});

t.test(
  'a revert of a deep chain: the ignore rules go down its walks too, not looked up from each directory',
  async (t) => {
    const { c, chain, count } = await deepChain(t);
    await c.root.call('fs.write', { path: `${chain}/a.md` }, text('a v1'));
    await c.root.call('fs.write', { path: `${chain}/b.md` }, text('b v1'));
    const base = await c.root.call('vcs.commit', { message: 'v1' });
    await c.root.call('fs.write', { path: `${chain}/a.md` }, text('a v2'));
    await c.root.call('fs.delete', { path: `${chain}/b.md` });
    await c.root.call('fs.write', { path: `${chain}/c.md` }, text('c, new'));
    await c.root.call('fs.write', { path: `${chain}/x.tmp` }, text('ignored'));
    count.lookups = 0;
    // Each of the three changes at level 1000 was tested by looking up the ignore files of every
    // directory on its way up to `/` (O(depth²) each), and the walk that applies the commit looked
    // them up again from each of the 1,000 directories it went down.
    const r = await c.root.call('vcs.revert', { hash: base.hash });
    t.ok(r.saved, 'the pending changes were saved first');
    t.equal(await readText(c.root, `${chain}/a.md`), 'a v1');
    t.equal(await readText(c.root, `${chain}/b.md`), 'b v1');
    await t.rejects(c.root.call('fs.stat', { path: `${chain}/c.md` }), { code: 'ENOENT' });
    t.equal(await readText(c.root, `${chain}/x.tmp`), 'ignored', 'the ignored file 998 levels below its rule stays');
    t.ok(count.lookups <= 10, `${count.lookups} lookups from a directory up to / for a revert 1,000 levels down`);
  },
);

t.test('a revert that takes an ignore file away leaves the files it ignored alone', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/sub/deeper/notes.md' }, text('notes v1'));
  const before = await p.root.call('vcs.commit', { message: 'no rule yet' });
  await p.alice.call('fs.write', { path: '/shared/sub/.mdvfsignore' }, text('*.log\n'));
  await p.alice.call('fs.write', { path: '/shared/sub/deeper/run.log' }, text('live log, never committed'));
  await p.alice.call('fs.write', { path: '/shared/sub/deeper/notes.md' }, text('notes v2'));
  t.same(await pending(p.root), ['A /shared/sub/.mdvfsignore', 'M /shared/sub/deeper/notes.md']);

  const r = await p.root.call('vcs.revert', { hash: before.hash });
  t.equal(await readText(p.root, '/shared/sub/deeper/notes.md'), 'notes v1', 'the tracked file is restored');
  await t.rejects(p.root.call('fs.stat', { path: '/shared/sub/.mdvfsignore' }), { code: 'ENOENT' });
  // The log was ignored when the revert began: in no tree of the working tree, saved by no commit.
  // Removing it because the rule went first would lose it for good.
  t.equal(await readText(p.root, '/shared/sub/deeper/run.log'), 'live log, never committed', 'the ignored file stays');
  // The rule gone, the log is part of the working tree: the revert's commit, which records the
  // working tree as the revert left it, holds it.
  t.ok(await inCommit(p.root, r.hash, '/shared/sub/deeper/run.log'), 'the revert commit records it');
  t.same(await pending(p.root), [], 'nothing is left pending');
});

t.test('a revert that removes a directory keeps what is ignored in it (a .git/ inside)', async (t) => {
  const p = await world(t);
  const base = (await p.root.call('vcs.log', { limit: 1 })).commits[0]!.hash;
  await p.alice.call('fs.write', { path: '/shared/repo/README.md' }, text('# repo\n'));
  await p.alice.call('fs.write', { path: '/shared/repo/docs/guide.md' }, text('guide'));
  await p.alice.call('fs.write', { path: '/shared/repo/.git/HEAD' }, text('ref: refs/heads/main\n'));
  await p.alice.call('fs.write', { path: '/shared/repo/docs/guide.md.swp' }, text('swap'));
  await p.alice.call('fs.write', { path: '/shared/gone/only.md' }, text('tracked only'));
  const chain = '/shared/chain' + '/c'.repeat(300);
  await p.alice.call('fs.write', { path: `${chain}/tracked.md` }, text('tracked'));
  await p.alice.call('fs.write', { path: `${chain}/tracked.md~` }, text('a backup 301 levels down'));
  t.same(await pending(p.root), [
    `A ${chain}/tracked.md`,
    'A /shared/gone/only.md',
    'A /shared/repo/README.md',
    'A /shared/repo/docs/guide.md',
  ]);

  const r = await p.root.call('vcs.revert', { hash: base });
  t.ok(r.saved, 'the tracked files were saved first');
  // The .git/ directory and the swap file are in no commit: removing their directories with
  // everything in them would lose them for good.
  t.equal(await readText(p.root, '/shared/repo/.git/HEAD'), 'ref: refs/heads/main\n', '.git/ stays');
  t.equal(await readText(p.root, '/shared/repo/docs/guide.md.swp'), 'swap', 'so does the swap file');
  for (const gone of ['/shared/repo/README.md', '/shared/repo/docs/guide.md'])
    await t.rejects(p.root.call('fs.stat', { path: gone }), { code: 'ENOENT' }, `${gone} is reverted away`);
  await t.rejects(p.root.call('fs.stat', { path: '/shared/gone' }), { code: 'ENOENT' }, 'a directory left empty goes');
  t.equal(await readText(p.root, `${chain}/tracked.md~`), 'a backup 301 levels down', 'the chain keeps it');
  await t.rejects(p.root.call('fs.stat', { path: `${chain}/tracked.md` }), { code: 'ENOENT' });
  t.same(await pending(p.root), [], 'the working tree is the commit again');
});

t.test("names holding no text a rule needs are answered without the rules; the answers stay the rules' own", (t) => {
  t.same(
    ['*.swp', '\\#*#', '.~lock.*#', '!keep.md', '/build/', 'docs/**/*.tmp', '\\!x', 'a[]b]c', 'foo\\ ', '*'].map(
      requiredText,
    ),
    ['.swp', '#', '.~lock.', 'keep.md', 'build', 'docs', '!x', 'a', 'foo', ''],
    "each rule's plain text: none past a class, none from escapes or wildcards",
  );
  // Two ignore files on the way, one with a rule that needs no text (its matcher asks the rules every time).
  const files: Record<string, string> = {
    outer: '*.tmp\n!keep.tmp\nbuild/\n/top.md\ndocs/**/*.draft\n\\#hash\nsp\\ ace\n?x?\n',
    inner: 'a[bc]d\n[!n]1.md\n',
  };
  const dir = (name: string, blob: string | undefined, parent: unknown): never =>
    ({
      name,
      kind: 'directory',
      parent,
      children: new Map(blob === undefined ? [] : [['.mdvfsignore', { kind: 'file', blob }]]),
    }) as never;
  const top = dir('', 'outer', null);
  const below = dir('sub', 'inner', top);
  const igs = new Ignores((blob) => Buffer.from(files[blob]!));
  const rules = (text: string) => ignore({ ignorecase: false }).add(text.split('\n').filter(Boolean));
  const raw = { defaults: rules(DEFAULT_IGNORES.join('\n')), outer: rules(files.outer!), inner: rules(files.inner!) };
  const expected = (layers: [keyof typeof raw, string][], leaf: string): boolean => {
    let out = raw.defaults.test(leaf).ignored;
    for (const [k, prefix] of layers) {
      const r = raw[k].test(prefix + leaf);
      if (r.ignored) out = true;
      else if (r.unignored) out = false;
    }
    return out;
  };
  const names =
    'n1.md,n4913.md,4913,a.swp,a.swpx,b~,.#lock,#x#,#x,.~lock.a#,.fuse_hidden01,.DS_Store,._x,Thumbs.db,thumbs.db,.git,.hg,.svn,x.tmp,keep.tmp,build,top.md,docs,y.draft,#hash,sp ace,axb,abd,acd,m1.md,n1.md,AXB,plain,résumé.md'.split(
      ',',
    );
  let checked = 0;
  for (const isDir of [false, true])
    for (const name of names) {
      const leaf = isDir ? `${name}/` : name;
      t.equal(igs.ignored([], name, isDir), expected([], leaf), `${leaf} with no ignore file`);
      t.equal(igs.ignored(igs.layersOf(top), name, isDir), expected([['outer', '']], leaf), `/${leaf}`);
      t.equal(
        igs.ignored(igs.layersOf(below), name, isDir),
        expected(
          [
            ['outer', 'sub/'],
            ['inner', ''],
          ],
          leaf,
        ),
        `/sub/${leaf}`,
      );
      checked += 3;
    }
  t.ok(checked > 200);
  // 10,000 names holding no rule's text (against the defaults): none runs the compiled rules.
  const before = ignoreStats.compiled;
  let ignored = 0;
  for (let i = 0; i < 10000; i++) if (igs.ignored([], `note-${i.toString(36)}.md`, false)) ignored++;
  t.equal(ignored, 0);
  t.equal(ignoreStats.compiled - before, 0, 'no name ran the compiled rules');
  t.end();
});
