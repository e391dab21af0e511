/**
 * The contract's path-resolution table (§2) for every kind of caller, checked both with
 * fs.resolve and by where a write actually lands; `..` never climbs above `/`.
 */
import t from 'tap';
import { spawnDaemon, makePersonas, readText, text } from '../helpers/daemon.js';

t.test('path resolution', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice, agent, agentForAlice, admin } = p;
  await root.call('fs.mkdir', { path: '/srv/shared', parents: true, mode: '0777' });

  t.test('the table, for a user', async (t) => {
    const table: [string, string][] = [
      ['notes/a.md', '/home/alice/notes/a.md'],
      ['./notes/a.md', '/home/alice/notes/a.md'],
      ['~/notes/a.md', '/home/alice/notes/a.md'],
      ['~', '/home/alice'],
      ['~/', '/home/alice'],
      ['', '/home/alice'],
      ['/srv/shared/x.md', '/srv/shared/x.md'],
      ['/', '/'],
      ['//srv//shared/./x.md', '/srv/shared/x.md'],
      ['notes/../b.md', '/home/alice/b.md'],
      ['..', '/home'],
      ['../bob/x', '/home/bob/x'],
      ['~alice/x', '/home/alice/~alice/x'], // no ~user expansion: a plain relative name
      ['a~/b', '/home/alice/a~/b'],
    ];
    for (const [written, resolved] of table)
      t.equal((await alice.call('fs.resolve', { path: written })).path, resolved, JSON.stringify(written));
  });

  t.test('writes land where the table says', async (t) => {
    t.equal((await alice.call('fs.write', { path: 'rel.md' }, text('1'))).path, '/home/alice/rel.md');
    t.equal((await alice.call('fs.write', { path: '~/tilde.md' }, text('2'))).path, '/home/alice/tilde.md');
    t.equal((await alice.call('fs.write', { path: '/srv/shared/abs.md' }, text('3'))).path, '/srv/shared/abs.md');
    t.equal(await readText(root, '/home/alice/rel.md'), '1');
    t.equal(await readText(root, '/home/alice/tilde.md'), '2');
    t.equal(await readText(root, '/srv/shared/abs.md'), '3');
    t.equal((await alice.call('fs.list', { path: '~' })).path, '/home/alice');
    t.equal((await alice.call('fs.list', { path: '' })).path, '/home/alice');
    t.equal((await alice.call('fs.stat', { path: '' })).uid, (await root.call('fs.stat', { path: '/home/alice' })).uid);
  });

  t.test('root: relative paths, ~ and the empty path resolve at /', async (t) => {
    t.equal((await root.call('fs.resolve', { path: 'x.md' })).path, '/x.md');
    t.equal((await root.call('fs.resolve', { path: '~' })).path, '/');
    t.equal((await root.call('fs.resolve', { path: '~/srv' })).path, '/srv');
    t.equal((await root.call('fs.resolve', { path: '' })).path, '/');
    t.equal((await root.call('fs.write', { path: 'srv/root-rel.md' }, text('r'))).path, '/srv/root-rel.md');
    t.equal((await root.call('fs.list', {})).path, '/');
    await t.rejects(root.call('fs.stat', { path: '/home/root' }), { code: 'ENOENT' }, 'there is no /home/root');
    // an explicit "User root" behaves the same
    const userRoot = d.client.as({ authorization: 'User root' });
    t.equal((await userRoot.call('fs.resolve', { path: 'y' })).path, '/y');
  });

  t.test('other callers: admin, agent, delegation uses the delegate home', async (t) => {
    t.equal((await admin.call('fs.resolve', { path: 'a' })).path, '/home/admin/a');
    t.equal((await agent.call('fs.resolve', { path: 'a' })).path, '/home/agent/a');
    t.equal((await agent.call('fs.resolve', { path: '~' })).path, '/home/agent');
    t.equal((await agentForAlice.call('fs.resolve', { path: 'a' })).path, '/home/alice/a');
    t.equal((await agentForAlice.call('fs.resolve', { path: '~/a' })).path, '/home/alice/a');
    t.equal((await agentForAlice.call('fs.resolve', { path: '' })).path, '/home/alice');
    await p.root.call('auth.delegationAdd', { agent: 'admin', user: 'bob' }); // bob's consent
    const adminForBob = d.client.as({ authorization: `Bearer ${p.tokens.admin}`, onBehalfOf: 'bob' });
    t.equal((await adminForBob.call('fs.resolve', { path: 'n.md' })).path, '/home/bob/n.md');
    const rootForCarol = d.client.as({ onBehalfOf: 'carol' });
    t.equal((await rootForCarol.call('fs.resolve', { path: 'n.md' })).path, '/home/carol/n.md');
    t.equal((await agentForAlice.call('auth.whoami', {})).home, '/home/alice');
    t.equal((await agentForAlice.call('auth.whoami', {})).on_behalf_of, 'alice');
  });

  t.test('.. never escapes /', async (t) => {
    const table: [string, string][] = [
      ['/..', '/'],
      ['/../../..', '/'],
      ['/../srv/../../srv/shared', '/srv/shared'],
      ['../../../../etc/passwd', '/etc/passwd'],
      ['~/../../../..', '/'],
      ['/tmp/../..', '/'],
    ];
    for (const [written, resolved] of table)
      t.equal((await alice.call('fs.resolve', { path: written })).path, resolved, JSON.stringify(written));
    t.equal((await root.call('fs.write', { path: '/../../srv/shared/esc.md' }, text('e'))).path, '/srv/shared/esc.md');
    t.same(
      (await root.call('fs.list', { path: '/../..' })).entries.map((e) => e.name),
      ['home', 'srv', 'tmp'],
    );
    // through a symlink: .. inside a link target stops at / as well
    await root.call('fs.symlink', { target: '../../../../../srv', path: '/tmp/up' });
    t.equal(await readText(root, '/tmp/up/shared/esc.md'), 'e');
  });
});
