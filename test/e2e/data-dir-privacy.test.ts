/**
 * Security (issue 12, item 4): another local account can read nothing in the data dir, whoever
 * created it (`mdvfs serve`, the CLI), a data dir left open by an older version is closed at start,
 * and a data dir owned by another user is refused.
 */
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli, until } from '../helpers/cli.js';
import { alive, client, startService } from '../helpers/http.js';
import { testStoreEnv } from '../helpers/postgres.js';
import { localUser, type LocalUser } from '../helpers/unix-user.js';

const SECRET = 'TOP-SECRET-7f3a9c-in-the-wal';

/** A parent every local user may traverse (0755), so only the data dir's own modes protect it. */
function openParent(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-priv-'));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function cliEnvFor(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dataDir };
  for (const k of ['SERVICE_AS_USER', 'SERVICE_TOKEN', 'SERVICE_ON_BEHALF_OF', 'SERVICE_WORKSPACE', 'SERVICE_URL'])
    delete env[k];
  return env;
}

/** Stops the background daemon the CLI started for `dataDir` (at teardown too). */
async function stopDaemonOf(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'daemon.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  process.kill(pid, 'SIGTERM');
  await until(() => !alive(pid), 5000);
}

const mode = (p: string): number => statSync(p).mode & 0o777;

/**
 * Asserts that `evil` can neither list the data dir nor read any file in it, and that every entry is
 * private. `store`: 'sqlite' (store.db is in the data dir) or 'postgres' (nothing of the store is).
 */
async function assertSealed(tt: Test, evil: LocalUser, dataDir: string, store: 'sqlite' | 'postgres'): Promise<void> {
  tt.equal(mode(dataDir), 0o700, 'the data dir is 0700');
  const names = readdirSync(dataDir);
  if (store === 'sqlite') tt.ok(names.includes('store.db'), 'the store exists');
  else {
    tt.notOk(
      names.some((n) => n.startsWith('store.db')),
      'the store is in PostgreSQL: no store.db in the data dir',
    );
    for (const name of names.filter((n) => statSync(path.join(dataDir, n)).isFile()))
      tt.notOk(readFileSync(path.join(dataDir, name), 'utf8').includes(SECRET), `the secret is not in ${name}`);
  }
  for (const name of names) {
    const p = path.join(dataDir, name);
    tt.equal(mode(p) & 0o077, 0, `${name} is closed to group and others (mode ${mode(p).toString(8)})`);
  }
  const ls = await evil.run('ls', [dataDir]);
  tt.not(ls.code, 0, `${evil.name} cannot list the data dir`);
  for (const name of ['store.db', 'store.db-wal', 'daemon.log', 'daemon.pid']) {
    const p = path.join(dataDir, name);
    const cat = await evil.run('cat', [p]);
    tt.not(cat.code, 0, `${evil.name} cannot cat ${name}`);
    const strings = await evil.run('strings', [p]);
    tt.notOk(strings.stdout.includes(SECRET), `${evil.name} finds no secret in ${name} with strings`);
  }
}

/**
 * The PostgreSQL cluster that holds the daemon's store in PostgreSQL mode (MDVFS_TEST_STORE=postgres):
 * its directory, which is also its socket's; undefined on SQLite.
 */
async function pgClusterOf(dataDir: string): Promise<{ dir: string; db: string } | undefined> {
  const url = (await testStoreEnv(dataDir)).SERVICE_STORE;
  if (url === undefined) return undefined;
  const u = new URL(url);
  return { dir: u.searchParams.get('host')!, db: u.pathname.slice(1) };
}

/**
 * Asserts that `evil` can neither read the cluster's files (where the secret is, as root can see)
 * nor connect to it through its Unix socket (the cluster trusts local connections: only the socket
 * directory's permissions keep other users out).
 */
async function assertClusterSealed(tt: Test, evil: LocalUser, cluster: { dir: string; db: string }): Promise<void> {
  const asRoot = spawnSync('grep', ['-r', '-a', '-l', '-F', SECRET, cluster.dir], { encoding: 'utf8' });
  tt.match(asRoot.stdout, /pg_wal/, "sanity: the secret is in the cluster's write-ahead log, as root sees it");
  const ls = await evil.run('ls', [cluster.dir]);
  tt.not(ls.code, 0, `${evil.name} cannot list the PostgreSQL cluster's directory`);
  const grep = await evil.run('grep', ['-r', '-a', '-F', SECRET, cluster.dir]);
  tt.not(grep.code, 0, `${evil.name} cannot grep the cluster's files`);
  tt.notOk(grep.stdout.includes(SECRET), `${evil.name} finds no secret in the cluster's files`);
  const psql = await evil.run('psql', [
    '-h',
    cluster.dir,
    '-U',
    'mdvfs',
    '-d',
    cluster.db,
    '-Atc',
    'SELECT count(*) FROM objects',
  ]);
  tt.not(psql.code, 0, `${evil.name} cannot connect to the cluster`);
  tt.match(psql.stderr, /Permission denied/, `refused at the socket: ${psql.stderr.trim()}`);
}

t.test('a second local user', async (t) => {
  const evil = await localUser(t);
  if (typeof evil === 'string') {
    t.plan(0, `skipped: ${evil}`);
    return;
  }

  t.test('cannot read the data dir that mdvfs serve created', async (t) => {
    const dataDir = path.join(openParent(), 'data');
    const svc = await startService(t, { dataDir });
    t.teardown(() => svc.stop());
    const root = client(svc);
    const w = await root.put('/fs//secret.md', SECRET);
    t.equal(w.status, 200, w.text);
    t.equal((await root.post('/admin/chmod//secret.md', { mode: '0600' })).status, 200);
    const cluster = await pgClusterOf(dataDir);
    if (cluster === undefined) {
      t.ok(existsSync(path.join(dataDir, 'store.db-wal')), 'the write sits in the WAL');
      await assertSealed(t, evil, dataDir, 'sqlite');
    } else {
      await assertSealed(t, evil, dataDir, 'postgres');
      await assertClusterSealed(t, evil, cluster);
    }
  });

  t.test('cannot read the data dir that the CLI created', async (t) => {
    const dataDir = path.join(openParent(), 'data');
    t.teardown(() => stopDaemonOf(dataDir));
    const r = await runCli(cliEnvFor(dataDir), ['write', '/secret.md', SECRET]);
    t.equal(r.code, 0, r.stderr);
    await assertSealed(t, evil, dataDir, 'sqlite');
  });

  t.test('an existing 0755 data dir with 0644 files is closed at start', async (t) => {
    const dataDir = path.join(openParent(), 'data');
    t.teardown(() => stopDaemonOf(dataDir));
    const env = cliEnvFor(dataDir);
    t.equal((await runCli(env, ['write', '/secret.md', SECRET])).code, 0);
    await stopDaemonOf(dataDir);
    // What an older version left behind: everything readable by everyone.
    chmodSync(dataDir, 0o755);
    for (const name of readdirSync(dataDir)) chmodSync(path.join(dataDir, name), 0o644);
    writeFileSync(path.join(dataDir, 'store.db-wal'), `${SECRET}\n`, { flag: 'a' });
    chmodSync(path.join(dataDir, 'store.db-wal'), 0o644);
    t.equal(
      (await evil.run('cat', [path.join(dataDir, 'store.db')])).code,
      0,
      'sanity: the old layout is readable by others',
    );
    const r = await runCli(env, ['cat', '/secret.md']);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trimEnd(), SECRET);
    t.match(r.stderr, /was open to other users/, 'the fix is reported on stderr');
    await assertSealed(t, evil, dataDir, 'sqlite');
  });

  t.test('a data dir owned by another user is refused, by the CLI and by serve', async (t) => {
    const dataDir = path.join(openParent(), 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    chownSync(dataDir, evil.uid, evil.gid);
    const r = await runCli(cliEnvFor(dataDir), ['ls', '/']);
    t.equal(r.code, 1);
    t.match(
      r.stderr,
      new RegExp(`refusing to use the data dir ${dataDir}: it is owned by uid ${evil.uid}, not by you`),
    );
    t.same(readdirSync(dataDir), [], 'nothing was created in it');
    const svc = await startService(t, { dataDir }).then(
      () => 'started',
      (err: Error) => err.message,
    );
    t.match(svc, /refusing to use the data dir .* owned by uid/, 'serve says why it does not start');
    t.same(readdirSync(dataDir), [], 'still nothing in it');
  });
});
