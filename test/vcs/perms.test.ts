/**
 * Status, diff, grep, find and tree show each persona only what it may read; revert needs write
 * permission on everything it would change and is all-or-nothing.
 */
import t from 'tap';
import { makePersonas, readText, text } from '../helpers/daemon.js';
import { coreFrom } from '../helpers/core.js';
import { quickCore } from './lib.js';

t.test("status, diff, grep, find and tree never leak alice's private files to bob", async (t) => {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/srv/pub', parents: true, mode: '1777' });
  await p.alice.call('fs.write', { path: 'private/doomed.md' }, text('needle doomed\n'));
  await p.alice.call('fs.write', { path: 'private/kept.md' }, text('needle kept v1\n'));
  await p.root.call('vcs.commit', { message: 'base' });

  // after the commit: alice adds, modifies and deletes in her 0700 home, and adds in public
  await p.alice.call('fs.write', { path: 'private/secret-plan.md' }, text('needle private\n'));
  await p.alice.call('fs.write', { path: 'private/kept.md' }, text('needle kept v2\n'));
  await p.alice.call('fs.unlink', { path: 'private/doomed.md' });
  await p.alice.call('fs.write', { path: '/srv/pub/shared.md' }, text('needle shared\n'));
  await p.alice.call('fs.write', { path: '/srv/pub/locked.md', mode: '0600' }, text('needle locked\n'));

  const bob = await p.bob.call('vcs.status', {});
  t.same([bob.added, bob.modified, bob.deleted], [['/srv/pub/shared.md'], [], []], 'bob sees only what he may read');
  t.notMatch(bob.text, /alice|locked/);
  const admin = await p.admin.call('vcs.status', {});
  t.same(
    [admin.added, admin.modified, admin.deleted],
    [
      ['/home/alice/private/secret-plan.md', '/srv/pub/locked.md', '/srv/pub/shared.md'],
      ['/home/alice/private/kept.md'],
      ['/home/alice/private/doomed.md'],
    ],
    'wheel sees everything',
  );
  const alice = await p.alice.call('vcs.status', {});
  t.same(
    alice.added,
    ['/home/alice/private/secret-plan.md', '/srv/pub/locked.md', '/srv/pub/shared.md'],
    'alice sees her own',
  );

  const bobDiff = (await p.bob.call('vcs.diff', {})).diff;
  t.match(bobDiff, /needle shared/);
  t.notMatch(bobDiff, /private|locked|doomed|kept/, "bob's diff has neither names nor content of alice's files");
  t.match((await p.admin.call('vcs.diff', {})).diff, /needle private/);
  await t.rejects(
    p.bob.request('vcs.cat', { rev: bob.head!, path: '/home/alice/private/kept.md' }),
    { code: 'EACCES' },
    'old content is as private as current',
  );

  // a path's history is no existence oracle: existing and missing private paths answer alike
  await t.rejects(p.bob.call('vcs.log', { path: '/home/alice/private/kept.md' }), { code: 'EACCES' });
  await t.rejects(p.bob.call('vcs.log', { path: '/home/alice/private/no-such.md' }), { code: 'EACCES' });
  t.equal((await p.admin.call('vcs.log', { path: '/home/alice/private/kept.md' })).commits.length, 1);
  t.equal(
    (await p.bob.call('vcs.log', {})).commits.length,
    1,
    'bob sees the one commit, which touched /srv/pub (readable to him)',
  );

  const bobGrep = await p.bob.call('search.grep', { pattern: 'needle', path: '/', recursive: true });
  t.same(
    bobGrep.results.map((r) => r.file),
    ['/srv/pub/shared.md'],
    'grep skips what bob cannot read',
  );
  const adminGrep = await p.admin.call('search.grep', { pattern: 'needle', path: '/', recursive: true });
  t.same(
    adminGrep.results.map((r) => r.file),
    ['/home/alice/private/kept.md', '/home/alice/private/secret-plan.md', '/srv/pub/locked.md', '/srv/pub/shared.md'],
  );
  await t.rejects(p.bob.call('search.grep', { pattern: 'needle', path: '/home/alice', recursive: true }), {
    code: 'EACCES',
  });
  await t.rejects(p.bob.call('search.grep', { pattern: 'needle', path: '/srv/pub/locked.md' }), { code: 'EACCES' });

  const bobFind = (await p.bob.call('search.find', { path: '/', name: '*.md' })).results;
  t.notOk(
    bobFind.some((f) => f.startsWith('/home/alice/')),
    "find never walks into alice's home",
  );
  t.ok(bobFind.includes('/srv/pub/shared.md'));
  const adminFind = (await p.admin.call('search.find', { path: '/', name: '*.md' })).results;
  t.ok(adminFind.includes('/home/alice/private/secret-plan.md'), 'wheel finds everything');
  await t.rejects(p.bob.call('search.find', { path: '/home/alice', name: '*' }), { code: 'EACCES' });

  const bobTree = (await p.bob.call('search.tree', { path: '/' })).text;
  t.match(bobTree, /shared\.md/);
  t.notMatch(bobTree, /secret-plan|kept\.md|private/, "tree shows alice's home but not inside it");
  t.match((await p.admin.call('search.tree', { path: '/' })).text, /secret-plan\.md/);
  await t.rejects(p.bob.call('search.tree', { path: '/home/alice' }), { code: 'EACCES' });

  // a delegate sees the intersection: the agent acting for bob cannot see alice's files either
  await p.bob.call('auth.delegationAdd', { agent: 'agent' });
  const agentForBob = d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'bob' });
  const viaAgent = await agentForBob.call('search.grep', { pattern: 'needle', path: '/', recursive: true });
  t.notOk(viaAgent.results.some((r) => r.file.startsWith('/home/alice/')));
  t.notOk((await agentForBob.call('vcs.status', {})).text.includes('alice'));
});

t.test('revert needs write permission on every entry it changes, all-or-nothing', async (t) => {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/srv/pub', parents: true, mode: '1777' });
  await p.root.call('fs.mkdir', { path: '/srv/rootonly', parents: true });
  await p.alice.call('fs.write', { path: '/srv/pub/alice.md' }, text('alice v1\n'));
  await p.bob.call('fs.write', { path: '/srv/pub/bob.md' }, text('bob v1\n'));
  const c1 = await p.bob.call('vcs.commit', { message: 'v1' });
  t.equal(c1.author, 'bob', 'any caller may commit');

  await p.alice.call('fs.write', { path: '/srv/pub/alice.md' }, text('alice v2\n'));
  await p.bob.call('fs.write', { path: '/srv/pub/bob.md' }, text('bob v2\n'));
  const c2 = await p.alice.call('vcs.commit', { message: 'v2' });
  await p.bob.call('fs.write', { path: '/srv/pub/bob.md' }, text('bob v3 uncommitted\n'));
  const before = (await p.root.call('vcs.log', {})).commits.map((c) => c.hash);

  await t.rejects(p.bob.call('vcs.revert', { hash: c1.hash }), { code: 'EACCES' }, "bob may not rewrite alice's file");
  t.equal(await readText(p.root, '/srv/pub/alice.md'), 'alice v2\n', "nothing changed: not alice's file");
  t.equal(
    await readText(p.root, '/srv/pub/bob.md'),
    'bob v3 uncommitted\n',
    "nothing changed: not even bob's own file",
  );
  t.same(
    (await p.root.call('vcs.log', {})).commits.map((c) => c.hash),
    before,
    'no auto-save commit, no revert commit',
  );
  t.same((await p.root.call('vcs.status', {})).modified, ['/srv/pub/bob.md']);

  // a later addition in a directory bob cannot write: removing it needs w on that directory
  await p.root.call('fs.write', { path: '/srv/rootonly/r.md' }, text('root\n'));
  const c3 = await p.root.call('vcs.commit', { message: 'root adds' });
  await p.bob.call('fs.write', { path: '/srv/pub/bob.md' }, text('bob v4\n'));
  const c4 = await p.bob.call('vcs.commit', { message: 'bob v4' });
  await t.rejects(p.bob.call('vcs.revert', { hash: c2.hash }), { code: 'EACCES' }, "bob may not delete root's file");
  t.same(
    (await p.root.call('fs.list', { path: '/srv/rootonly' })).entries.map((e) => e.name),
    ['r.md'],
  );
  t.equal(await readText(p.root, '/srv/pub/bob.md'), 'bob v4\n');

  // where every change is his own, bob may revert
  const own = await p.bob.call('vcs.revert', { hash: c3.hash });
  t.equal(own.reverted_to, c3.hash);
  t.equal(own.commit.author, 'bob');
  t.equal(await readText(p.root, '/srv/pub/bob.md'), 'bob v3 uncommitted\n');

  // wheel may revert anything; a carol who owns nothing here may not
  await t.rejects(p.carol.call('vcs.revert', { hash: c4.hash }), { code: 'EACCES' });
  const byAdmin = await p.admin.call('vcs.revert', { hash: c1.hash });
  t.equal(byAdmin.saved, null);
  t.equal(await readText(p.root, '/srv/pub/alice.md'), 'alice v1\n');
  t.equal(await readText(p.root, '/srv/pub/bob.md'), 'bob v1\n');
  t.same(
    (await p.root.call('fs.list', { path: '/srv/rootonly' })).entries.map((e) => e.name),
    [],
  );
});

t.test('revert cannot do what the caller could not do by hand', async (t) => {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/srv/pub', parents: true, mode: '1777' });
  await p.root.call('fs.mkdir', { path: '/srv/r', parents: true });
  await p.alice.call('fs.write', { path: '/srv/pub/team.md', mode: '0666' }, text('team\n'));
  await p.alice.call('fs.symlink', { target: 'team.md', path: '/srv/pub/alice-link' });
  const c1 = await p.root.call('vcs.commit', { message: 'c1' });

  // alice tightens her file to the team and points her link elsewhere
  await p.alice.call('fs.chown', { path: '/srv/pub/team.md', group: 'team' });
  await p.alice.call('fs.chmod', { path: '/srv/pub/team.md', mode: '0660' });
  await p.alice.call('fs.unlink', { path: '/srv/pub/alice-link' });
  await p.alice.call('fs.symlink', { target: '/srv/r', path: '/srv/pub/alice-link' });
  const c2 = await p.root.call('vcs.commit', { message: 'c2' });
  t.equal(c2.changes, 2);

  // bob may write the file (group team) but may not chmod or chgrp it, nor replace alice's link
  await p.bob.call('fs.write', { path: '/srv/pub/team.md' }, text('team, edited by bob\n'));
  await t.rejects(p.bob.call('fs.chmod', { path: '/srv/pub/team.md', mode: '0666' }), { code: 'EPERM' }, 'by hand: no');
  await t.rejects(p.bob.call('vcs.revert', { hash: c1.hash }), { code: 'EACCES' }, 'by revert: no either');
  t.equal((await p.root.call('fs.stat', { path: '/srv/pub/team.md' })).mode, '0660', 'mode unchanged');
  t.equal((await p.root.call('fs.readlink', { path: '/srv/pub/alice-link' })).target, '/srv/r', 'link unchanged');
  t.equal((await p.root.call('vcs.log', {})).commits[0]!.hash, c2.hash, 'nothing committed');

  // a directory bob may not remove by hand (in root's /srv/r), holding a file he may remove
  const c3 = await p.root.call('vcs.commit', { message: 'c3: bob edit' });
  await p.root.call('fs.mkdir', { path: '/srv/r/open', mode: '0777' });
  await p.bob.call('fs.write', { path: '/srv/r/open/bob.md' }, text('bob\n'));
  await t.rejects(p.bob.call('vcs.revert', { hash: c3.hash }), { code: 'EACCES' }, 'revert may not remove it');
  t.same(
    (await p.root.call('fs.list', { path: '/srv/r/open' })).entries.map((e) => e.name),
    ['bob.md'],
  );
  await p.bob.call('fs.unlink', { path: '/srv/r/open/bob.md' });
  await t.rejects(
    p.bob.call('fs.rmdir', { path: '/srv/r/open' }),
    { code: 'EACCES' },
    'by hand he may empty it but not remove it',
  );

  // what alice may do by hand, she may revert (root's directory gone, the rest is hers)
  await t.rejects(
    p.alice.call('vcs.revert', { hash: c1.hash }),
    { code: 'EACCES' },
    "not while root's directory is in the way",
  );
  await p.root.call('fs.rmdir', { path: '/srv/r/open' });
  const back = await p.alice.call('vcs.revert', { hash: c1.hash });
  t.equal(back.reverted_to, c1.hash);
  t.equal((await p.root.call('fs.stat', { path: '/srv/pub/team.md' })).mode, '0666');
  t.equal((await p.root.call('fs.readlink', { path: '/srv/pub/alice-link' })).target, 'team.md');
});

t.test(
  "a user's revert of a deep chain checks each entry by walking down once, not from the top per level",
  async (t) => {
    const c = await coreFrom(t);
    await c.root.call('admin.userAdd', { name: 'alice' });
    const alice = c.as({ authorization: 'User alice' });
    const chain = '/home/alice/deep' + '/d'.repeat(996); // the files at level 1,000
    const FILES = 20;
    const base = await alice.call('vcs.commit', { message: 'before the chain' });
    await alice.call('fs.mkdir', { path: chain, parents: true });
    for (let i = 0; i < FILES; i++) await alice.call('fs.write', { path: `${chain}/f${i}.md` }, text(`v${i}`));
    const full = await alice.call('vcs.commit', { message: 'the chain' });
    // The checks looked each level's entry up from the top of the commit's tree (and each file's
    // nearest directory from `/` per level): O(depth²) per file; 50 files held the event loop ~3 s.
    const trees = c.core.vcs;
    const entryAt = trees.entryAt.bind(trees);
    let lookups = 0;
    trees.entryAt = (tree, rel) => {
      lookups++;
      return entryAt(tree, rel);
    };
    await alice.call('vcs.revert', { hash: base.hash });
    await t.rejects(
      alice.call('fs.stat', { path: '/home/alice/deep' }),
      { code: 'ENOENT' },
      'removed, every level checked',
    );
    const removing = lookups;
    await alice.call('vcs.revert', { hash: full.hash });
    t.equal(await readText(alice, `${chain}/f${FILES - 1}.md`), `v${FILES - 1}`, 'brought back, every level checked');
    t.ok(removing <= 10, `${removing} look-ups from the top of a tree to remove ${FILES} files 1,000 levels down`);
    t.ok(lookups - removing <= 10, `${lookups - removing} to bring them back`);
  },
);
