/**
 * One active daemon per PostgreSQL database (docs/deploy.md): a standby follows the change stream
 * (and reloads when it fell behind a trim), answers EAGAIN and shows its role, epoch and lag; a paused
 * leader (SIGSTOP/SIGCONT) and a daemon whose epoch was taken over under a live connection write
 * nothing and step down. Real daemon processes, a real private cluster, real signals.
 */
import t from 'tap';
import { VfsError } from '../../daemon/errors.js';
import type { Caller } from '../../daemon/rpc/client.js';
import { runCli } from '../helpers/cli.js';
import { readText, spawnDaemon, text, type TestDaemon } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

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
  // The positions in the change stream: the active daemon's last batch committed, and how far the
  // standby has applied it (what a caller waits on to know the standby holds a given write).
  const committed = (await a.client.call('sys.status', {})).committed_seq!;
  t.ok(committed >= 21, `the active daemon committed change ${committed} (at least one per acknowledged write here)`);
  t.ok(committed > sa.committed_seq!, 'its position moves on with its writes');
  await until(
    async () => ((await b.client.call('sys.status', {})).applied_seq ?? 0) >= committed,
    'the standby to apply what the active daemon committed',
  );
  const sb2 = await b.client.call('sys.status', {});
  t.ok(sb2.head_seq! >= sb2.applied_seq!, 'it knows of nothing older than what it applied');
  t.equal(sb2.lag, sb2.head_seq! - sb2.applied_seq!, 'lag is the difference');
  t.equal(sb2.committed_seq, undefined, 'a standby commits nothing');
  t.equal(sa.applied_seq, undefined, 'the active daemon shows what it committed');
  const cli = await runCli({ ...process.env, SERVICE_DATA_DIR: b.dataDir }, ['daemon', 'status']);
  t.match(
    cli.stdout,
    new RegExp(`role: +standby, epoch ${sa.epoch}, lag 0 change\\(s\\)`),
    'mdvfs daemon status shows the role, epoch and lag',
  );
  const shown = /stream: +applied change (\d+) of (\d+)\n/.exec(cli.stdout);
  t.ok(shown !== null && Number(shown[1]) >= committed && Number(shown[2]) >= Number(shown[1]), 'and the positions');
  const cliA = await runCli({ ...process.env, SERVICE_DATA_DIR: a.dataDir }, ['daemon', 'status']);
  const active = new RegExp(`role: +active, epoch ${sa.epoch}, committed change (\\d+)\\n`).exec(cliA.stdout);
  t.ok(active !== null && Number(active[1]) >= committed, 'the active daemon shows what it committed');
});

t.test(
  'a paused leader (SIGSTOP) loses the lease; woken (SIGCONT), it writes nothing and steps down to standby',
  async (t) => {
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
    const late: Promise<unknown> = a.client
      .as({})
      .call('fs.write', { path: '/late.md' }, text('written by a stale leader'));
    await until(async () => (await role(b)) === 'active', 'the standby to take over from the paused leader');
    const sb = await b.client.call('sys.status', {});
    t.ok(sb.epoch! > epochA, 'the new leader has a newer epoch');
    await b.client.as({}).call('fs.write', { path: '/after.md' }, text('after'));
    a.proc.kill('SIGCONT');
    t.not(await outcome(late), 'ok', 'the stale leader acknowledges nothing');
    // It reloads from PostgreSQL and follows the new leader (docs/deploy.md, "PostgreSQL outages").
    await until(async () => (await role(a)) === 'standby', 'it steps down to standby once it wakes');
    t.equal(a.proc.exitCode, null, 'without exiting');
    t.match(a.stderr(), /lost the lease/);
    t.same(await pg.query(db, "SELECT id FROM inodes WHERE name = 'late.md'"), [], 'its write is not in PostgreSQL');
    t.same(
      await pg.query(db, 'SELECT DISTINCT epoch::int AS epoch FROM changes WHERE epoch > $1', [sb.epoch]),
      [],
      'no batch of another epoch after the takeover',
    );
    t.equal(await readText(b.client.as({}), '/before.md'), 'before');
    t.equal(await readText(b.client.as({}), '/after.md'), 'after');
    t.same((await b.client.call('sys.fsck', {})).problems, []);
  },
);

t.test('a batch of a daemon whose epoch was taken over is refused inside its transaction', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const db = new URL(url).pathname.slice(1);
  // The default lease timeout: the heartbeat (every 2.5 s) does not notice first, the batch's own check does.
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const root: Caller = a.client.as({});
  await root.call('fs.write', { path: '/kept.md' }, text('kept'));
  const epochA = (await a.client.call('sys.status', {})).epoch!;
  // Another leader's epoch, while this daemon's connections live on (a partition healed, say).
  await pg.query(db, 'UPDATE lease SET epoch = epoch + 1');
  t.equal(
    await outcome(root.call('fs.write', { path: '/fenced.md' }, text('must not land'))),
    'EAGAIN',
    'the write is refused (503: retry)',
  );
  t.match(a.stderr(), /lost the lease of the PostgreSQL store at .*: its epoch is \d+, the store's \d+/);
  // Nobody holds the lock: the daemon reconnects, takes the lease again with a newer epoch, reloads and writes.
  await until(
    async () => (await a.client.call('sys.status', {})).epoch! > epochA + 1,
    'the daemon to take the lease again',
  );
  await root.call('fs.write', { path: '/again.md' }, text('after the new epoch'));
  t.equal(await readText(root, '/fenced.md').catch((e: Error & { code?: string }) => e.code), 'ENOENT');
  t.same(
    await pg.query(db, "SELECT id FROM inodes WHERE name = 'fenced.md'"),
    [],
    'nothing of the refused batch is in PostgreSQL',
  );
  t.equal((await pg.query(db, "SELECT count(*)::int AS n FROM inodes WHERE name = 'kept.md'"))[0]?.n, 1);
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
  t.equal(
    await readText(b.client.as({}), '/mid.md'),
    'trimmed away',
    'the batch whose change row was trimmed is there',
  );
  t.equal(await readText(b.client.as({}), '/late.md'), 'late');
  t.same((await b.client.call('sys.fsck', {})).problems, []);
});
