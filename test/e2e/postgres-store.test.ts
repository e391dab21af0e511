/**
 * SERVICE_STORE=postgres://… against a real private PostgreSQL cluster (helpers/postgres.ts): the
 * daemon keeps its state there and nowhere else, one daemon per database, the password never shown,
 * and `mdvfs migrate` copies a SQLite store exactly and verifies it.
 * Persistence across kill -9 and the crash rounds run on PostgreSQL in persistence.test.ts and crash.test.ts.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../helpers/cli.js';
import { authSnapshot, blobId, makePersonas, readText, spawnDaemon, tempDir, text, treeSnapshot } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';
import { PostgresStore } from '../../daemon/store/postgres.js';

const SQLITE = { SERVICE_STORE: 'sqlite' };

t.test('the daemon keeps its state in PostgreSQL, and nothing in the data dir', async (t) => {
  const pg = await startPostgres(t);
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  const root = d.client.as({});
  await root.call('fs.write', { path: '/a.md' }, text('in postgres'));
  t.same(await pg.query(db, 'SELECT type FROM objects WHERE id = $1', [blobId('in postgres')]), [{ type: 'blob' }], 'the content is a row in PostgreSQL once acknowledged');
  t.same(await pg.query(db, "SELECT name, size::int AS size FROM inodes WHERE name = 'a.md'"), [{ name: 'a.md', size: 11 }]);
  t.same(await pg.query(db, 'SELECT version FROM mdvfs_migrations ORDER BY version'), [{ version: 1 }], 'the schema is recorded as migrations');
  t.notOk(existsSync(path.join(d.dataDir, 'store.db')), 'no SQLite store in the data dir');
  await d.kill('SIGKILL');
  await d.restart();
  t.equal(await readText(d.client.as({}), '/a.md'), 'in postgres', 'loaded back from PostgreSQL after kill -9');
  t.same((await d.client.call('sys.fsck', {})).problems, []);
});

t.test('one daemon per database; the password in SERVICE_STORE is never shown', async (t) => {
  const pg = await startPostgres(t);
  const url = (await pg.createDb()).replace('mdvfs@', 'mdvfs:s3cret-pw@'); // trust auth: the password is ignored
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  await d.client.as({}).call('fs.write', { path: '/x.md' }, text('x'));
  const other = tempDir();
  t.teardown(() => runCli({ ...process.env, SERVICE_DATA_DIR: other }, ['stop']));
  const r = await runCli({ ...process.env, SERVICE_DATA_DIR: other, SERVICE_STORE: url }, ['daemon']);
  t.not(r.code, 0, 'a second daemon on the same database refuses to start');
  t.match(r.stderr, /another mdvfs daemon .*uses the PostgreSQL store/);
  t.notMatch(r.stderr, /s3cret-pw/, 'the password is not printed');
  t.match(r.stderr, /\*\*\*/, 'it is shown masked');
  const bad = await runCli({ ...process.env, SERVICE_DATA_DIR: other, SERVICE_STORE: 'mysql://u:s3cret-pw@h/db' }, ['daemon']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /SERVICE_STORE must be sqlite or a postgres:/);
  t.notMatch(bad.stderr, /s3cret-pw/);
  const unreachable = await runCli({ ...process.env, SERVICE_DATA_DIR: other, SERVICE_STORE: `postgres://mdvfs:s3cret-pw@localhost/nodb?host=${encodeURIComponent(path.join(pg.dir, 'nowhere'))}` }, ['daemon']);
  t.equal(unreachable.code, 1);
  t.match(unreachable.stderr, /cannot connect to PostgreSQL/);
  t.notMatch(unreachable.stderr, /s3cret-pw/);
});

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
  t.match(r.stdout, /^migrate: ok \(\d+ objects, \d+ inodes, 1 refs, 6 users, \d+ groups, 1 workspaces, 1 workspace tokens\)/);

  const again = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
  t.not(again.code, 0, 'never into a database that already holds a store');
  t.match(again.stderr, /not empty/);

  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  const root2 = d.client.as({});
  t.equal(await treeSnapshot(root2), tree, 'the tree, modes, owners, times and inode numbers are identical');
  t.equal(await authSnapshot(root2), auth, 'users, groups and workspaces are identical');
  t.equal((await d.client.as({ authorization: `Bearer ${p.tokens.admin}` }).call('auth.whoami', {})).user, 'admin', 'tokens still authenticate');
  t.equal((await d.client.as({ authorization: `Bearer ${wsSecret}`, workspace: ws.id }).call('auth.whoami', {})).workspace?.id, ws.id, 'workspace secrets too');
  t.equal((await root2.call('vcs.log', {})).commits[0]!.hash, commit.hash, 'history is there');
  t.equal((await root2.request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/hist.md' })).data.toString(), 'kept only by history');
  const fsck = await runCli(d.env, ['fsck']);
  t.equal(fsck.code, 0, fsck.stderr);
  t.match(fsck.stdout, /^fsck: ok/);
  // and the PostgreSQL store goes on working like the old one
  await root2.call('fs.write', { path: '/srv/after.md' }, text('after'));
  await d.kill('SIGKILL');
  await d.restart();
  t.equal(await readText(d.client.as({}), '/srv/after.md'), 'after');
});

t.test('a database left by a daemon killed before its first batch starts as a fresh store', async (t) => {
  const pg = await startPostgres(t);
  const url = await pg.createDb();
  // exactly what a first start writes before its first batch: the schema and the schema version row
  const s = await PostgresStore.open(url);
  t.equal((await s.load()).fresh, true);
  await s.close();
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal((await d.client.as({}).call('auth.whoami', {})).user, 'root');
  t.same((await d.client.call('sys.fsck', {})).problems, []);
});
