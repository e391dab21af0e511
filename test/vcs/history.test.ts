/**
 * Commit, status, log, diff and revert through a real daemon: round trips, the auto-save commit,
 * per-file history and exact diff text.
 */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { names, quickCore } from './lib.js';

t.test('status reports each kind of change since the last commit', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/keep.md' }, text('keep\n'));
  await r.call('fs.write', { path: '/srv/old.md' }, text('old\n'));
  const first = await r.call('vcs.commit', { message: 'base' });
  t.equal(first.parent, null, 'the first commit has no parent');
  t.match(first.hash, /^[0-9a-f]{12}$/);
  t.equal(first.author, 'root');
  let s = await r.call('vcs.status', {});
  t.ok(s.clean, 'clean right after a commit');
  t.equal(s.head, first.hash);
  t.same([s.added, s.modified, s.deleted], [[], [], []]);
  t.match(s.text, /nothing to commit/);

  await r.call('fs.write', { path: '/srv/new.md' }, text('new\n'));
  s = await r.call('vcs.status', {});
  t.same([s.added, s.modified, s.deleted], [['/srv/new.md'], [], []], 'add');
  t.match(s.text, /added:\s+\/srv\/new\.md/);
  t.notOk(s.clean);
  await r.call('vcs.commit', { message: 'add' });

  await r.call('fs.write', { path: '/srv/keep.md' }, text('kept, changed\n'));
  s = await r.call('vcs.status', {});
  t.same([s.added, s.modified, s.deleted], [[], ['/srv/keep.md'], []], 'modify');
  t.match(s.text, /modified:\s+\/srv\/keep\.md/);
  await r.call('vcs.commit', { message: 'modify' });

  await r.call('fs.unlink', { path: '/srv/old.md' });
  s = await r.call('vcs.status', {});
  t.same([s.added, s.modified, s.deleted], [[], [], ['/srv/old.md']], 'delete');
  t.match(s.text, /deleted:\s+\/srv\/old\.md/);
  await r.call('vcs.commit', { message: 'delete' });

  await r.call('fs.chmod', { path: '/srv/keep.md', mode: '0600' });
  s = await r.call('vcs.status', {});
  t.same([s.added, s.modified, s.deleted], [[], ['/srv/keep.md'], []], 'chmod is a modification');
  const c = await r.call('vcs.commit', { message: 'chmod' });
  t.equal(c.changes, 1);
  t.ok((await r.call('vcs.status', {})).clean);

  // a change undone before the commit is no change at all
  await r.call('fs.write', { path: '/srv/keep.md' }, text('temporary\n'));
  await r.call('fs.write', { path: '/srv/keep.md' }, text('kept, changed\n'));
  t.ok((await r.call('vcs.status', {})).clean, 'writing back the committed content leaves status clean');
  await t.rejects(r.call('vcs.commit', { message: '  ' }), { code: 'EINVAL' }, 'a commit needs a message');
});

t.test('commit/revert round trip: deleted files come back, later additions go, the revert is logged', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/p/a.md' }, text('alpha\n'));
  await r.call('fs.write', { path: '/srv/p/sub/b.md' }, text('beta\n'));
  await r.call('fs.symlink', { target: 'a.md', path: '/srv/p/link' });
  await r.call('fs.chmod', { path: '/srv/p/a.md', mode: '0640' });
  const base = await r.call('vcs.commit', { message: 'base' });

  await r.call('fs.delete', { path: '/srv/p/sub', recursive: true });
  await r.call('fs.unlink', { path: '/srv/p/link' });
  await r.call('fs.write', { path: '/srv/p/a.md' }, text('ALPHA\n'));
  await r.call('fs.chmod', { path: '/srv/p/a.md', mode: '0600' });
  await r.call('fs.write', { path: '/srv/p/later.md' }, text('later\n'));
  await r.call('fs.write', { path: '/srv/p/newdir/deep.md' }, text('deep\n'));
  const second = await r.call('vcs.commit', { message: 'second' });
  t.equal(second.parent, base.hash);

  const rv = await r.call('vcs.revert', { hash: base.hash.slice(0, 4) });
  t.equal(rv.reverted_to, base.hash, 'a 4-digit prefix finds the commit');
  t.equal(rv.saved, null, 'nothing uncommitted to save');
  t.equal(rv.commit.message, `revert to ${base.hash}`);
  t.equal(rv.commit.parent, second.hash, 'the revert is a new commit on top');
  t.same(await names(r, '/srv/p'), ['a.md', 'link', 'sub'], 'later additions removed, deleted entries back');
  t.equal(await readText(r, '/srv/p/a.md'), 'alpha\n');
  t.equal(await readText(r, '/srv/p/sub/b.md'), 'beta\n', 'a deleted directory and its file are restored');
  t.equal((await r.call('fs.readlink', { path: '/srv/p/link' })).target, 'a.md', 'the symlink is restored');
  t.equal((await r.call('fs.stat', { path: '/srv/p/a.md' })).mode, '0640', 'the mode is restored');
  t.ok((await r.call('vcs.status', {})).clean, 'the tree equals the revert commit');

  const log = (await r.call('vcs.log', {})).commits;
  t.same(
    log.map((c) => c.message),
    [`revert to ${base.hash}`, 'second', 'base'],
    'newest first, the revert included',
  );
  t.same(
    (await r.call('vcs.log', { limit: 2 })).commits.map((c) => c.hash),
    [rv.hash, second.hash],
  );

  // and forward again: reverting to the second commit brings its state back
  await r.call('vcs.revert', { hash: second.hash });
  t.same(await names(r, '/srv/p'), ['a.md', 'later.md', 'newdir']);
  t.equal(await readText(r, '/srv/p/newdir/deep.md'), 'deep\n');
  t.equal(await readText(r, '/srv/p/a.md'), 'ALPHA\n');

  await t.rejects(r.call('vcs.revert', { hash: 'abc' }), { code: 'EINVAL' }, 'fewer than 4 digits');
  await t.rejects(r.call('vcs.revert', { hash: 'zzzz' }), { code: 'EINVAL' }, 'not hex');
  const unknown = [...'0123456789abcdef'].map((x) => x.repeat(8)).find((p) => !log.some((c) => c.hash.startsWith(p)))!;
  await t.rejects(r.call('vcs.revert', { hash: unknown }), { code: 'ENOENT' }, 'no such commit');
});

t.test('uncommitted work survives a revert in the auto-save commit', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/w/notes.md' }, text('v1\n'));
  const v1 = await r.call('vcs.commit', { message: 'v1' });
  await r.call('fs.write', { path: '/srv/w/notes.md' }, text('v2 unsaved\n'));
  await r.call('fs.write', { path: '/srv/w/draft.md' }, text('draft\n'));

  const rv = await r.call('vcs.revert', { hash: v1.hash });
  t.type(rv.saved, 'string', 'the uncommitted changes were committed first');
  t.equal(await readText(r, '/srv/w/notes.md'), 'v1\n');
  t.same(await names(r, '/srv/w'), ['notes.md']);
  const log = (await r.call('vcs.log', {})).commits;
  t.equal(log[0]!.hash, rv.hash);
  t.equal(log[1]!.hash, rv.saved, 'the auto-save commit sits between');
  t.equal(log[1]!.parent, v1.hash);

  // the saved work is in history: read it back, then revert to it
  const old = await r.request('vcs.cat', { rev: rv.saved!, path: '/srv/w/draft.md' });
  t.equal(old.data.toString(), 'draft\n');
  const back = await r.call('vcs.revert', { hash: rv.saved! });
  t.equal(back.saved, null);
  t.equal(await readText(r, '/srv/w/notes.md'), 'v2 unsaved\n');
  t.equal(await readText(r, '/srv/w/draft.md'), 'draft\n');
});

t.test('per-file history lists only the commits that touched the file', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/h/a.md' }, text('a1\n'));
  const c1 = await r.call('vcs.commit', { message: 'create a' });
  await r.call('fs.write', { path: '/srv/h/b.md' }, text('b1\n'));
  const c2 = await r.call('vcs.commit', { message: 'create b' });
  await r.call('fs.write', { path: '/srv/h/a.md' }, text('a2\n'));
  const c3 = await r.call('vcs.commit', { message: 'edit a' });
  await r.call('fs.chmod', { path: '/srv/h/a.md', mode: '0600' });
  const c4 = await r.call('vcs.commit', { message: 'chmod a' });
  await r.call('fs.unlink', { path: '/srv/h/a.md' });
  const c5 = await r.call('vcs.commit', { message: 'delete a' });
  await r.call('fs.write', { path: '/srv/h/b.md' }, text('b2\n'));
  const c6 = await r.call('vcs.commit', { message: 'edit b' });

  const la = (await r.call('vcs.log', { path: '/srv/h/a.md' })).commits.map((c) => c.hash);
  t.same(la, [c5.hash, c4.hash, c3.hash, c1.hash], 'a deleted file keeps its history');
  const lb = (await r.call('vcs.log', { path: '/srv/h/b.md' })).commits.map((c) => c.hash);
  t.same(lb, [c6.hash, c2.hash]);
  t.same(
    (await r.call('vcs.log', { path: '/srv/h/a.md', limit: 2 })).commits.map((c) => c.hash),
    [c5.hash, c4.hash],
  );
  t.same((await r.call('vcs.log', { path: '/srv/h/never.md' })).commits, []);
  const ld = (await r.call('vcs.log', { path: '/srv/h' })).commits.map((c) => c.hash);
  t.same(ld, [c6.hash, c5.hash, c4.hash, c3.hash, c2.hash, c1.hash], 'a directory is touched by every change below it');
});

t.test('diff gives exact unified text between commits and against the working tree', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  const before = ['# Title', '', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', ''].join('\n');
  await r.call('fs.write', { path: '/srv/d/doc.md' }, text(before));
  await r.call('fs.write', { path: '/srv/d/gone.md' }, text('bye\n'));
  const c1 = await r.call('vcs.commit', { message: 'c1' });
  const after = before.replace('three\n', 'THREE\n').replace('nine\n', 'nine\nten\n');
  await r.call('fs.write', { path: '/srv/d/doc.md' }, text(after));
  await r.call('fs.unlink', { path: '/srv/d/gone.md' });
  await r.call('fs.write', { path: '/srv/d/fresh.md' }, text('hello\nworld\n'));

  // By hand: old line 5 changes (context 3 either side: lines 2-8) and a line is added after old
  // line 11 (context 9-11). The two hunks touch, so they form one hunk over old lines 2-11.
  const docDiff = [
    '--- a/srv/d/doc.md',
    '+++ b/srv/d/doc.md',
    '@@ -2,10 +2,11 @@',
    ' ',
    ' one',
    ' two',
    '-three',
    '+THREE',
    ' four',
    ' five',
    ' six',
    ' seven',
    ' eight',
    ' nine',
    '+ten',
    '',
  ].join('\n');
  const freshDiff = ['--- /dev/null', '+++ b/srv/d/fresh.md', '@@ -0,0 +1,2 @@', '+hello', '+world', ''].join('\n');
  const goneDiff = ['--- a/srv/d/gone.md', '+++ /dev/null', '@@ -1,1 +0,0 @@', '-bye', ''].join('\n');

  t.equal(
    (await r.call('vcs.diff', { path: '/srv/d/doc.md' })).diff,
    docDiff,
    'HEAD against the working tree, one path',
  );
  // paths in path order: doc.md, fresh.md, gone.md
  t.equal(
    (await r.call('vcs.diff', { path: '/srv/d' })).diff,
    docDiff + freshDiff + goneDiff,
    'a directory path covers its files',
  );

  const c2 = await r.call('vcs.commit', { message: 'c2' });
  t.equal((await r.call('vcs.diff', {})).diff, '', 'no difference right after a commit');
  t.equal(
    (await r.call('vcs.diff', { from: c1.hash, to: c2.hash, path: '/srv/d/doc.md' })).diff,
    docDiff,
    'between two commits',
  );
  t.equal(
    (await r.call('vcs.diff', { from: c1.hash.slice(0, 6), to: c2.hash.slice(0, 6), path: '/srv/d' })).diff,
    docDiff + freshDiff + goneDiff,
  );
  const reverse = (await r.call('vcs.diff', { from: c2.hash, to: c1.hash, path: '/srv/d/fresh.md' })).diff;
  t.equal(
    reverse,
    ['--- a/srv/d/fresh.md', '+++ /dev/null', '@@ -1,2 +0,0 @@', '-hello', '-world', ''].join('\n'),
    'reversed direction',
  );
  t.equal(
    (await r.call('vcs.diff', { from: c1.hash })).diff.startsWith('--- a/srv/d/doc.md\n'),
    true,
    'from a commit to the working tree',
  );
});

t.test(
  'a diff of two large unrelated versions ends as a whole replacement instead of stalling the daemon',
  async (t) => {
    const d = await quickCore(t);
    const r = d.client.as({});
    const lines = (seed: number) => {
      let x = seed;
      return Array.from({ length: 20000 }, () => {
        x = (x * 1103515245 + 12345) & 0x7fffffff;
        return `line ${x}`;
      });
    };
    const a = lines(1);
    const b = lines(2);
    await r.call('fs.write', { path: '/srv/big.md' }, text(a.join('\n') + '\n'));
    const c1 = await r.call('vcs.commit', { message: 'a' });
    await r.call('fs.write', { path: '/srv/big.md' }, text(b.join('\n'))); // and no final newline
    // Myers' diff of these takes minutes; past its time budget the daemon answers a valid full replacement
    const expected = [
      '--- a/srv/big.md',
      '+++ b/srv/big.md',
      '@@ -1,20000 +1,20000 @@',
      ...a.map((l) => '-' + l),
      ...b.map((l) => '+' + l),
      '\\ No newline at end of file',
      '',
    ].join('\n');
    t.equal((await r.call('vcs.diff', { from: c1.hash, path: '/srv/big.md' })).diff, expected);
    t.equal((await r.call('fs.stat', { path: '/srv/big.md' })).kind, 'file', 'still serving');
  },
);
