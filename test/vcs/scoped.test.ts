/**
 * History for many users (issue 15), in-process: a commit takes only the pending changes the
 * caller may read (optionally narrowed by paths) and records who changed each path; the log shows
 * a caller only commits touching what it may read, plus its own; `vcs.show` lists a commit's changes.
 */
import t from 'tap';
import { makePersonas, readText, text } from '../helpers/daemon.js';
import { quickCore } from './lib.js';

async function world(t: Parameters<typeof quickCore>[0]) {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/shared', parents: true, mode: '1777' });
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v1\n'));
  await p.root.call('vcs.commit', { message: 'base' });
  return p;
}

t.test("alice's commit takes only what her status shows; admin's private change stays pending", async (t) => {
  const p = await world(t);
  await p.admin.call('fs.write', { path: '/shared/admin-secret.md', mode: '0600' }, text('secret\n'));
  await p.admin.call('fs.write', { path: 'private.md' }, text('in admin home\n'));
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v2\n'));
  await p.alice.call('fs.write', { path: '/shared/new/deep.md' }, text('deep\n'));

  const st = await p.alice.call('vcs.status', {});
  t.same([st.added, st.modified, st.deleted], [['/shared/new/deep.md'], ['/shared/a.md'], []]);
  const c = await p.alice.call('vcs.commit', { message: 'alice work' });
  t.equal(c.changes, 2, 'exactly what her status showed');
  t.equal(c.author, 'alice');

  const detail = await p.admin.call('vcs.show', { rev: c.hash });
  t.same(
    detail.changes.map((x) => x.path),
    ['/shared/a.md', '/shared/new/deep.md'],
    "admin's files are not in alice's commit",
  );
  await t.rejects(
    p.root.request('vcs.cat', { rev: c.hash, path: '/shared/admin-secret.md' }),
    { code: 'ENOENT' },
    'nor in its tree',
  );

  const admin = await p.admin.call('vcs.status', {});
  t.same(admin.added, ['/home/admin/private.md', '/shared/admin-secret.md'], "admin's changes stay pending for admin");
  t.same(admin.modified, [], "alice's committed changes are no longer pending");
  t.ok((await p.alice.call('vcs.status', {})).clean, 'alice has nothing left to commit');

  const all = await p.admin.call('vcs.commit', { message: 'admin work' });
  t.equal(all.changes, 2, 'wheel commits the rest');
  t.ok((await p.admin.call('vcs.status', {})).clean);
  t.equal(
    (await p.root.request('vcs.cat', { rev: 'HEAD', path: '/shared/a.md' })).data.toString(),
    'a v2\n',
    "alice's change is in the tree of the commit after",
  );
});

t.test('commit paths narrow it; changes outside stay pending', async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v2\n'));
  await p.alice.call('fs.write', { path: '/shared/b.md' }, text('b\n'));
  await p.alice.call('fs.write', { path: 'notes/x.md' }, text('x\n'));
  const c = await p.alice.call('vcs.commit', { message: 'just b and notes', paths: ['/shared/b.md', 'notes'] });
  t.equal(c.changes, 2);
  const st = await p.alice.call('vcs.status', {});
  t.same([st.added, st.modified], [[], ['/shared/a.md']], 'a.md is still pending');
  t.equal(
    (await p.root.request('vcs.cat', { rev: c.hash, path: '/shared/a.md' })).data.toString(),
    'a v1\n',
    'the commit holds a.md as its parent had it',
  );
  t.equal(
    (await p.root.request('vcs.cat', { rev: c.hash, path: '/home/alice/notes/x.md' })).data.toString(),
    'x\n',
    'a relative path is from the home',
  );
  t.equal(await readText(p.alice, '/shared/a.md'), 'a v2\n', 'the working tree is untouched');
});

t.test("an agent's changes stay attributed to it after alice commits them", async (t) => {
  const p = await world(t);
  await p.agentForAlice.call('fs.write', { path: '/shared/by-agent.md' }, text('agent\n'));
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('alice\n'));
  await p.bob.call('fs.write', { path: '/shared/by-bob.md' }, text('bob\n'));
  const c = await p.alice.call('vcs.commit', { message: 'accept the agent' });
  const d = await p.alice.call('vcs.show', { rev: c.hash });
  t.same(d.commit.author, 'alice');
  t.same(d.changes, [
    { path: '/shared/a.md', op: 'modified', by: 'alice' },
    { path: '/shared/by-agent.md', op: 'added', by: 'agent', on_behalf_of: 'alice' },
    { path: '/shared/by-bob.md', op: 'added', by: 'bob' },
  ]);
  // a removed directory attributes everything below it to whoever removed it
  await p.bob.call('fs.write', { path: '/shared/dir/one.md' }, text('1\n'));
  await p.bob.call('vcs.commit', { message: 'bob dir' });
  await p.root.call('fs.chmod', { path: '/shared/dir', mode: '0777' });
  await p.alice.call('fs.write', { path: '/shared/dir/two.md' }, text('2\n'));
  await p.root.call('fs.delete', { path: '/shared/dir', recursive: true });
  const r = await p.root.call('vcs.commit', { message: 'cleanup' });
  const rd = await p.root.call('vcs.show', { rev: r.hash });
  t.same(
    rd.changes.map((x) => [x.path, x.op, x.by]),
    [['/shared/dir/one.md', 'deleted', 'root']],
  );
});

t.test("bob does not see alice's commit messages, only commits touching what he may read, and his own", async (t) => {
  const p = await world(t);
  await p.alice.call('fs.write', { path: 'diary.md' }, text('dear diary\n'));
  await p.alice.call('vcs.commit', { message: 'alice private: breaking up with bob' });
  await p.bob.call('fs.write', { path: 'todo.md' }, text('todo\n'));
  await p.bob.call('vcs.commit', { message: 'bob own' });
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('public edit\n'));
  await p.alice.call('vcs.commit', { message: 'alice public' });

  const bob = (await p.bob.call('vcs.log', {})).commits.map((c) => c.message);
  t.same(bob, ['alice public', 'bob own', 'base']);
  const alice = (await p.alice.call('vcs.log', {})).commits.map((c) => c.message);
  t.same(alice, ['alice public', 'alice private: breaking up with bob', 'base']);
  t.same((await p.admin.call('vcs.log', {})).commits.length, 4, 'wheel sees every commit');
  const priv = (await p.alice.call('vcs.log', {})).commits[1]!.hash;
  await t.rejects(p.bob.call('vcs.show', { rev: priv }), { code: 'ENOENT' }, "bob cannot open alice's private commit");

  // limit and cursor page through the log
  const page1 = await p.admin.call('vcs.log', { limit: 3 });
  t.equal(page1.commits.length, 3);
  t.equal(page1.next_cursor, page1.commits[2]!.hash);
  const page2 = await p.admin.call('vcs.log', { limit: 3, cursor: page1.next_cursor! });
  t.same(
    page2.commits.map((c) => c.message),
    ['base'],
  );
  t.equal(page2.next_cursor, undefined);
  // one file's history
  t.same(
    (await p.bob.call('vcs.log', { path: '/shared/a.md' })).commits.map((c) => c.message),
    ['alice public', 'base'],
  );
});

t.test(
  "revert: restore one file; others' private changes do not block it; never resurrect what is not yours",
  async (t) => {
    const p = await world(t);
    await p.alice.call('fs.write', { path: 'notes/a.md' }, text('a v1\n'));
    await p.alice.call('fs.write', { path: 'notes/b.md' }, text('b v1\n'));
    await p.bob.call('fs.write', { path: '/shared/bob.md' }, text('bob v1\n'));
    const c1 = await p.root.call('vcs.commit', { message: 'v1' });
    await p.alice.call('fs.write', { path: 'notes/a.md' }, text('a v2\n'));
    await p.alice.call('fs.write', { path: 'notes/b.md' }, text('b v2\n'));
    await p.alice.call('vcs.commit', { message: 'v2' });
    // admin has a private pending change; bob deleted his file (bob's own, readable by alice)
    await p.admin.call('fs.write', { path: 'secret.md' }, text('pending\n'));
    await p.bob.call('fs.unlink', { path: '/shared/bob.md' });

    const one = await p.alice.call('vcs.revert', { hash: c1.hash, paths: ['notes/a.md'] });
    t.equal(await readText(p.alice, 'notes/a.md'), 'a v1\n', 'the one file is restored');
    t.equal(await readText(p.alice, 'notes/b.md'), 'b v2\n', 'its neighbour is not');
    t.equal(one.saved, null, 'alice had nothing pending there');
    t.equal(
      (await p.alice.call('vcs.show', { rev: one.hash })).changes.length,
      1,
      'the revert commit holds that one change',
    );
    t.same(
      (await p.admin.call('vcs.status', {})).added,
      ['/home/admin/secret.md'],
      "admin's pending change is untouched and still pending",
    );

    // the whole revert would bring back bob's file: refused, nothing changes, the path is named
    await t.rejects(
      p.alice.call('vcs.revert', { hash: c1.hash }),
      { code: 'EACCES', message: /\/shared\/bob\.md/ },
      "a non-owner's revert does not resurrect bob's file",
    );
    t.equal(await readText(p.alice, 'notes/b.md'), 'b v2\n', 'all-or-nothing');
    await t.rejects(p.root.call('fs.stat', { path: '/shared/bob.md' }), { code: 'ENOENT' });
    // narrowed to her own files it works; bob may bring back his own
    await p.alice.call('vcs.revert', { hash: c1.hash, paths: ['/home/alice'] });
    t.equal(await readText(p.alice, 'notes/b.md'), 'b v1\n');
    await p.bob.call('vcs.revert', { hash: c1.hash, paths: ['/shared/bob.md'] });
    t.equal(await readText(p.bob, '/shared/bob.md'), 'bob v1\n', 'bob restores his own file');
    t.same((await p.admin.call('vcs.status', {})).added, ['/home/admin/secret.md'], 'still pending after every revert');
  },
);

t.test("undo an agent: exactly its changes, committed or pending, and nobody else's", async (t) => {
  const p = await world(t);
  await p.root.call('fs.chmod', { path: '/shared/a.md', mode: '0666' });
  const base = (await p.root.call('vcs.commit', { message: 'a.md open to all' })).hash;
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('agent broke a\n'));
  await p.agentForAlice.call('fs.write', { path: '/shared/agent-new.md' }, text('junk\n'));
  await p.alice.call('fs.write', { path: '/shared/alice.md' }, text('alice keeps this\n'));
  await p.alice.call('vcs.commit', { message: 'accept agent work' });
  await p.agentForAlice.call('fs.write', { path: '/shared/pending.md' }, text('more junk\n'));
  const r = await p.alice.call('vcs.undo', { actor: 'agent', since: base });
  t.same(r.paths, ['/shared/a.md', '/shared/agent-new.md', '/shared/pending.md']);
  t.equal(await readText(p.alice, '/shared/a.md'), 'a v1\n', "the agent's edit is undone");
  await t.rejects(
    p.alice.call('fs.stat', { path: '/shared/agent-new.md' }),
    { code: 'ENOENT' },
    'its committed new file is gone',
  );
  await t.rejects(p.alice.call('fs.stat', { path: '/shared/pending.md' }), { code: 'ENOENT' }, 'and its pending one');
  t.equal(await readText(p.alice, '/shared/alice.md'), 'alice keeps this\n', "alice's own change stays");
  t.match(r.commit.message, /^undo agent since /);
  // bob may not undo the agent's work where he could not have undone it by hand
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('agent again\n'));
  await p.agentForAlice.call('fs.write', { path: '/shared/agent2.md' }, text('new\n'));
  await t.rejects(
    p.bob.call('vcs.undo', { actor: 'agent' }),
    { code: 'EACCES', message: /agent2\.md/ },
    "removing alice's file in a sticky directory",
  );
  t.equal(await readText(p.alice, '/shared/a.md'), 'agent again\n', 'all-or-nothing');
});

t.test('no empty commits: a revert, restore or undo that changes nothing records nothing', async (t) => {
  const p = await world(t);
  const head = (await p.root.call('vcs.log', { limit: 1 })).commits[0]!.hash;
  await t.rejects(
    p.root.call('vcs.revert', { hash: 'HEAD' }),
    {
      code: 'EINVAL',
      message: `EINVAL: nothing to revert: what you may restore already is as commit ${head} has it (no commit recorded)`,
    },
    'root: the whole tree already is as HEAD',
  );
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v2\n'));
  await t.rejects(
    p.alice.call('vcs.revert', { hash: 'HEAD', paths: ['/shared/b.md'] }),
    { code: 'EINVAL', message: /nothing to revert: the paths given already are as commit/ },
    'a path that did not change (nor exists)',
  );
  // admin's private change is no change for alice, and not hers to save either
  await p.admin.call('fs.write', { path: '/shared/admin.md', mode: '0600' }, text('private\n'));
  await p.alice.call('fs.write', { path: '/shared/a.md' }, text('a v1\n'));
  await t.rejects(p.alice.call('vcs.revert', { hash: 'HEAD' }), { code: 'EINVAL' });
  t.equal((await p.root.call('vcs.log', { limit: 1 })).commits[0]!.hash, head, 'no commit, no auto-save');
  t.same((await p.admin.call('vcs.status', {})).added, ['/shared/admin.md'], "admin's change untouched and pending");
  // undo: the agent's change is already undone by hand
  await p.root.call('fs.chmod', { path: '/shared/a.md', mode: '0666' });
  await p.root.call('vcs.commit', { message: 'open a.md' });
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('agent\n'));
  const c = await p.alice.call('vcs.commit', { message: 'agent', paths: ['/shared/a.md'] });
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('a v1\n'));
  await t.rejects(p.alice.call('vcs.undo', { actor: 'agent', since: 'HEAD~1' }), {
    code: 'EINVAL',
    message: /^EINVAL: nothing to undo: the paths given already are as commit \w{12} has them/,
  });
  t.equal((await p.root.call('vcs.log', { limit: 1 })).commits[0]!.hash, c.hash, 'no commit recorded');
});
