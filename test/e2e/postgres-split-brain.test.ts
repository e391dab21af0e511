/**
 * No split brain (issue 31, item 1): a data dir belongs to one store, and front ends check the store a
 * daemon serves before they trust it. Reproduces the trial's failure: a front end run with a
 * PostgreSQL node's data dir but without SERVICE_STORE, while that node's daemon was down, started a
 * SQLite daemon on the socket other front ends list in SERVICE_DAEMONS, and they sent it writes that
 * were acknowledged and never reached PostgreSQL.
 */
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { runCli } from '../helpers/cli.js';
import { readText, spawnDaemon, tempDir, text, type TestDaemon } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;
const exists = async (d: TestDaemon, p: string): Promise<boolean> =>
  d.client
    .as({})
    .call('fs.stat', { path: p })
    .then(
      () => true,
      (err: { code?: string }) => {
        if (err.code === 'ENOENT') return false;
        throw err;
      },
    );
/** The environment of a front end on `dataDir`, with no SERVICE_STORE (the mistake the trial made). */
const bare = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.SERVICE_STORE;
  return env;
};

t.test('a front end never starts a daemon of another store in a PostgreSQL data dir', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const b = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal(await role(b), 'standby');
  const rec = JSON.parse(readFileSync(path.join(a.dataDir, 'store.json'), 'utf8')) as { kind: string; id: string };
  t.equal(rec.kind, 'postgres', 'the data dir records the store it belongs to');
  t.equal(rec.id, (await a.client.call('sys.health', {})).store?.id, 'by the id the daemon names');

  // While its daemon runs, a front end without SERVICE_STORE uses it: the data dir says which store it is.
  const ok = await runCli(bare({ SERVICE_DATA_DIR: a.dataDir }), ['write', '-n', '/before.md', 'ok']);
  t.equal(ok.code, 0, ok.stderr);
  t.equal(await readText(a.client.as({}), '/before.md'), 'ok');

  await a.kill('SIGKILL');
  await until(async () => (await role(b)) === 'active', 'the standby to take over');

  const w = await runCli(bare({ SERVICE_DATA_DIR: a.dataDir }), ['write', '-n', '/lost.md', 'acknowledged?']);
  t.not(w.code, 0, 'refused: no daemon of another store is started');
  t.match(w.stderr, /belongs to the PostgreSQL store/);
  t.match(w.stderr, /SERVICE_STORE|SERVICE_DAEMONS/, 'and says what to do');
  t.notOk(existsSync(path.join(a.dataDir, 'store.db')), 'no SQLite store was made there');
  t.notOk(
    await connectSocket(socketPathFor(a.dataDir)).then(
      (c) => (c.close(), true),
      () => false,
    ),
    'no daemon listens on its socket',
  );
  t.notOk(await exists(b, '/lost.md'), 'nothing was acknowledged');

  // `mdvfs daemon` itself (what a background start runs) refuses the data dir too.
  const d = await runCli(bare({ SERVICE_DATA_DIR: a.dataDir }), ['daemon']);
  t.not(d.code, 0, 'a SQLite daemon refuses a PostgreSQL data dir');
  t.match(d.stderr, /belongs to the PostgreSQL store/);
  t.notOk(existsSync(path.join(a.dataDir, 'store.db')));

  // The same data dir with its store named: the daemon comes back (as a standby) and front ends use the active one.
  const back = await spawnDaemon(t, { SERVICE_STORE: url }, a.dataDir);
  t.equal(await role(back), 'standby', 'the node rejoins as a standby');
});

t.test('front ends given SERVICE_DAEMONS pass over a daemon of another store', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const other = await pg.createDb();
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  // A SQLite daemon on a listed socket (what the trial's mistaken start made), listed first.
  const squatter = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' });
  // The active daemon of another PostgreSQL database.
  const foreign = await spawnDaemon(t, { SERVICE_STORE: other });
  const nowhere = path.join(tempDir(), 'none');

  const list = `${socketPathFor(squatter.dataDir)},${socketPathFor(a.dataDir)}`;
  const w = await runCli(bare({ SERVICE_DAEMONS: list, SERVICE_DATA_DIR: nowhere }), [
    'write',
    '-n',
    '/via-list.md',
    'into PostgreSQL',
  ]);
  t.equal(w.code, 0, w.stderr);
  t.equal(await readText(a.client.as({}), '/via-list.md'), 'into PostgreSQL', 'the write went to PostgreSQL');
  t.notOk(await exists(squatter, '/via-list.md'), 'not to the SQLite daemon');

  // One daemon listed (a SQLite daemon over TLS is a supported set-up): the store the front end names decides.
  const only = await runCli(
    { ...bare({ SERVICE_DAEMONS: socketPathFor(squatter.dataDir), SERVICE_DATA_DIR: nowhere }), SERVICE_STORE: url },
    ['write', '-n', '/x.md', 'x'],
  );
  t.not(only.code, 0, 'a front end of a PostgreSQL store never uses a SQLite daemon');
  t.match(only.stderr, /serves a SQLite store/);
  t.notOk(await exists(squatter, '/x.md'));

  // With this machine's data dir recording the store, an active daemon of another database is passed over.
  const mine = `${socketPathFor(foreign.dataDir)},${socketPathFor(a.dataDir)}`;
  const f = await runCli(bare({ SERVICE_DAEMONS: mine, SERVICE_DATA_DIR: a.dataDir }), [
    'write',
    '-n',
    '/pinned.md',
    'the recorded store',
  ]);
  t.equal(f.code, 0, f.stderr);
  t.equal(await readText(a.client.as({}), '/pinned.md'), 'the recorded store');
  t.notOk(await exists(foreign, '/pinned.md'), 'not the other database');
  const g = await runCli(bare({ SERVICE_DAEMONS: socketPathFor(foreign.dataDir), SERVICE_DATA_DIR: a.dataDir }), [
    'cat',
    '/pinned.md',
  ]);
  t.not(g.code, 0);
  t.match(g.stderr, /serves the store .* not /);
});

t.test('mdvfs migrate moves the data dir to the new store: no SQLite daemon starts on the old store.db', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const src = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' });
  await src.client.as({}).call('fs.write', { path: '/moved.md' }, text('moved'));
  await src.kill('SIGTERM');
  const m = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
  t.equal(m.code, 0, m.stderr);
  const rec = JSON.parse(readFileSync(path.join(src.dataDir, 'store.json'), 'utf8')) as { kind: string };
  t.equal(rec.kind, 'postgres');
  const r = await runCli(bare({ SERVICE_DATA_DIR: src.dataDir }), ['cat', '/moved.md']);
  t.not(r.code, 0, 'the old SQLite store is not served again');
  t.match(r.stderr, /belongs to the PostgreSQL store/);
  const d = await spawnDaemon(t, { SERVICE_STORE: url }, src.dataDir);
  t.equal(await readText(d.client.as({}), '/moved.md'), 'moved', 'the same data dir serves the copy');
});
