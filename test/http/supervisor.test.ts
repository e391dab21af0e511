// `mdvfs serve` supervises its two processes; `mdvfs http` also runs alone.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { CLI, alive, client, daemonPidsFor, servePids, startService, tempDataDir, until } from '../helpers/http.js';

t.test('the sidecar is restarted when it dies', async (t) => {
  const svc = await startService(t);
  const root = client(svc);
  await root.put('/fs/x.md', 'x');
  const before = servePids(svc.proc.pid!);
  process.kill(before.http!, 'SIGKILL');
  await until(async () => {
    const now = servePids(svc.proc.pid!);
    return now.http !== undefined && now.http !== before.http && (await root.get('/health')).status === 200;
  }, 'a new sidecar');
  t.equal((await root.get('/fs/x.md')).text, 'x', 'same port, same data');
  t.equal(servePids(svc.proc.pid!).daemon, before.daemon, 'the daemon kept running');
  t.match(svc.stderr(), /sidecar exited/);
});

t.test('the daemon is restarted when it dies, and the sidecar reconnects in place', async (t) => {
  const svc = await startService(t);
  const root = client(svc);
  t.equal((await root.put('/fs/kept.md', 'kept')).status, 200);
  const before = servePids(svc.proc.pid!);
  // An open /events stream: its subscription lives on the daemon connection, so it ends with it.
  const stream = await new Promise<http.IncomingMessage>((resolve, reject) =>
    http.get({ host: '127.0.0.1', port: svc.port, path: '/events', agent: false }, resolve).on('error', reject),
  );
  t.equal(stream.statusCode, 200);
  const ended = new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.resume();
  });
  process.kill(before.daemon!, 'SIGKILL');
  await ended;
  t.pass('the /events stream ended (the client reconnects with Last-Event-ID)');
  const answers: number[] = [];
  await until(async () => {
    const now = servePids(svc.proc.pid!);
    const r = await root.get('/fs/kept.md');
    answers.push(r.status);
    if (r.status !== 200)
      t.same([r.status, r.json?.code, r.headers['retry-after'] !== undefined], [503, 'EAGAIN', true]);
    return now.daemon !== undefined && now.daemon !== before.daemon && r.status === 200;
  }, 'a new daemon behind the same address');
  t.equal((await root.get('/fs/kept.md')).text, 'kept', 'the acknowledged write survived');
  t.equal((await root.put('/fs/after.md', 'after')).status, 200, 'writes work again');
  t.match(svc.stderr(), /daemon exited/);
  t.equal(
    servePids(svc.proc.pid!).http,
    before.http,
    `the same sidecar process (answers meanwhile: ${answers.join(', ')})`,
  );
  t.notMatch(svc.stderr(), /sidecar exited/, 'the sidecar never exited');
  const exit = await svc.stop('SIGTERM');
  t.same(exit, { code: 0, signal: null });
  await until(() => daemonPidsFor(svc.dataDir).every((p) => !alive(p)), 'the restarted daemon to stop too');
  t.pass('no daemon left behind');
});

t.test('mdvfs http alone starts a background daemon, and keeps its port when the daemon goes away', async (t) => {
  const dataDir = tempDataDir(t);
  const proc = spawn(process.execPath, [CLI, 'http'], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_LISTEN: '127.0.0.1:0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    for (const pid of daemonPidsFor(dataDir)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await until(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(err), `mdvfs http to listen (${err})`, 60000);
  const port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err)![1]);
  const c = client({ port });
  t.equal((await c.put('/fs/alone.md', 'alone')).status, 200);
  t.equal((await c.get('/fs/alone.md')).text, 'alone');
  const daemons = daemonPidsFor(dataDir);
  t.equal(daemons.length, 1, 'one background daemon for the data dir');
  process.kill(daemons[0]!, 'SIGTERM');
  await until(() => !alive(daemons[0]!), 'the daemon to stop');
  // The sidecar reconnects in place: a request while no daemon runs starts one in the background
  // again (as for the mount and mdvfs-mcp); the first may get 503 EAGAIN while it starts.
  let first: Awaited<ReturnType<typeof c.get>> | undefined;
  await until(
    async () => {
      const r = await c.get('/fs/alone.md');
      first ??= r;
      return r.status === 200;
    },
    'a read through the same sidecar',
    60000,
  );
  t.ok(
    first!.status === 200 || (first!.status === 503 && first!.json.code === 'EAGAIN'),
    `first answer: ${first!.status}`,
  );
  t.equal((await c.get('/fs/alone.md')).text, 'alone', 'the same port, the same data');
  t.equal(proc.exitCode, null, 'the sidecar did not exit');
  await until(() => daemonPidsFor(dataDir).filter(alive).length === 1, 'one background daemon for the data dir');
  t.not(daemonPidsFor(dataDir).filter(alive)[0], daemons[0], 'a new background daemon');
  proc.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops it cleanly');
});

t.test('serve gives up with a clear error when its address is taken', async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as net.AddressInfo).port;
  const dataDir = tempDataDir(t);
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_LISTEN: `127.0.0.1:${port}` },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
  });
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    for (const pid of daemonPidsFor(dataDir)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
  t.equal(code, 1, 'serve exits 1');
  t.match(err, /cannot listen on 127\.0\.0\.1:\d+: the address is already in use/, 'and says why');
  await until(() => daemonPidsFor(dataDir).every((p) => !alive(p)), 'its daemon to stop');
  t.pass('its daemon was stopped');
});
