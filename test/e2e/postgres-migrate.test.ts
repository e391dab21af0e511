/**
 * `mdvfs migrate --from <data dir> --to postgres://…` against a real private PostgreSQL cluster
 * (helpers/postgres.ts): a SQLite store is copied exactly (tree, attributes, inode numbers, history,
 * users, tokens, workspaces), verified, and served by a daemon on PostgreSQL.
 */
import t from 'tap';
import { runCli } from '../helpers/cli.js';
import { authSnapshot, makePersonas, readText, spawnDaemon, text, treeSnapshot } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';

const SQLITE = { SERVICE_STORE: 'sqlite' };

t.test('mdvfs migrate copies a SQLite store into PostgreSQL exactly, and verifies it', async (t) => {
  const pg = await startPostgres(t);
  const url = await pg.createDb();
  const src = await spawnDaemon(t, SQLITE);
  const p = await makePersonas(src.client);
  const { root, alice } = p;
  await alice.call('fs.write', { path: 'a/b/c.md', mode: '0640' }, text('c'));
  await alice.call('fs.write', { path: 'a/same1.md' }, text('shared'));
  await alice.call('fs.write', { path: 'a/same2.md' }, text('shared'));
  await alice.call('fs.symlink', { target: 'b/c.md', path: 'a/link' });
  await alice.call('fs.write', { path: 'a/hist.md' }, text('kept only by history'));
  await root.call('fs.mkdir', { path: '/srv/ws', parents: true });
  const ws = await root.call('ws.create', { name: 'space', root_path: '/srv/ws' });
  const wsSecret = (await root.call('ws.token', { id: ws.id, name: 'w1', agent_token: p.tokens.agent })).secret;
  const commit = await root.call('vcs.commit', { message: 'snapshot' });
  await alice.call('fs.delete', { path: 'a/hist.md' });
  await alice.call('fs.write', { path: 'a/b/c.md' }, text('after commit'));
  const tree = await treeSnapshot(root);
  const auth = await authSnapshot(root);

  const busy = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
  t.not(busy.code, 0, 'refused while the source daemon runs');
  t.match(busy.stderr, /EBUSY|another mdvfs daemon|locked/);

  await src.kill('SIGTERM');
  const r = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stdout,
    /^migrate: ok \(\d+ objects, \d+ inodes, 1 refs, 6 users, \d+ groups, 1 workspaces, 1 workspace tokens\)/,
  );

  const again = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
  t.not(again.code, 0, 'never into a database that already holds a store');
  t.match(again.stderr, /not empty/);

  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  const root2 = d.client.as({});
  t.equal(await treeSnapshot(root2), tree, 'the tree, modes, owners, times and inode numbers are identical');
  t.equal(await authSnapshot(root2), auth, 'users, groups and workspaces are identical');
  t.equal(
    (await d.client.as({ authorization: `Bearer ${p.tokens.admin}` }).call('auth.whoami', {})).user,
    'admin',
    'tokens still authenticate',
  );
  t.equal(
    (await d.client.as({ authorization: `Bearer ${wsSecret}`, workspace: ws.id }).call('auth.whoami', {})).workspace
      ?.id,
    ws.id,
    'workspace secrets too',
  );
  t.equal((await root2.call('vcs.log', {})).commits[0]!.hash, commit.hash, 'history is there');
  t.equal(
    (await root2.request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/hist.md' })).data.toString(),
    'kept only by history',
  );
  // who made the changes not yet committed came along: root's commit credits alice with them
  const next = await root2.call('vcs.commit', { message: 'after the move' });
  const shown = await root2.call('vcs.show', { rev: next.hash });
  t.same(
    shown.changes.map((c) => [c.path, c.by]).sort(),
    [
      ['/home/alice/a/b/c.md', 'alice'],
      ['/home/alice/a/hist.md', 'alice'],
    ],
    'pending attribution is copied',
  );
  const fsck = await runCli(d.env, ['fsck']);
  t.equal(fsck.code, 0, fsck.stderr);
  t.match(fsck.stdout, /^fsck: ok/);
  // and the PostgreSQL store goes on working like the old one
  await root2.call('fs.write', { path: '/srv/after.md' }, text('after'));
  await d.kill('SIGKILL');
  await d.restart();
  t.equal(await readText(d.client.as({}), '/srv/after.md'), 'after');
});
