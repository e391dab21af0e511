/**
 * Finding and starting the daemon of a data dir (DESIGN.md §1): clients start one in the
 * background when none runs, concurrent starters end up sharing one, the socket is private,
 * deep data dirs fall back to a short socket path, and SIGTERM stops cleanly.
 */
import t from 'tap';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { connectDaemon, socketPathFor } from '../../daemon/rpc/connect.js';
import { cleanup, DAEMON_ENTRY, ROOT_DIR, spawnDaemon, tempDir, text } from '../helpers/daemon.js';
import { testStoreEnv } from '../helpers/postgres.js';

/** Stops a background daemon this test caused to start (by its pid, from the ping). */
function stopPid(pid: number): void {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    // already gone
  }
}

async function waitGone(pid: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A front end in its own process (`node -e`, as scripts do), using the built client. The guard
 * makes a child that re-runs this code (the daemon must never do that) exit at once instead of
 * starting yet another one.
 */
function frontEnd(dir: string, write?: string): Promise<{ code: number | null; pid: number; err: string }> {
  const code = `if (process.env.CONNECT_TEST_CHILD) { process.stderr.write('re-ran the client code'); process.exit(3); }
process.env.CONNECT_TEST_CHILD = '1';
const { connectDaemon } = await import(${JSON.stringify(path.join(ROOT_DIR, 'dist', 'daemon', 'rpc', 'connect.js'))});
const c = await connectDaemon({ dataDir: ${JSON.stringify(dir)}, timeoutMs: 60000 });
${write === undefined ? '' : `await c.call('fs.write', { path: ${JSON.stringify(write)} }, { data: Buffer.from('from ' + process.pid) });`}
const r = await c.call('sys.ping', {});
process.stdout.write(String(r.pid));
c.close();`;
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr.on('data', (b: Buffer) => (err += b.toString()));
    p.on('exit', (c) => resolve({ code: c, pid: Number(out), err }));
  });
}

t.test('a client with no daemon starts one; concurrent starters share it', async (t) => {
  const dir = tempDir();
  const pids = new Set<number>();
  t.teardown(async () => {
    for (const pid of pids) stopPid(pid);
    for (const pid of pids) await waitGone(pid);
    cleanup(dir);
  });
  // three front ends at once, none finding a daemon
  const runs = await Promise.all([frontEnd(dir, '/tmp/a.md'), frontEnd(dir, '/tmp/b.md'), frontEnd(dir, '/tmp/c.md')]);
  for (const r of runs) {
    t.equal(r.code, 0, r.err);
    if (r.pid > 0) pids.add(r.pid);
  }
  t.equal(pids.size, 1, 'one daemon serves everyone');
  const pid = [...pids][0]!;
  t.equal(readFileSync(path.join(dir, 'daemon.pid'), 'utf8').trim(), String(pid));
  t.equal(statSync(socketPathFor(dir)).mode & 0o777, 0o600, 'the socket is private to its owner');
  t.ok(existsSync(path.join(dir, 'daemon.log')), 'the background daemon logs to the data dir');
  // it outlives the clients that started it, with everything they wrote
  const c = await connectDaemon({ dataDir: dir, spawn: false });
  t.teardown(() => c.close());
  t.equal((await c.call('sys.ping', {})).pid, pid);
  t.same(
    (await c.call('fs.list', { path: '/tmp' })).entries.map((e) => e.name),
    ['a.md', 'b.md', 'c.md'],
  );
  // a later front end finds it
  const later = await frontEnd(dir);
  t.equal(later.pid, pid);
  // spawn: false never starts one
  const empty = tempDir();
  t.teardown(() => cleanup(empty));
  await t.rejects(connectDaemon({ dataDir: empty, spawn: false }));
  t.notOk(existsSync(path.join(empty, 'store.db')));
});

t.test('a deep data dir gets a short socket path elsewhere', async (t) => {
  const base = tempDir();
  t.teardown(() => cleanup(base));
  const deep = path.join(base, 'a-rather-long-directory-name-'.repeat(4), 'data');
  mkdirSync(deep, { recursive: true });
  const sock = socketPathFor(deep);
  t.ok(Buffer.byteLength(path.join(deep, 'daemon.sock')) > 107, 'the direct path would not fit');
  t.ok(Buffer.byteLength(sock) <= 107, `the fallback fits: ${sock}`);
  t.not(path.dirname(sock), deep);
  const d = await spawnDaemon(t, {}, deep);
  t.equal((await d.client.call('sys.ping', {})).pid, d.proc.pid);
  t.equal(statSync(sock).mode & 0o777, 0o600);
  t.not(socketPathFor(deep + '-other'), sock, 'another data dir gets another socket');
  await d.kill('SIGTERM');
  t.notOk(existsSync(sock), 'removed on a clean stop');
});

t.test('SIGTERM stops cleanly: exit 0, socket and pid file removed, data kept', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  // The store the test run asks for (MDVFS_TEST_STORE), the one spawnDaemon below uses for this dir.
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dir, ...(await testStoreEnv(dir)) };
  const start = () => spawn(process.execPath, [DAEMON_ENTRY], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const p = start();
  let err = '';
  p.stderr.on('data', (b: Buffer) => (err += b.toString()));
  let c;
  for (;;) {
    try {
      c = await connectDaemon({ dataDir: dir, spawn: false });
      break;
    } catch {
      if (p.exitCode !== null) throw new Error(err);
      await new Promise((r) => setTimeout(r, 30));
    }
  }
  await c.call('fs.write', { path: '/tmp/kept.md' }, text('kept'));
  const exited = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
  p.kill('SIGTERM');
  t.equal(await exited, 0);
  t.notOk(existsSync(socketPathFor(dir)));
  t.notOk(existsSync(path.join(dir, 'daemon.pid')));
  // SQLite keeps the data in the data dir; PostgreSQL in its database (read back below either way).
  t.equal(existsSync(path.join(dir, 'store.db')), env.SERVICE_STORE === undefined);
  const d = await spawnDaemon(t, {}, dir);
  t.equal((await d.client.request('fs.read', { path: '/tmp/kept.md' })).data.toString(), 'kept');
});
