/**
 * Linux `fs.protected_symlinks` in sticky world-writable directories (DESIGN.md §3), performed over
 * the real daemon socket: bob plants `/tmp/report.md -> /home/alice/secret.md` and waits for alice.
 */
import t from 'tap';
import { makePersonas, readText, spawnDaemon, text, treeSnapshot } from '../helpers/daemon.js';
import { withCast } from '../helpers/http.js';

const denied = { code: 'EACCES', message: /sticky world-writable/ };

t.test('a link planted in sticky /tmp', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice, bob, agent, agentForAlice } = p;
  await alice.call('fs.write', { path: 'secret.md', mode: '0600' }, text('alice secret'));
  await alice.call('fs.write', { path: 'notes.md', mode: '0644' }, text('alice notes'));
  await bob.call('fs.symlink', { path: '/tmp/report.md', target: '/home/alice/secret.md' });
  await bob.call('fs.symlink', { path: '/tmp/home', target: '/home/alice' });

  t.test('is not followed for alice: her write is refused and her secret unchanged', async (t) => {
    const before = await treeSnapshot(root, '/home/alice');
    await t.rejects(alice.call('fs.write', { path: '/tmp/report.md' }, text('overwritten')), denied);
    await t.rejects(alice.call('fs.write', { path: '/tmp/report.md', append: true }, text('more')), denied);
    await t.rejects(
      alice.call('fs.write', { path: '/tmp/home/secret.md' }, text('overwritten')),
      denied,
      'nor as a directory on the way',
    );
    await t.rejects(alice.call('fs.truncate', { path: '/tmp/report.md', size: 0 }), denied);
    t.equal(await readText(alice, 'secret.md'), 'alice secret');
    t.equal(await treeSnapshot(root, '/home/alice'), before, 'nothing in her home changed');
  });

  t.test('is not followed for reads, stat, copy or grep either', async (t) => {
    await t.rejects(alice.call('fs.read', { path: '/tmp/report.md' }), denied);
    await t.rejects(alice.call('fs.read', { path: '/tmp/home/notes.md' }), denied);
    await t.rejects(alice.call('fs.stat', { path: '/tmp/report.md' }), denied);
    await t.rejects(alice.call('fs.copy', { src: '/tmp/report.md', dst: 'copy.md' }), denied);
    await t.rejects(alice.call('search.grep', { pattern: 'secret', path: '/tmp/report.md' }), denied);
    // the link itself is still there to see and remove
    const st = await alice.call('fs.stat', { path: '/tmp/report.md', nofollow: true });
    t.equal(st.kind, 'symlink');
    t.equal((await alice.call('fs.readlink', { path: '/tmp/report.md' })).target, '/home/alice/secret.md');
  });

  t.test("root is refused too (as on Linux): the link is neither root's nor /tmp's owner's", async (t) => {
    await t.rejects(root.call('fs.read', { path: '/tmp/report.md' }), denied);
    await t.rejects(root.call('fs.write', { path: '/tmp/report.md' }, text('x')), denied);
    t.equal(await readText(alice, 'secret.md'), 'alice secret');
  });

  t.test('delegation: the acting user (the delegate) is the follower', async (t) => {
    await t.rejects(agentForAlice.call('fs.write', { path: '/tmp/report.md' }, text('x')), denied);
    await root.call('fs.write', { path: '/srv/shared.md', mode: '0644' }, text('shared'));
    await alice.call('fs.symlink', { path: '/tmp/alice-link.md', target: '/srv/shared.md' });
    t.equal(await readText(agentForAlice, '/tmp/alice-link.md'), 'shared', "alice's own link, for alice");
    await t.rejects(
      agent.call('fs.read', { path: '/tmp/alice-link.md' }),
      denied,
      'the agent acting for itself does not own it',
    );
  });

  t.test('links the follower owns, or the directory owner owns, are followed', async (t) => {
    await alice.call('fs.symlink', { path: '/tmp/mine.md', target: '/home/alice/secret.md' });
    t.equal(await readText(alice, '/tmp/mine.md'), 'alice secret');
    await alice.call('fs.write', { path: '/tmp/mine.md' }, text('alice secret v2'));
    t.equal(await readText(alice, 'secret.md'), 'alice secret v2');
    await root.call('fs.symlink', { path: '/tmp/by-root.md', target: '/home/alice/notes.md' });
    t.equal(
      await readText(alice, '/tmp/by-root.md'),
      'alice notes',
      "/tmp belongs to root, so root's links are followed",
    );
    const e = await readText(bob, '/tmp/by-root.md').then(
      () => undefined,
      (err: Error & { code?: string }) => err,
    );
    t.equal(e?.code, 'EACCES', "the target's own permissions still apply (alice's home is 0700)");
    t.notMatch(e?.message ?? '', /sticky/);
  });

  t.test('only sticky and world-writable directories are protected', async (t) => {
    await root.call('fs.mkdir', { path: '/srv/open', parents: true, mode: '0777' });
    await root.call('fs.mkdir', { path: '/srv/sticky-group', mode: '1775' });
    await bob.call('fs.symlink', { path: '/srv/open/l.md', target: '/home/alice/notes.md' });
    t.equal(await readText(alice, '/srv/open/l.md'), 'alice notes', 'world-writable but not sticky');
    await root.call('fs.symlink', { path: '/srv/sticky-group/l.md', target: '/home/alice/notes.md' });
    await root.call('fs.chown', { path: '/srv/sticky-group/l.md', owner: 'bob', nofollow: true });
    t.equal(await readText(alice, '/srv/sticky-group/l.md'), 'alice notes', 'sticky but not world-writable');
  });
});

t.test("over REST: bob's link in /tmp does not redirect alice's PUT or GET", async (t) => {
  const { alice, bob } = await withCast(t);
  t.equal((await alice.put('/fs/secret.md', 'alice secret')).status, 200);
  t.equal(
    (await bob.put('/fs//tmp/report.md', '/home/alice/secret.md', { headers: { 'x-service-type': 'symlink' } })).status,
    200,
  );
  const put = await alice.put('/fs//tmp/report.md', 'overwritten');
  t.equal(put.status, 403);
  t.equal(put.json?.code, 'EACCES');
  t.match(put.json?.error, /sticky world-writable/);
  t.equal((await alice.get('/fs//tmp/report.md')).status, 403);
  t.equal((await alice.get('/fs/secret.md')).text, 'alice secret', 'her secret is unchanged');
});
