// Start-up and processes: one serve per data dir, serve keeps up whatever daemon it uses, background
// daemons exit when idle, `mdvfs daemon status` / `mdvfs stop`, and a new data dir is announced.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runCli } from '../helpers/cli.js';
import { startPostgres, testStoreEnv } from '../helpers/postgres.js';
import { CLI, alive, client, daemonPidsFor, startService, tempDataDir, until } from '../helpers/http.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * The env for CLI runs on `dataDir` (no identity from the outer environment), with the store the
 * test run asks for: the same one `startService` gives the daemons it starts for that data dir.
 */
async function cliEnvFor(dataDir: string, extra: NodeJS.ProcessEnv = {}): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SERVICE_DATA_DIR: dataDir,
    ...(await testStoreEnv(dataDir)),
    ...extra,
  };
  for (const k of [
    'SERVICE_AS_USER',
    'SERVICE_TOKEN',
    'SERVICE_ON_BEHALF_OF',
    'SERVICE_WORKSPACE',
    'SERVICE_URL',
    'MDVFS_SERVE_PID',
    'MDVFS_STARTED_BY',
  ])
    delete env[k];
  return env;
}

/** Kills every daemon of `dataDir` at teardown (whoever started it). */
function reapDaemons(t: Teardown, dataDir: string): void {
  t.teardown(() => {
    for (const pid of daemonPidsFor(dataDir)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
}

function pidFile(dataDir: string): number {
  return Number(readFileSync(path.join(dataDir, 'daemon.pid'), 'utf8').trim());
}

t.test(
  'a second serve on a served data dir exits at once, naming the data dir and the serve that holds it',
  async (t) => {
    const svc = await startService(t);
    reapDaemons(t, svc.dataDir);
    const root = client(svc);
    t.equal((await root.put('/fs/first.md', 'first')).status, 200);
    const second = spawn(process.execPath, [CLI, 'serve'], {
      env: { ...(await cliEnvFor(svc.dataDir)), SERVICE_LISTEN: '127.0.0.1:0' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    second.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    const exited = new Promise<number | null>((resolve) => second.once('exit', (code) => resolve(code)));
    t.teardown(() => {
      if (second.exitCode === null && second.signalCode === null) second.kill('SIGKILL');
    });
    let code: number | null | undefined;
    void exited.then((c) => (code = c));
    await until(() => code !== undefined, `the second serve to exit (it printed: ${err})`, 20000);
    t.equal(code, 1, 'exit status 1');
    const lines = err.trim().split('\n');
    t.equal(lines.length, 1, 'one line');
    t.match(lines[0], svc.dataDir, 'names the data dir');
    t.match(lines[0], `pid ${svc.proc.pid}`, 'names the pid of the serve that holds it');
    t.equal((await root.get('/fs/first.md')).text, 'first', 'the first serve still serves');
  },
);

t.test('two serves started together on a fresh data dir: one serves, the other exits 1', async (t) => {
  const dataDir = tempDataDir(t);
  reapDaemons(t, dataDir);
  const env = await cliEnvFor(dataDir, { SERVICE_LISTEN: '127.0.0.1:0' });
  const procs = [0, 1].map(() => {
    const p = spawn(process.execPath, [CLI, 'serve'], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const s = { p, err: '', code: undefined as number | null | undefined };
    p.stderr!.on('data', (b: Buffer) => (s.err += b.toString()));
    p.once('exit', (c) => (s.code = c));
    t.teardown(() => {
      if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
    });
    return s;
  });
  await until(
    () => procs.some((s) => s.code !== undefined) && procs.some((s) => /listening on/.test(s.err)),
    `one serve to exit and one to listen (${procs.map((s) => s.err).join(' | ')})`,
    60000,
  );
  const loser = procs.find((s) => s.code !== undefined)!;
  const winner = procs.find((s) => s !== loser)!;
  t.equal(loser.code, 1, 'the other exits 1');
  t.match(loser.err, new RegExp(`already served by mdvfs serve pid ${winner.p.pid}`), 'naming the serve that holds it');
  const port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(winner.err)![1]);
  t.equal((await client({ port }).put('/fs/x.md', 'x')).status, 200, 'the winner serves');
});

t.test('serve brings back a daemon it found running (started by the CLI) after kill -9', async (t) => {
  const dataDir = tempDataDir(t);
  reapDaemons(t, dataDir);
  const env = await cliEnvFor(dataDir);
  t.equal((await runCli(env, ['write', '/kept.md', 'kept'])).code, 0, 'a CLI command starts a background daemon');
  const background = pidFile(dataDir);
  t.ok(alive(background));
  const svc = await startService(t, { dataDir });
  const root = client(svc);
  t.match(svc.stderr(), /already serves/, 'serve uses the running daemon');
  t.equal((await root.get('/fs/kept.md')).text, 'kept\n');
  process.kill(background, 'SIGKILL');
  await until(
    async () => (await root.get('/fs/kept.md')).status === 200 && !alive(background),
    'REST to answer again from a new daemon',
    30000,
  );
  t.equal((await root.get('/fs/kept.md')).text, 'kept\n', 'same data');
  t.equal((await root.put('/fs/after.md', 'after')).status, 200, 'writes work again');
  const now = pidFile(dataDir);
  t.not(now, background, 'a new daemon');
  // And serve keeps the new one up too.
  process.kill(now, 'SIGKILL');
  await until(
    async () => (await root.get('/fs/after.md')).status === 200 && !alive(now),
    'REST to answer again after a second kill -9',
    30000,
  );
  t.same(await svc.stop('SIGTERM'), { code: 0, signal: null }, 'serve stops cleanly');
  await until(() => daemonPidsFor(dataDir).every((p) => !alive(p)), 'its daemon to stop too');
});

t.test('serve refuses a running daemon that uses another store than its SERVICE_STORE', async (t) => {
  const dataDir = tempDataDir(t);
  reapDaemons(t, dataDir);
  // A CLI command without SERVICE_STORE starts a daemon on SQLite ...
  const env = await cliEnvFor(dataDir, { SERVICE_STORE: 'sqlite' });
  t.equal((await runCli(env, ['write', '/kept.md', 'kept'])).code, 0);
  const background = pidFile(dataDir);
  // ... and serve is told to use PostgreSQL: adopting the daemon would switch stores at its next restart.
  const pg = await startPostgres(t);
  const url = await pg.createDb();
  const serve = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...env, SERVICE_STORE: url, SERVICE_LISTEN: '127.0.0.1:0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  serve.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  let code: number | null | undefined;
  serve.once('exit', (c) => (code = c));
  t.teardown(() => {
    if (serve.exitCode === null && serve.signalCode === null) serve.kill('SIGKILL');
  });
  await until(() => code !== undefined, `serve to exit (it printed: ${err})`, 20000);
  t.equal(code, 1, 'exit status 1');
  t.match(err, `a daemon (pid ${background}) already serves ${dataDir} from sqlite, not from postgres://`);
  t.notMatch(err, 'mdvfs@', 'the URL is shown without its user');
  t.ok(alive(background), 'the running daemon is left alone');
  t.equal((await runCli(env, ['cat', '/kept.md'])).stdout, 'kept\n', 'and still serves its data');
  const st = JSON.parse((await runCli(env, ['daemon', 'status', '--json'])).stdout);
  t.equal(st.store, 'sqlite', 'status names its store');
  t.equal(st.served_by, undefined, 'no serve holds it');
});

t.test(
  'a background daemon exits after SERVICE_IDLE_EXIT seconds with no client; a foreground one does not',
  async (t) => {
    const fgDir = tempDataDir(t);
    const bgDir = tempDataDir(t);
    reapDaemons(t, fgDir);
    reapDaemons(t, bgDir);
    // Foreground first (`mdvfs daemon`), never connected to until the background one has idled out.
    const fg = spawn(process.execPath, [CLI, 'daemon'], {
      env: await cliEnvFor(fgDir, { SERVICE_IDLE_EXIT: '1' }),
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    t.teardown(() => {
      if (fg.exitCode === null && fg.signalCode === null) fg.kill('SIGTERM');
    });
    await until(() => existsSync(path.join(fgDir, 'daemon.pid')), 'the foreground daemon to start');
    const env = await cliEnvFor(bgDir, { SERVICE_IDLE_EXIT: '1' });
    t.equal((await runCli(env, ['whoami'])).code, 0);
    const bg = pidFile(bgDir);
    await until(() => !alive(bg), 'the background daemon to exit when idle', 30000);
    t.match(
      readFileSync(path.join(bgDir, 'daemon.log'), 'utf8'),
      /no client for 1 s, flushing and stopping/,
      'it says why in its log',
    );
    t.notOk(existsSync(path.join(bgDir, 'daemon.sock')), 'its socket is gone');
    t.ok(alive(fg.pid!), 'the foreground daemon, idle longer, still runs');
    const st = await runCli(await cliEnvFor(fgDir), ['daemon', 'status', '--json']);
    t.equal(st.code, 0);
    t.match(JSON.parse(st.stdout), { running: true, pid: fg.pid, started_by: 'foreground', idle_exit: 0 });
    // The next command starts a new background daemon on the same data: nothing was lost.
    t.equal((await runCli(env, ['write', '/again.md', 'again'])).code, 0);
    t.equal((await runCli(env, ['cat', '/again.md'])).stdout, 'again\n');
  },
);

t.test('mdvfs daemon status and mdvfs stop', async (t) => {
  const dataDir = tempDataDir(t);
  reapDaemons(t, dataDir);
  const env = await cliEnvFor(dataDir);
  const none = await runCli(env, ['daemon', 'status']);
  t.equal(none.code, 1, 'status: exit 1 when no daemon runs');
  t.equal(none.stdout, `no daemon runs for ${dataDir}\n`);
  t.same(JSON.parse((await runCli(env, ['daemon', 'status', '--json'])).stdout), { running: false, data_dir: dataDir });
  t.notOk(existsSync(path.join(dataDir, 'daemon.sock')), 'status started no daemon');

  t.equal((await runCli(env, ['useradd', 'alice'])).code, 0);
  t.equal((await runCli(env, ['write', '/a.md', 'a'])).code, 0);
  t.equal((await runCli(env, ['write', '/b.md', 'b'])).code, 0);
  t.equal((await runCli(env, ['commit', '-m', 'one'])).code, 0);
  const pid = pidFile(dataDir);
  const js = await runCli(env, ['daemon', 'status', '--json']);
  t.equal(js.code, 0, js.stderr);
  const st = JSON.parse(js.stdout);
  t.match(st, {
    running: true,
    pid,
    data_dir: dataDir,
    socket: path.join(dataDir, 'daemon.sock'),
    started_by: 'background',
    idle_exit: 300,
    users: 2,
    files: 2,
    commits: 1,
    clients: 0,
  });
  t.type(st.uptime, 'number');
  t.notOk('served_by' in st);
  const text = await runCli(env, ['daemon', 'status']);
  t.equal(text.code, 0);
  t.match(text.stdout, new RegExp(`pid ${pid}, up `));
  t.match(text.stdout, `data dir: ${dataDir}`);
  t.match(text.stdout, /users: 2, files: 2, commits: 1, clients: 0/);
  t.match(text.stdout, /in the background by a client; exits after 300 s with no clients/);

  const stop = await runCli(env, ['stop']);
  t.equal(stop.code, 0, stop.stderr);
  t.match(stop.stderr, `stopped the daemon (pid ${pid}) of ${dataDir}`);
  t.notOk(alive(pid), 'the daemon is gone when stop returns');
  t.notOk(existsSync(path.join(dataDir, 'daemon.sock')), 'and its socket');
  const again = await runCli(env, ['stop']);
  t.equal(again.code, 0);
  t.equal(again.stderr, `mdvfs: no daemon runs for ${dataDir}; nothing to stop\n`, 'says that none runs');
  t.equal((await runCli(env, ['cat', '/a.md'])).stdout, 'a\n', 'the data was kept');
});

t.test('mdvfs stop stops the serve that keeps the daemon up', async (t) => {
  const svc = await startService(t);
  reapDaemons(t, svc.dataDir);
  const env = await cliEnvFor(svc.dataDir);
  const st = JSON.parse((await runCli(env, ['daemon', 'status', '--json'])).stdout);
  t.match(st, { running: true, started_by: 'serve', served_by: svc.proc.pid, idle_exit: 0 });
  const stop = await runCli(env, ['stop']);
  t.equal(stop.code, 0, stop.stderr);
  t.match(stop.stderr, `stopping mdvfs serve (pid ${svc.proc.pid})`);
  t.same(await svc.exited, { code: 0, signal: null }, 'serve exited 0');
  t.notOk(alive(st.pid), 'the daemon is gone');
});

t.test('a front end that creates the data dir says so, once', async (t) => {
  const parent = tempDataDir(t);
  const dataDir = path.join(parent, 'mistyped', 'mdvfs');
  reapDaemons(t, dataDir);
  const env = await cliEnvFor(dataDir);
  const first = await runCli(env, ['ls', '/']);
  t.equal(first.code, 0, first.stderr);
  t.equal(
    first.stderr,
    `mdvfs: created a new data dir ${dataDir} (set SERVICE_DATA_DIR to use another)\n`,
    'one line on stderr',
  );
  const second = await runCli(env, ['ls', '/']);
  t.equal(second.stderr, '', 'not again');
  await runCli(env, ['stop']);
});
