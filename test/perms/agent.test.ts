/** Permissions as an agent user (its own token, no delegation): an ordinary user that may delegate. */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('agent', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, agent } = p;

  t.test('identity: an agent, not an admin, with its own home', async (t) => {
    const w = await agent.call('auth.whoami', {});
    t.equal(w.user, 'agent');
    t.equal(w.is_agent, true);
    t.equal(w.is_admin, false);
    t.equal(w.home, '/home/agent');
    t.same(w.groups, [gids.agent, gids.bots]);
    const f = await agent.call('fs.write', { path: 'notes/a.md' }, text('agent note'));
    t.equal(f.path, '/home/agent/notes/a.md');
    const s = await agent.call('fs.stat', { path: 'notes/a.md' });
    t.equal(s.uid, users.agent!.uid);
    t.equal(s.gid, gids.agent);
    await t.rejects(p.alice.call('fs.read', { path: '/home/agent/notes/a.md' }), denied);
  });

  t.test('ordinary user permissions', async (t) => {
    t.equal(await readText(agent, '/srv/bots.md'), 'bots only');
    t.equal(await readText(agent, '/srv/pub/file.md'), 'public file');
    await t.rejects(agent.call('fs.read', { path: '/srv/teamonly.md' }), denied);
    await t.rejects(agent.call('fs.read', { path: '/home/alice/private.md' }), denied);
    await t.rejects(agent.call('fs.read', { path: '/srv/shared/to-private' }), denied);
    await t.rejects(agent.call('fs.read', { path: '/srv/pub/secret.md' }), denied);
    await t.rejects(agent.call('fs.list', { path: '/srv/team' }), denied);
    await unchanged(t, root, async () => {
      await t.rejects(agent.call('fs.write', { path: '/srv/pub/file.md' }, text('x')), denied);
      await t.rejects(agent.call('fs.delete', { path: '/tmp/alice-tmp.md' }), denied);
      await t.rejects(agent.call('fs.delete', { path: '/srv/shared/tree', recursive: true }), denied);
      await t.rejects(agent.call('fs.chmod', { path: '/srv/bots.md', mode: '0644' }), { code: 'EPERM' });
      await t.rejects(agent.call('fs.chown', { path: '/srv/bots.md', owner: 'agent' }), { code: 'EPERM' });
    });
  });

  t.test('no administration', async (t) => {
    await t.rejects(agent.call('admin.userAdd', { name: 'bot2', is_agent: true }), denied);
    await t.rejects(agent.call('admin.token', { name: 'agent' }), denied);
    await t.rejects(agent.call('admin.groupMemberAdd', { user: 'agent', group: 'wheel' }), denied);
  });

  t.test('may delegate to any user who grants it, and gains nothing by it', async (t) => {
    await t.rejects(
      d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'bob' }).call('auth.whoami', {}),
      { code: 'EPERM', message: /no delegation grant: bob has not granted agent/ },
    );
    await p.bob.call('auth.delegationAdd', { agent: 'agent' });
    await p.admin.call('auth.delegationAdd', { agent: 'agent' });
    const forBob = d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'bob' });
    const w = await forBob.call('auth.whoami', {});
    t.equal(w.user, 'agent');
    t.equal(w.on_behalf_of, 'bob');
    t.equal(w.home, '/home/bob');
    await t.rejects(forBob.call('fs.read', { path: '/srv/teamonly.md' }), denied, 'bob may, the agent may not');
    await t.rejects(forBob.call('fs.read', { path: '/srv/bots.md' }), denied, 'the agent may, bob may not');
    const forAdmin = d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'admin' });
    await t.rejects(
      forAdmin.call('admin.userAdd', { name: 'escalate' }),
      denied,
      'delegating to an admin is no escalation',
    );
    await t.rejects(forAdmin.call('fs.read', { path: '/home/alice/private.md' }), denied);
    const forRoot = d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'root' });
    // nobody acts on behalf of root but root: refused outright (EPERM), before any file check
    await t.rejects(
      forRoot.call('fs.read', { path: '/home/alice/private.md' }),
      { code: 'EPERM', message: /nobody acts on behalf of root but root/ },
      'nor is delegating to root',
    );
    await t.rejects(forRoot.call('fs.chown', { path: '/srv/bots.md', owner: 'agent' }), { code: 'EPERM' });
    await t.rejects(
      d.client.as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'nobody' }).call('auth.whoami', {}),
      { code: 'EAUTH' },
    );
  });
});
