/**
 * A workspace token's VCS is the workspace's own: its commits, log, status, diff and revert cover
 * only the workspace's subtree, and paths are shown relative to the workspace root.
 */
import t from 'tap';
import { makePersonas, readText, text } from '../helpers/daemon.js';
import { names, quickCore } from './lib.js';

t.test('workspace-scoped commit, log, status, diff and revert', async (t) => {
  const d = await quickCore(t);
  const p = await makePersonas(d.client);
  const root = p.root;
  const w = await root.call('ws.create', { name: 'proj', root_path: '/srv/ws' });
  t.equal(w.root_path, '/srv/ws');
  await root.call('fs.chown', { path: '/srv/ws', owner: 'agent' });
  const { secret } = await root.call('ws.token', { id: w.id, name: 'ci', agent_token: p.tokens.agent });
  const ws = d.client.as({ authorization: `Bearer ${secret}`, workspace: w.id });

  await root.call('fs.write', { path: '/srv/outside.md' }, text('outside v1\n'));
  const g1 = await root.call('vcs.commit', { message: 'global before' });
  t.equal(g1.workspace, undefined);

  let s = await ws.call('vcs.status', {});
  t.equal(s.head, null, 'the workspace has its own (empty) history');
  t.same(s.added, []);

  await ws.call('fs.write', { path: 'notes.md' }, text('n1\n'));
  await ws.call('fs.write', { path: '/sub/deep.md' }, text('deep\n'));
  s = await ws.call('vcs.status', {});
  t.same(s.added, ['/notes.md', '/sub/deep.md'], 'workspace-relative paths, nothing from outside');
  const w1 = await ws.call('vcs.commit', { message: 'ws one' });
  t.equal(w1.workspace, w.id);
  t.equal(w1.author, 'agent');
  t.equal(w1.parent, null);
  t.equal(w1.changes, 2);

  // changes outside the workspace are invisible to it, and its commits stay out of the global log
  await root.call('fs.write', { path: '/srv/outside.md' }, text('outside v2\n'));
  s = await ws.call('vcs.status', {});
  t.ok(s.clean, 'a change outside does not show inside');
  t.same(
    (await ws.call('vcs.log', {})).commits.map((c) => c.hash),
    [w1.hash],
    'only its own history',
  );
  t.same(
    (await root.call('vcs.log', {})).commits.map((c) => c.hash),
    [g1.hash],
    'the global history is separate',
  );

  await ws.call('fs.write', { path: 'notes.md' }, text('n2\n'));
  await ws.call('fs.write', { path: 'later.md' }, text('later\n'));
  t.equal(
    (await ws.call('vcs.diff', { path: 'notes.md' })).diff,
    ['--- a/notes.md', '+++ b/notes.md', '@@ -1,1 +1,1 @@', '-n1', '+n2', ''].join('\n'),
    'diff labels are workspace-relative',
  );
  const w2 = await ws.call('vcs.commit', { message: 'ws two' });
  t.same(
    (await ws.call('vcs.log', { path: '/notes.md' })).commits.map((c) => c.hash),
    [w2.hash, w1.hash],
  );
  t.same(
    (await ws.call('vcs.log', { path: 'sub/deep.md' })).commits.map((c) => c.hash),
    [w1.hash],
  );

  const rv = await ws.call('vcs.revert', { hash: w1.hash });
  t.equal(rv.reverted_to, w1.hash);
  t.equal(await readText(ws, '/notes.md'), 'n1\n');
  t.same(await names(ws, '/'), ['notes.md', 'sub'], 'the later addition is gone');
  t.equal(await readText(root, '/srv/outside.md'), 'outside v2\n', 'the revert did not touch anything outside');
  t.same(
    (await ws.call('vcs.log', {})).commits.map((c) => c.message),
    [`revert to ${w1.hash}`, 'ws two', 'ws one'],
  );
  await t.rejects(
    ws.call('vcs.revert', { hash: g1.hash }),
    { code: 'ENOENT' },
    'a global commit is not in the workspace history',
  );
  await t.rejects(ws.request('vcs.cat', { rev: g1.hash, path: '/srv/outside.md' }), { code: 'ENOENT' });
  t.equal((await ws.request('vcs.cat', { rev: w2.hash, path: '/later.md' })).data.toString(), 'later\n');

  // the global history sees the workspace's files as part of the whole tree
  const global = await root.call('vcs.status', {});
  t.ok(global.added.includes('/srv/ws/notes.md'));
  t.ok(global.modified.includes('/srv/outside.md'));
});
