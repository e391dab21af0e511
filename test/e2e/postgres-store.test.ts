/**
 * SERVICE_STORE=postgres://… against a real private PostgreSQL cluster (helpers/postgres.ts): the
 * daemon keeps its state there and nowhere else, one active daemon per database (more wait as
 * standbys: postgres-fencing.test.ts), the password never shown,
 * and a lost connection makes the daemon reconnect and reload (outages: postgres-outage.test.ts). `mdvfs migrate`: postgres-migrate.test.ts.
 * The crash rounds on PostgreSQL: crash-postgres.test.ts; any suite with MDVFS_TEST_STORE=postgres.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../helpers/cli.js';
import { blobId, CLI, readText, spawnDaemon, tempDir, text } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';
import { PostgresStore } from '../../daemon/store/postgres.js';

// One cluster for the file (stopped at the end), a fresh database per test.
const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

t.test('the daemon keeps its state in PostgreSQL, and nothing in the data dir', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  const root = d.client.as({});
  await root.call('fs.write', { path: '/a.md' }, text('in postgres'));
  t.same(
    await pg.query(db, 'SELECT type FROM objects WHERE id = $1', [blobId('in postgres')]),
    [{ type: 'blob' }],
    'the content is a row in PostgreSQL once acknowledged',
  );
  t.same(await pg.query(db, "SELECT name, size::int AS size FROM inodes WHERE name = 'a.md'"), [
    { name: 'a.md', size: 11 },
  ]);
  t.same(
    await pg.query(db, 'SELECT version FROM mdvfs_migrations ORDER BY version'),
    [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }],
    'the schema is recorded as migrations',
  );
  t.notOk(existsSync(path.join(d.dataDir, 'store.db')), 'no SQLite store in the data dir');
  await root.call('admin.userAdd', { name: 'bob' });
  const tok = (await root.call('admin.token', { name: 'bob' })).token;
  const users = JSON.stringify(await pg.query(db, 'SELECT * FROM users'));
  t.ok(users.includes('"bob"'));
  t.notOk(users.includes(tok.slice(6)), 'tokens are stored only as hashes');
  await d.kill('SIGKILL');
  await d.restart();
  t.equal(await readText(d.client.as({}), '/a.md'), 'in postgres', 'loaded back from PostgreSQL after kill -9');
  t.same((await d.client.call('sys.fsck', {})).problems, []);
});

t.test("libpq's URL with no host (a Unix socket in ?host=) is taken as it is", async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const u = new URL(url);
  // postgres://role@/db?host=/socket/dir: the form libpq documents, which WHATWG URLs refuse
  const libpq = `postgres://${u.username}@${u.pathname}${u.search}`;
  t.throws(() => new URL(libpq), 'the form WHATWG URLs refuse');
  const d = await spawnDaemon(t, { SERVICE_STORE: libpq });
  await d.client.as({}).call('fs.write', { path: '/socket.md' }, text('through the socket'));
  const db = u.pathname.slice(1);
  t.same(await pg.query(db, "SELECT name FROM inodes WHERE name = 'socket.md'"), [{ name: 'socket.md' }]);
  const { store } = await d.client.as({}).call('sys.status', {});
  t.equal(
    store,
    `postgres://localhost${u.pathname}?host=${encodeURIComponent(u.searchParams.get('host')!)}`,
    'status names the store without the role',
  );
});

t.test('one active daemon per database; the password in SERVICE_STORE is never shown', async (t) => {
  const pg = await cluster;
  const url = (await pg.createDb()).replace('mdvfs@', 'mdvfs:s3cret-pw@'); // trust auth: the password is ignored
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  await d.client.as({}).call('fs.write', { path: '/x.md' }, text('x'));
  const other = tempDir();
  t.teardown(() => runCli({ ...process.env, SERVICE_DATA_DIR: other }, ['stop']));
  const second = await spawnDaemon(t, { SERVICE_STORE: url }, other);
  t.equal(
    (await second.client.call('sys.status', {})).role,
    'standby',
    'a second daemon on the same database waits as a standby',
  );
  t.equal((await d.client.call('sys.status', {})).role, 'active');
  t.notMatch(second.stderr(), /s3cret-pw/, 'the password is not printed');
  const busy = await PostgresStore.open(url).then(
    () => undefined,
    (err: Error) => err,
  );
  t.match(
    busy?.message,
    /EBUSY: another mdvfs daemon .*uses the PostgreSQL store/,
    'mdvfs migrate (which must hold the lease) is refused',
  );
  t.notMatch(busy?.message, /s3cret-pw/, 'the password is not shown');
  t.match(busy?.message, /\*\*\*/, 'it is shown masked');
  const bad = await runCli({ ...process.env, SERVICE_DATA_DIR: other, SERVICE_STORE: 'mysql://u:s3cret-pw@h/db' }, [
    'daemon',
  ]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /SERVICE_STORE must be sqlite or a postgres:/);
  t.notMatch(bad.stderr, /s3cret-pw/);
  // An unreachable PostgreSQL is waited for (docs/deploy.md): the daemon says so, without the password.
  const waiting = spawn(process.execPath, [CLI, 'daemon'], {
    env: {
      ...process.env,
      SERVICE_DATA_DIR: tempDir(),
      SERVICE_STORE: `postgres://mdvfs:s3cret-pw@localhost/nodb?host=${encodeURIComponent(path.join(pg.dir, 'nowhere'))}`,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  waiting.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<number | null>((resolve) => waiting.once('exit', (code) => resolve(code)));
  await until(() => /PostgreSQL unreachable at start/.test(err), 'the daemon to say PostgreSQL is unreachable');
  t.match(err, /PostgreSQL at postgres:\/\/mdvfs:\*\*\*@localhost\/nodb.* is unreachable/);
  t.notMatch(err, /s3cret-pw/);
  waiting.kill('SIGTERM');
  t.equal(await exited, 0, 'a waiting daemon stops cleanly');
});

t.test('a database left by a daemon killed before its first batch starts as a fresh store', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  // exactly what a first start writes before its first batch: the schema and the schema version row
  const s = await PostgresStore.open(url);
  t.equal((await s.load()).fresh, true);
  await s.close();
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal((await d.client.as({}).call('auth.whoami', {})).user, 'root');
  t.same((await d.client.call('sys.fsck', {})).problems, []);
});

t.test('a daemon that loses its PostgreSQL connection reconnects and reloads instead of diverging', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  const d = await spawnDaemon(t, { SERVICE_STORE: url });
  await d.client.as({}).call('fs.write', { path: '/before.md' }, text('before'));
  const killed = await pg.query(
    db,
    "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'mdvfs' AND datname = $1",
    [db],
  );
  t.same(killed, [{ ok: true }], "the daemon's session is ended by PostgreSQL");
  // docs/deploy.md, "PostgreSQL outages": it reconnects, re-takes the lease and reloads the store.
  await until(() => /PostgreSQL is back/.test(d.stderr()), 'the daemon to reconnect');
  t.equal(d.proc.exitCode, null, 'the daemon keeps running');
  t.match(d.stderr(), /lost the connection to PostgreSQL/);
  t.equal(await readText(d.client.as({}), '/before.md'), 'before', 'it reloaded what was acknowledged');
  await until(
    async () =>
      d.client
        .as({})
        .call('fs.write', { path: '/after.md' }, text('after'))
        .then(
          () => true,
          () => false,
        ),
    'writes to succeed again',
  );
  t.equal((await pg.query(db, "SELECT count(*)::int AS n FROM inodes WHERE name = 'after.md'"))[0]?.n, 1);
});
