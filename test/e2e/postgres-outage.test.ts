/**
 * `mdvfs serve` on PostgreSQL rides out an outage (docs/deploy.md, "PostgreSQL outages"): PostgreSQL
 * stopped with pg_ctl for ~10 s, then started again. Serve and its daemon survive, the HTTP port
 * answers 503 with Retry-After for writes (reads from the daemon's memory), and writes succeed again
 * once PostgreSQL is back, durable in the database. A configuration error still fails at once.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { CLI, request, servePids, startService, tempDataDir } from '../helpers/http.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

/** The stored content of `/<name>` in database `db` (read directly, not through mdvfs), or undefined. */
async function storedText(pg: Awaited<typeof cluster>, db: string, name: string): Promise<string | undefined> {
  const rows = await pg.query(
    db,
    `SELECT o.data FROM inodes i JOIN objects o ON o.id = i.blob
     WHERE i.name = $1 AND i.parent = (SELECT id FROM inodes WHERE parent IS NULL)`,
    [name],
  );
  const data = rows[0]?.data;
  return Buffer.isBuffer(data) ? data.toString('utf8') : undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test(
  'a 10 s PostgreSQL stop: serve survives, answers 503 + Retry-After, and writes again once it is back',
  async (t) => {
    const pg = await cluster;
    const url = await pg.createDb();
    const db = new URL(url).pathname.slice(1);
    const svc = await startService(t, { env: { SERVICE_STORE: url } });
    const put = (p: string, body: string) => request(svc, 'PUT', `/fs//${p}`, { body });
    const get = (p: string) => request(svc, 'GET', `/fs//${p}`);
    t.equal((await put('before.md', 'written before')).status, 200);
    const pids = servePids(svc.proc.pid!);
    t.ok(pids.daemon !== undefined && pids.http !== undefined, 'serve runs a daemon and a sidecar');

    await pg.pause();
    t.teardown(() => pg.resume()); // the next test needs it, whatever happens here
    const stoppedAt = Date.now();
    // The daemon notices at once (its sessions are ended by the shutdown); a write is refused, never acknowledged.
    let refused = await put('during.md', 'written during the outage');
    await until(async () => {
      refused = await put('during.md', 'written during the outage');
      return refused.status === 503;
    }, 'a write to be refused with 503 while PostgreSQL is down');
    t.equal(refused.status, 503, 'a write during the outage is 503');
    t.match(refused.headers['retry-after'], /^\d+$/, 'with Retry-After');
    t.equal(refused.json?.code, 'EAGAIN');
    t.match(refused.json?.error, /PostgreSQL .*unreachable/, 'saying why');
    const read = await get('before.md');
    t.equal(read.status, 200, 'reads are served from the daemon while PostgreSQL is down');
    t.equal(read.text, 'written before');
    // Stay down ~10 s in all, asking now and then: the port stays open throughout.
    while (Date.now() - stoppedAt < 10_000) {
      await sleep(1000);
      const r = await put('during.md', 'still down');
      t.equal(r.status, 503, `still 503 after ${Math.round((Date.now() - stoppedAt) / 1000)} s`);
      t.ok(r.headers['retry-after'] !== undefined, 'with Retry-After');
    }
    t.equal(svc.proc.exitCode, null, 'serve is still running');
    t.same(servePids(svc.proc.pid!), pids, 'the same daemon and sidecar: nothing was restarted');

    await pg.resume();
    await until(async () => (await put('after.md', 'written after')).status === 200, 'writes to succeed again');
    t.equal(await storedText(pg, db, 'after.md'), 'written after', 'the write after the outage is in PostgreSQL');
    t.equal((await get('before.md')).text, 'written before', 'what was written before is still there');
    t.equal((await get('during.md')).status, 404, 'nothing refused during the outage appeared afterwards');
    t.equal(await storedText(pg, db, 'during.md'), undefined, 'nor in PostgreSQL');
    t.equal(svc.proc.exitCode, null, 'serve is still running');
    t.match(svc.stderr(), /lost PostgreSQL/, 'the daemon logged the outage');
    t.match(svc.stderr(), /PostgreSQL is back/, 'and its end');
  },
);

t.test('serve started while PostgreSQL is down: 503 + Retry-After until it comes up, then it serves', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  await pg.pause();
  t.teardown(() => pg.resume());
  const svc = await startService(t, { env: { SERVICE_STORE: url } });
  const r = await request(svc, 'GET', '/fs//');
  t.equal(r.status, 503, 'the port is open and answers 503');
  t.ok(r.headers['retry-after'] !== undefined, 'with Retry-After');
  t.match(r.json?.error, /PostgreSQL .*unreachable/);
  await sleep(3000);
  t.equal(svc.proc.exitCode, null, 'serve waits for PostgreSQL instead of giving up');
  await pg.resume();
  await until(
    async () => (await request(svc, 'PUT', '/fs//late.md', { body: 'late start' })).status === 200,
    'writes once PostgreSQL is up',
  );
  t.equal((await request(svc, 'GET', '/fs//late.md')).text, 'late start');
});

t.test('a configuration error still fails at once with a clear message', async (t) => {
  const pg = await cluster;
  const missing = pg.url('no_such_database');
  const dataDir = tempDataDir(t);
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_LISTEN: '127.0.0.1:0', SERVICE_STORE: missing },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
  t.equal(code, 1, 'serve stops');
  t.match(err, /no_such_database.*does not exist/, "the daemon's message names the database");
  t.match(err, /cannot use .*SERVICE_STORE.*stopping/, 'serve says why it stops');
  t.equal(err.match(/does not exist/g)?.length, 1, 'the daemon was started once, not restarted');
});
