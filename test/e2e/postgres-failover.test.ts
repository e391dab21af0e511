/**
 * Several daemons on one PostgreSQL database (docs/deploy.md): one active (the lease: an advisory
 * lock on a dedicated connection plus an epoch row that every batch checks), the others standbys
 * that follow the change stream and answer EAGAIN. Real daemon processes, a real private cluster,
 * real signals: kill -9 of the active daemon (a standby takes over with every acknowledged write),
 * SIGSTOP/SIGCONT (the paused leader writes nothing and steps down), an epoch taken over under a
 * live connection (the batch is refused).
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../../daemon/errors.js';
import type { Caller } from '../../daemon/rpc/client.js';
import { runCli } from '../helpers/cli.js';
import { readText, spawnDaemon, tempDir, text, type TestDaemon } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';
import { call, errorCode, startServe, stdioClient, text as toolText } from '../helpers/mcp.js';
import { servePids } from '../helpers/http.js';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

const exitOf = (p: ChildProcess): Promise<number | null> => (p.exitCode !== null || p.signalCode !== null ? Promise.resolve(p.exitCode) : new Promise((resolve) => p.once('exit', (code) => resolve(code))));
const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;

/** What a request that must not succeed came to: its error code, or 'ok'. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return err instanceof VfsError ? err.code : String(err);
  }
}

t.test('a standby follows the change stream, answers EAGAIN and shows its role, epoch and lag', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  await a.client.as({}).call('fs.write', { path: '/one.md' }, text('one'));
  const b = await spawnDaemon(t, { SERVICE_STORE: url });
  const sa = await a.client.call('sys.status', {});
  const sb = await b.client.call('sys.status', {});
  t.equal(sa.role, 'active');
  t.equal(sb.role, 'standby');
  t.equal(sb.epoch, sa.epoch, 'the standby knows the active epoch');
  t.match(sb.active, new RegExp(`:${sa.pid}$`), 'and who holds the lease');
  const err = await b.client
    .as({})
    .call('fs.read', { path: '/one.md' })
    .then(
      () => undefined,
      (e: unknown) => e as VfsError,
    );
  t.equal(err?.code, 'EAGAIN', 'a standby answers EAGAIN');
  t.match(err?.message, /not active: this daemon is a standby/);
  for (let i = 0; i < 20; i++) await a.client.as({}).call('fs.write', { path: `/f${i}.md` }, text(`v${i}`));
  await until(async () => (await b.client.call('sys.status', {})).lag === 0, 'the standby to catch up');
  const cli = await runCli({ ...process.env, SERVICE_DATA_DIR: b.dataDir }, ['daemon', 'status']);
  t.match(cli.stdout, new RegExp(`role: +standby, epoch ${sa.epoch}, lag 0 change\\(s\\)`), 'mdvfs daemon status shows the role, epoch and lag');
  const cliA = await runCli({ ...process.env, SERVICE_DATA_DIR: a.dataDir }, ['daemon', 'status']);
  t.match(cliA.stdout, new RegExp(`role: +active, epoch ${sa.epoch}`));
});

t.test('kill -9 of the active daemon during a burst: a standby serves every acknowledged write, 10 rounds', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  let active = await spawnDaemon(t, { SERVICE_STORE: url });
  let standby = await spawnDaemon(t, { SERVICE_STORE: url });
  const acked = new Map<string, string>();
  const times: number[] = [];
  for (let round = 0; round < 10; round++) {
    t.equal(await role(active), 'active', `round ${round}: one daemon is active`);
    t.equal(await role(standby), 'standby', `round ${round}: the other is a standby`);
    const root = active.client.as({});
    let stop = false;
    let n = 0;
    const writer = async (w: number): Promise<void> => {
      while (!stop) {
        const p = `/r${round}/w${w}-${n++}.md`;
        const body = `round ${round} writer ${w} ${p} ${'x'.repeat(n % 300)}`;
        try {
          await root.call('fs.write', { path: p, parents: true }, text(body));
          acked.set(p, body);
        } catch {
          return; // the daemon died: this write was not acknowledged
        }
      }
    };
    const writers = Array.from({ length: 8 }, (_, w) => writer(w));
    await until(() => n >= 40 + round * 7, 'some acknowledged writes');
    const killedAt = Date.now();
    await active.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    await until(async () => (await role(standby)) === 'active', 'the standby to take over');
    times.push(Date.now() - killedAt);
    const next = standby.client.as({});
    const wrong: string[] = [];
    const all = [...acked];
    for (let i = 0; i < all.length; i += 64) {
      await Promise.all(
        all.slice(i, i + 64).map(async ([p, body]) => {
          if ((await readText(next, p).catch(() => undefined)) !== body) wrong.push(p);
        }),
      );
    }
    t.same(wrong, [], `round ${round}: all ${acked.size} acknowledged writes are there`);
    t.same((await standby.client.call('sys.fsck', {})).problems, [], `round ${round}: fsck clean`);
    // The killed daemon comes back as the standby of the next round.
    await active.restart();
    [active, standby] = [standby, active];
  }
  times.sort((x, y) => x - y);
  t.ok(times[times.length - 1]! < 5000, `the standby served within 5 s every time (median ${times[5]} ms, worst ${times[times.length - 1]} ms)`);
  t.ok(acked.size > 400, `${acked.size} acknowledged writes checked`);
});

t.test('a paused leader (SIGSTOP) loses the lease; woken (SIGCONT), it writes nothing and steps down', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  const env = { SERVICE_STORE: url, SERVICE_LEASE_TIMEOUT_MS: '2000' };
  const a = await spawnDaemon(t, env);
  await a.client.as({}).call('fs.write', { path: '/before.md' }, text('before'));
  const b = await spawnDaemon(t, env);
  const epochA = (await a.client.call('sys.status', {})).epoch!;
  a.proc.kill('SIGSTOP');
  // Sent while the leader sleeps: the request waits in its socket buffer.
  const late: Promise<unknown> = a.client.as({}).call('fs.write', { path: '/late.md' }, text('written by a stale leader'));
  await until(async () => (await role(b)) === 'active', 'the standby to take over from the paused leader');
  const sb = await b.client.call('sys.status', {});
  t.ok(sb.epoch! > epochA, 'the new leader has a newer epoch');
  await b.client.as({}).call('fs.write', { path: '/after.md' }, text('after'));
  const exited = exitOf(a.proc);
  a.proc.kill('SIGCONT');
  t.not(await outcome(late), 'ok', 'the stale leader acknowledges nothing');
  t.equal(await exited, 1, 'it steps down (exits) once it wakes');
  t.match(a.stderr(), /lost the lease/);
  t.same(await pg.query(db, "SELECT id FROM inodes WHERE name = 'late.md'"), [], 'its write is not in PostgreSQL');
  t.same(await pg.query(db, 'SELECT DISTINCT epoch::int AS epoch FROM changes WHERE epoch > $1', [sb.epoch]), [], 'no batch of another epoch after the takeover');
  t.equal(await readText(b.client.as({}), '/before.md'), 'before');
  t.equal(await readText(b.client.as({}), '/after.md'), 'after');
  t.same((await b.client.call('sys.fsck', {})).problems, []);
});

t.test('a batch of a daemon whose epoch was taken over is refused inside its transaction', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  // The default lease timeout: the heartbeat (every 2.5 s) does not notice first, the batch's own check does.
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const root: Caller = a.client.as({});
  await root.call('fs.write', { path: '/kept.md' }, text('kept'));
  const exited = exitOf(a.proc);
  // Another leader's epoch, while this daemon's connections live on (a partition healed, say).
  await pg.query(db, 'UPDATE lease SET epoch = epoch + 1');
  t.equal(await outcome(root.call('fs.write', { path: '/fenced.md' }, text('must not land'))), 'EIO', 'the write is refused');
  t.equal(await exited, 1, 'the daemon steps down');
  t.match(a.stderr(), /lost the lease: its epoch is \d+, the store's \d+/);
  t.same(await pg.query(db, "SELECT id FROM inodes WHERE name = 'fenced.md'"), [], 'nothing of the refused batch is in PostgreSQL');
  t.equal((await pg.query(db, "SELECT count(*)::int AS n FROM inodes WHERE name = 'kept.md'"))[0]?.n, 1);
});

t.test('front ends given SERVICE_DAEMONS use the active daemon and follow it after a failover', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const b = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal(await role(b), 'standby');
  // The standby first: it is skipped.
  const daemons = `${socketPathFor(b.dataDir)},${socketPathFor(a.dataDir)}`;
  // No data dir of their own: the list is all they use.
  const nowhere = path.join(tempDir(), 'none');
  const cliEnv = { ...process.env, SERVICE_DAEMONS: daemons, SERVICE_DATA_DIR: nowhere };
  const w = await runCli(cliEnv, ['write', '-n', '/cli.md', 'from the cli']);
  t.equal(w.code, 0, w.stderr);
  t.equal(await readText(a.client.as({}), '/cli.md'), 'from the cli', 'the CLI wrote through the active daemon');
  const mcp = await stdioClient(t, nowhere, { SERVICE_DAEMONS: daemons });
  t.equal(errorCode(await call(mcp.client, 'write_file', { path: '/mcp.md', content: 'from mcp' })), undefined, 'MCP writes through the active daemon');
  await a.kill('SIGKILL');
  await until(async () => (await role(b)) === 'active', 'the standby to take over');
  t.equal(toolText(await call(mcp.client, 'read_file', { path: '/mcp.md' })).includes('from mcp'), true, 'the MCP server reconnected to the new active daemon');
  t.equal(errorCode(await call(mcp.client, 'write_file', { path: '/mcp2.md', content: 'after failover' })), undefined);
  t.equal(await readText(b.client.as({}), '/mcp2.md'), 'after failover');
  const r = await runCli(cliEnv, ['cat', '/cli.md']);
  t.equal(r.stdout, 'from the cli', 'the CLI finds the new active daemon');
  const none = await runCli({ ...cliEnv, SERVICE_DAEMONS: socketPathFor(a.dataDir) }, ['cat', '/cli.md']);
  t.not(none.code, 0, 'no active daemon in the list: a clear error');
  t.match(none.stderr, /no active daemon among SERVICE_DAEMONS/);
  t.notOk(existsSync(nowhere), 'no data dir was made for them');
});

t.test('two mdvfs serve on one database: REST through either keeps working across a kill -9 of the active daemon', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const dirA = tempDir();
  const dirB = tempDir();
  t.teardown(() => {
    rmSync(dirA, { recursive: true, force: true });
    rmSync(dirB, { recursive: true, force: true });
  });
  const env = { SERVICE_STORE: url, SERVICE_DAEMONS: `${socketPathFor(dirA)},${socketPathFor(dirB)}` };
  const sa = await startServe(t, { dataDir: dirA, env });
  await until(() => existsSync(socketPathFor(dirA)), 'the first daemon');
  const sb = await startServe(t, { dataDir: dirB, env });
  const put = async (base: string, p: string, body: string): Promise<number> => (await fetch(`${base}/fs/${p}`, { method: 'PUT', body })).status;
  const get = async (base: string, p: string): Promise<string | number> => {
    const r = await fetch(`${base}/fs/${p}`);
    return r.status === 200 ? await r.text() : r.status;
  };
  t.equal(await put(sb.base, 'via-b.md', 'through serve B'), 200, "serve B's sidecar writes through the active daemon (serve A's)");
  t.equal(await get(sa.base, 'via-b.md'), 'through serve B');
  const daemonA = servePids(sa.proc.pid!).daemon;
  t.ok(daemonA !== undefined, "serve A's daemon");
  process.kill(daemonA!, 'SIGKILL');
  // Both sidecars lose their daemon connection, are restarted by their serve, and find the new active daemon.
  await until(async () => (await get(sa.base, 'via-b.md')) === 'through serve B', 'REST through serve A after the failover', 60000);
  await until(async () => (await get(sb.base, 'via-b.md')) === 'through serve B', 'REST through serve B after the failover', 60000);
  t.equal(await put(sa.base, 'after.md', 'after the failover'), 200);
  const b = await connectSocket(socketPathFor(dirB));
  t.teardown(() => b.close());
  t.equal((await b.call('sys.status', {})).role, 'active', "serve B's daemon is the active one now");
  t.equal(await readText(b.as({}), '/after.md'), 'after the failover');
  await until(async () => {
    const c = await connectSocket(socketPathFor(dirA));
    try {
      return (await c.call('sys.status', {})).role === 'standby';
    } finally {
      c.close();
    }
  }, "serve A's restarted daemon to wait as a standby");
});

t.test('a standby that fell behind a trim of the change stream reads everything again', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const b = await spawnDaemon(t, { SERVICE_STORE: url });
  await a.client.as({}).call('fs.write', { path: '/early.md' }, text('early'));
  await until(async () => (await b.client.call('sys.status', {})).lag === 0, 'the standby to catch up');
  // The standby sleeps (well within the lease timeout) while a batch is written and then trimmed away.
  b.proc.kill('SIGSTOP');
  await a.client.as({}).call('fs.write', { path: '/mid.md' }, text('trimmed away'));
  // What the active daemon's trim does, past everything the standby applied.
  const head = Number((await pg.query(db, 'SELECT max(seq) AS s FROM changes'))[0]!.s);
  await pg.query(db, 'UPDATE lease SET trimmed = $1', [head]);
  await pg.query(db, 'DELETE FROM changes');
  await a.client.as({}).call('fs.write', { path: '/late.md' }, text('late'));
  b.proc.kill('SIGCONT');
  await until(async () => (await b.client.call('sys.status', {})).lag === 0, 'the standby to catch up again');
  await a.kill('SIGKILL');
  await until(async () => (await role(b)) === 'active', 'the standby to take over');
  t.equal(await readText(b.client.as({}), '/early.md'), 'early');
  t.equal(await readText(b.client.as({}), '/mid.md'), 'trimmed away', 'the batch whose change row was trimmed is there');
  t.equal(await readText(b.client.as({}), '/late.md'), 'late');
  t.same((await b.client.call('sys.fsck', {})).problems, []);
});
