/**
 * Every kind of acknowledged mutation survives kill -9 exactly (tree, attributes, times, inode
 * numbers, users, groups, tokens, workspaces), and state loaded at start behaves like state built live.
 */
import t from 'tap';
import { authSnapshot, blobId, makePersonas, readText, spawnDaemon, text, treeSnapshot } from '../helpers/daemon.js';

t.test('state after kill -9 is exactly the acknowledged state', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice, bob } = p;

  // one of everything
  await alice.call('fs.write', { path: 'a/b/c.md', mode: '0640' }, text('c'));
  await alice.call('fs.write', { path: 'a/same1.md' }, text('shared'));
  await alice.call('fs.write', { path: 'a/same2.md' }, text('shared'));
  await alice.call('fs.write', { path: 'a/app.md', append: true }, text('x'));
  await alice.call('fs.write', { path: 'a/app.md', append: true }, text('y'));
  await alice.call('fs.truncate', { path: 'a/app.md', size: 5 });
  await alice.call('fs.symlink', { target: 'b/c.md', path: 'a/link' });
  await alice.call('fs.mkdir', { path: 'a/empty', mode: '0711' });
  await alice.call('fs.copy', { src: 'a', dst: 'copy-of-a', recursive: true });
  await alice.call('fs.move', { src: 'copy-of-a/b', dst: 'moved-b' });
  await alice.call('fs.delete', { path: 'copy-of-a/same1.md' });
  await alice.call('fs.chmod', { path: 'a/b', mode: '2750' });
  await root.call('fs.chown', { path: '/home/alice/a/same2.md', owner: 'bob', group: 'team' });
  await alice.call('fs.utimens', { path: 'a/b/c.md', atime: '1111111111000000001', mtime: '1222222222000000002' });
  await root.call('fs.mkdir', { path: '/srv/ws', parents: true });
  const ws = await root.call('ws.create', { name: 'space', root_path: '/srv/ws' });
  const wsSecret = (await root.call('ws.token', { id: ws.id, name: 'w1', agent_token: p.tokens.agent })).secret;
  await root.call('admin.groupAdd', { name: 'late' });
  await root.call('admin.groupMemberAdd', { user: 'carol', group: 'late' });
  await root.call('admin.groupMemberDel', { user: 'carol', group: 'other' });
  const temp = await root.call('admin.userAdd', { name: 'temp', is_agent: true });
  await root.call('admin.userDel', { name: 'temp' });
  await bob.call('fs.write', { path: '/tmp/bob.md' }, text('bob'));
  await bob.call('fs.unlink', { path: '/tmp/bob.md' });
  await alice.call('fs.write', { path: 'a/hist.md' }, text('kept only by history'));
  const commit = await root.call('vcs.commit', { message: 'snapshot' });
  await alice.call('fs.write', { path: 'a/b/c.md' }, text('after commit'));

  const tree = await treeSnapshot(root);
  const auth = await authSnapshot(root);
  const stats = await root.call('fs.statfs', {});
  await d.kill('SIGKILL');
  await d.restart();
  const root2 = d.client.as({});

  t.equal(await treeSnapshot(root2), tree, 'the tree, modes, owners, times and inode numbers are identical');
  t.equal(await authSnapshot(root2), auth, 'users, groups and workspaces are identical');
  t.same(await root2.call('fs.statfs', {}), stats);
  t.equal(await readText(root2, '/home/alice/a/b/c.md'), 'after commit');
  t.equal(await readText(root2, '/home/alice/a/app.md'), 'xy\0\0\0');
  t.equal((await root2.call('fs.stat', { path: '/home/alice/a/same1.md' })).etag, blobId('shared'));

  t.test('tokens and workspace secrets still authenticate', async (t) => {
    t.equal((await d.client.as({ authorization: `Bearer ${p.tokens.admin}` }).call('auth.whoami', {})).user, 'admin');
    const w = await d.client.as({ authorization: `Bearer ${wsSecret}`, workspace: ws.id }).call('auth.whoami', {});
    t.equal(w.user, 'agent');
    t.equal(w.workspace?.id, ws.id);
    t.equal(w.workspace?.root_path, '/', 'a workspace caller sees its workspace as /, never its real location');
  });

  t.test('group changes hold after the restart', async (t) => {
    const who = await d.client.as({ authorization: 'User carol' }).call('auth.whoami', {});
    const groups = (await root2.call('admin.groupList', {})).groups;
    const gid = (n: string) => groups.find((g) => g.name === n)!.gid;
    t.ok(who.groups.includes(gid('late')));
    t.notOk(who.groups.includes(gid('other')));
  });

  t.test('ids are never reused, even those of deleted users', async (t) => {
    const u = await root2.call('admin.userAdd', { name: 'after' });
    t.ok(u.uid > temp.uid, `new uid ${u.uid} > deleted ${temp.uid}`);
    t.ok(u.gid > temp.gid, `new gid ${u.gid} > deleted ${temp.gid}`);
    const g = await root2.call('admin.groupAdd', { name: 'after2' });
    t.ok(g.gid > u.gid);
  });

  t.test('content and history loaded from disk behave as before', async (t) => {
    // overwrite and delete shared content: the other reference keeps it
    await d.client.as({ authorization: 'User alice' }).call('fs.delete', { path: 'a/same1.md' });
    t.equal(await readText(root2, '/home/alice/a/same2.md'), 'shared');
    t.equal((await root2.call('vcs.log', {})).commits[0]!.hash, commit.hash);
    const old = await root2.request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/b/c.md' });
    t.equal(old.data.toString(), 'c');
    t.equal((await root2.call('sys.fsck', {})).ok, true);
    // the last working-tree reference to a committed blob goes away after the restart
    await d.client.as({ authorization: 'User alice' }).call('fs.write', { path: 'a/hist.md' }, text('replaced'));
    await d.client.as({ authorization: 'User alice' }).call('fs.delete', { path: 'a/hist.md' });
    await root2.call('sys.gc', {});
    t.equal((await root2.call('sys.fsck', {})).ok, true);
    t.equal(
      (await root2.request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/hist.md' })).data.toString(),
      'kept only by history',
    );
    t.equal(await readText(root2, '/home/alice/a/same2.md'), 'shared');
  });

  t.test('a clean stop (SIGTERM) loses nothing either', async (t) => {
    await root2.call('fs.write', { path: '/srv/last.md' }, text('last'));
    const before = await treeSnapshot(root2);
    await d.kill('SIGTERM');
    await d.restart();
    t.equal(await treeSnapshot(d.client.as({})), before);
    t.equal(
      (await d.client.request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/hist.md' })).data.toString(),
      'kept only by history',
    );
    t.same((await d.client.call('sys.fsck', {})).problems, []);
  });
});

t.test('group membership changes apply to the very next request', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, carol } = p;
  await root.call('fs.write', { path: '/srv/team.md', mode: '0640' }, text('team'));
  await root.call('fs.chown', { path: '/srv/team.md', group: 'team' });
  await t.rejects(carol.call('fs.read', { path: '/srv/team.md' }), { code: 'EACCES' });
  await root.call('admin.groupMemberAdd', { user: 'carol', group: 'team' });
  t.equal(await readText(carol, '/srv/team.md'), 'team');
  await root.call('admin.groupMemberDel', { user: 'carol', group: 'team' });
  await t.rejects(carol.call('fs.read', { path: '/srv/team.md' }), { code: 'EACCES' });
  // wheel membership likewise
  await t.rejects(carol.call('admin.userList', {}), { code: 'EACCES' });
  await root.call('admin.groupMemberAdd', { user: 'carol', group: 'wheel' });
  t.equal((await carol.call('auth.whoami', {})).is_admin, true);
  await carol.call('admin.userList', {});
  await root.call('admin.groupMemberDel', { user: 'carol', group: 'wheel' });
  await t.rejects(carol.call('admin.userList', {}), { code: 'EACCES' });
  // a deleted user is gone at once, and a new user of the same name is someone else
  const oldUid = (await carol.call('auth.whoami', {})).uid;
  await carol.call('fs.write', { path: 'mine.md' }, text('carol'));
  await root.call('admin.userDel', { name: 'carol' });
  await t.rejects(carol.call('auth.whoami', {}), { code: 'EAUTH' });
  const again = await root.call('admin.userAdd', { name: 'carol' });
  t.not(again.uid, oldUid);
  const home = await root.call('fs.stat', { path: '/home/carol' });
  t.equal(home.uid, again.uid, 'the home is reclaimed for the new user');
  t.equal(home.mode, '0700');
});
