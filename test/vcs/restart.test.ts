/**
 * History survives `kill -9` of the daemon (default durability): log, status, diff, snapshot
 * reads and revert work the same after a restart.
 */
import t from 'tap';
import { makePersonas, readText, spawnDaemon, text } from '../helpers/daemon.js';
import { names } from './lib.js';

t.test('log, status, diff and revert survive a SIGKILL restart', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  let r = d.client.as({});
  await r.call('fs.write', { path: '/srv/r/a.md' }, text('a1\nsame\n'));
  await r.call('fs.write', { path: '/srv/r/b.md' }, text('b1\n'));
  await r.call('fs.symlink', { target: 'a.md', path: '/srv/r/ln' });
  const c1 = await r.call('vcs.commit', { message: 'one' });
  await r.call('fs.write', { path: '/srv/r/a.md' }, text('a2\nsame\n'));
  await r.call('fs.unlink', { path: '/srv/r/b.md' });
  const c2 = await r.call('vcs.commit', { message: 'two' });
  await p.alice.call('fs.write', { path: 'mine.md' }, text('alice\n'));
  const c3 = await p.alice.call('vcs.commit', { message: 'alice' });
  // uncommitted work at the time of the crash
  await r.call('fs.write', { path: '/srv/r/c.md' }, text('uncommitted\n'));
  await r.call('fs.chmod', { path: '/srv/r/a.md', mode: '0600' });

  const log = await r.call('vcs.log', {});
  const status = await r.call('vcs.status', {});
  const diff = await r.call('vcs.diff', {});
  const diff12 = await r.call('vcs.diff', { from: c1.hash, to: c2.hash });
  const health = await r.call('sys.health', {});

  await d.kill('SIGKILL');
  await d.restart();
  r = d.client.as({});
  const alice = d.client.as({ authorization: 'User alice' });

  t.same(await r.call('vcs.log', {}), log, 'log');
  t.same(
    (await r.call('vcs.log', { path: '/srv/r/b.md' })).commits.map((c) => c.hash),
    [c2.hash, c1.hash],
    'per-file log',
  );
  t.same(await r.call('vcs.status', {}), status, 'status, uncommitted changes included');
  t.same(await r.call('vcs.diff', {}), diff, 'diff against the working tree');
  t.same(await r.call('vcs.diff', { from: c1.hash, to: c2.hash }), diff12, 'diff between commits');
  const h = await r.call('sys.health', {});
  t.equal(h.commits, health.commits);
  t.equal(h.objects, health.objects, 'the same objects');
  const fsck = await r.call('sys.fsck', {});
  t.ok(fsck.ok, `fsck: ${fsck.problems.join('; ')}`);
  t.equal((await r.request('vcs.cat', { rev: c1.hash, path: '/srv/r/b.md' })).data.toString(), 'b1\n');
  await t.rejects(d.client.as({ authorization: 'User bob' }).call('vcs.log', { path: '/home/alice/mine.md' }), {
    code: 'EACCES',
  });

  // a commit after the restart continues the same chain; a revert works on the reloaded history
  const rv = await r.call('vcs.revert', { hash: c1.hash });
  t.type(rv.saved, 'string', 'the uncommitted work was saved');
  const saved = (await r.call('vcs.log', { limit: 2 })).commits[1]!;
  t.equal(saved.parent, c3.hash, 'the auto-save commit follows the last commit before the crash');
  t.same(await names(r, '/srv/r'), ['a.md', 'b.md', 'ln']);
  t.equal(await readText(r, '/srv/r/b.md'), 'b1\n');
  t.equal((await r.call('fs.stat', { path: '/srv/r/a.md' })).mode, '0644');
  t.equal(
    await readText(alice, 'mine.md').catch((e: { code: string }) => e.code),
    'ENOENT',
    "alice's later file is gone too (the revert is of the whole tree)",
  );

  // and that state survives another crash
  await d.kill('SIGKILL');
  await d.restart();
  r = d.client.as({});
  t.equal((await r.call('vcs.log', { limit: 1 })).commits[0]!.hash, rv.hash);
  t.ok((await r.call('vcs.status', {})).clean);
  t.equal(await readText(r, '/srv/r/a.md'), 'a1\nsame\n');
  const back = await r.call('vcs.revert', { hash: rv.saved! });
  t.equal(back.saved, null);
  t.equal(await readText(r, '/srv/r/c.md'), 'uncommitted\n', 'the work saved before the crash-and-revert is back');
});
