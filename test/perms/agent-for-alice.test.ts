/** Permissions as the agent on behalf of alice: the intersection of both (DESIGN.md §3, contract §2). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('agent on behalf of alice', async (t) => {
  const { p, users, gids } = await permsFixture(t);
  const { root, alice, agent, agentForAlice: afa } = p;
  await root.call('fs.write', { path: '/srv/both.md', mode: '0644' }, text('both may read'));
  // a place where both may create entries: alice's 0777 directory
  await alice.call('fs.mkdir', { path: '/srv/pub/open', mode: '0777' });

  t.test('identity and paths follow the delegate', async (t) => {
    const w = await afa.call('auth.whoami', {});
    t.equal(w.user, 'agent');
    t.equal(w.on_behalf_of, 'alice');
    t.equal(w.home, '/home/alice');
    t.equal((await afa.call('fs.resolve', { path: 'x.md' })).path, '/home/alice/x.md');
  });

  t.test('reads only what both may read', async (t) => {
    t.equal(await readText(afa, '/srv/both.md'), 'both may read');
    t.equal(await readText(afa, '/srv/pub/file.md'), 'public file');
    // alice may, the agent may not
    await t.rejects(afa.call('fs.read', { path: 'private.md' }), denied);
    await t.rejects(afa.call('fs.read', { path: '/home/alice/private.md' }), denied);
    await t.rejects(afa.call('fs.list', {}), denied);
    await t.rejects(afa.call('fs.read', { path: '/srv/teamonly.md' }), denied);
    await t.rejects(afa.call('fs.read', { path: '/srv/pub/secret.md' }), denied);
    await t.rejects(afa.call('fs.read', { path: '/srv/pub/nox/f.md' }), denied);
    // the agent may, alice may not
    t.equal(await readText(agent, '/srv/bots.md'), 'bots only');
    await t.rejects(afa.call('fs.read', { path: '/srv/bots.md' }), denied);
    await agent.call('fs.write', { path: '/home/agent/agent-only.md' }, text('a'));
    await t.rejects(afa.call('fs.read', { path: '/home/agent/agent-only.md' }), denied);
    // symlinks do not help either
    await t.rejects(afa.call('fs.read', { path: '/srv/shared/to-private' }), denied);
    await t.rejects(afa.call('fs.read', { path: '/srv/shared/to-secret' }), denied);
    await afa.call('fs.access', { path: '/srv/both.md', mode: 4 });
    await t.rejects(afa.call('fs.access', { path: '/srv/bots.md', mode: 4 }), denied);
  });

  t.test('writes only where both may write; new entries belong to alice', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(afa.call('fs.write', { path: 'new.md' }, text('x')), denied, 'her home is closed to the agent');
      await t.rejects(
        afa.call('fs.write', { path: '/srv/pub/file.md' }, text('x')),
        denied,
        'her file, not writable by the agent',
      );
      await t.rejects(
        afa.call('fs.write', { path: '/srv/pub/new.md' }, text('x')),
        denied,
        'her directory, not writable by the agent',
      );
      await t.rejects(
        afa.call('fs.write', { path: '/srv/team/teamfile.md' }, text('x')),
        denied,
        'team-writable, the agent is not in team',
      );
      await t.rejects(
        afa.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0666' }),
        { code: 'EPERM' },
        'only alice owns it',
      );
      await t.rejects(afa.call('fs.chown', { path: '/srv/pub/file.md', group: 'team' }), { code: 'EPERM' });
      await t.rejects(
        afa.call('fs.delete', { path: '/tmp/alice-tmp.md' }),
        denied,
        'sticky: the agent does not own it',
      );
    });
    await afa.call('fs.write', { path: '/tmp/alice-tmp.md' }, text('0666: both may write'));
    t.equal(await readText(root, '/tmp/alice-tmp.md'), '0666: both may write');
    const w = await afa.call('fs.write', { path: '/srv/shared/by-agent.md' }, text('on behalf'));
    const s = await root.call('fs.stat', { path: w.path });
    t.equal(s.uid, users.alice!.uid, 'owned by alice');
    t.equal(s.gid, gids.alice);
    const w2 = await afa.call('fs.write', { path: '/srv/pub/open/by-agent.md' }, text('x'));
    t.equal((await root.call('fs.stat', { path: w2.path })).uid, users.alice!.uid);
  });

  t.test('auto-created parents belong to alice and do not lock the agent out', async (t) => {
    const w = await afa.call('fs.write', { path: '/srv/shared/made/by/agent.md' }, text('deep'));
    t.equal(w.path, '/srv/shared/made/by/agent.md');
    for (const dir of ['/srv/shared/made', '/srv/shared/made/by'])
      t.equal((await root.call('fs.stat', { path: dir })).uid, users.alice!.uid, dir);
    t.equal(await readText(afa, w.path), 'deep');
    const m = await afa.call('fs.mkdir', { path: '/srv/shared/mk/a/b', parents: true });
    t.equal(m.created, true);
    const c = await afa.call('fs.copy', { src: '/srv/both.md', dst: '/srv/shared/cp/x/both.md' });
    t.equal(c.copied, 1);
    await afa.call('fs.move', { src: '/srv/shared/by-agent.md', dst: '/srv/shared/mv/y/by-agent.md' });
    t.equal(await readText(root, '/srv/shared/mv/y/by-agent.md'), 'on behalf');
    // Intersection: the new directories are alice's 0755 ones, so the agent may not remove entries from them later.
    await unchanged(t, root, async () => {
      await t.rejects(afa.call('fs.unlink', { path: '/srv/shared/cp/x/both.md' }), denied);
    });
  });

  t.test('no administration through delegation', async (t) => {
    await t.rejects(afa.call('admin.userAdd', { name: 'x' }), denied);
    await t.rejects(afa.call('admin.token', { name: 'alice' }), denied);
  });
});
