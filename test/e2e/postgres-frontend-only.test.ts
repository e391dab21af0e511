/**
 * A front-end-only machine (issue 31, item 4): `mdvfs serve` with SERVICE_DAEMONS and no
 * SERVICE_STORE runs just the HTTP workers against two daemons on one PostgreSQL database. Across
 * kill -9 failovers, alternating which daemon dies, the port never refuses a connection, its one
 * worker stays the same process (it reconnects in place), every answer is 200 or 503 EAGAIN with
 * Retry-After, writes succeed again after the takeover, and every acknowledged write is there with
 * its exact content.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { readText, spawnDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { request, servePids, startService, type Res } from '../helpers/http.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // the test awaits it and fails with the reason

const ROUNDS = 4;
const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;

t.test('a front end of SERVICE_DAEMONS keeps its port and its worker across failovers', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  let active = await spawnDaemon(t, { SERVICE_STORE: url });
  let standby = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal(await role(standby), 'standby');
  const dataDir = path.join(tempDir(), 'none');
  const svc = await startService(t, {
    dataDir,
    env: {
      // No store of its own: a front end only (no daemon is started here).
      SERVICE_STORE: '',
      SERVICE_DAEMONS: `${socketPathFor(standby.dataDir)},${socketPathFor(active.dataDir)}`,
      SERVICE_HTTP_WORKERS: '1',
      MDVFS_TEST_WORKER_HEADER: '1',
    },
  });
  t.match(svc.stderr(), /front end of SERVICE_DAEMONS/);
  t.equal(servePids(svc.proc.pid!).daemon, undefined, 'no daemon on the front-end machine');
  t.notOk(existsSync(dataDir), 'no data dir was made for it');

  const acked = new Map<string, string>();
  const workers = new Set<string>();
  /** Answers other than 200 and 503 EAGAIN with Retry-After, and transport errors (refused, reset). */
  const bad: string[] = [];
  let unavailable = 0;
  const put = async (p: string, body: string): Promise<boolean> => {
    let r: Res;
    try {
      r = await request(svc, 'PUT', `/fs/${p}`, { body });
    } catch (err) {
      bad.push(`PUT ${p}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      return false;
    }
    if (typeof r.headers['x-mdvfs-worker'] === 'string') workers.add(r.headers['x-mdvfs-worker']);
    if (r.status === 200) {
      acked.set(p, body);
      return true;
    }
    if (r.status === 503 && r.json?.code === 'EAGAIN' && r.headers['retry-after'] !== undefined) unavailable++;
    else bad.push(`PUT ${p}: ${r.status} ${r.text}`);
    return false;
  };

  for (let round = 0; round < ROUNDS; round++) {
    t.equal(await role(active), 'active', `round ${round}: one daemon is active`);
    let stop = false;
    let n = 0;
    let afterKill = 0;
    let killed = false;
    const writer = async (w: number): Promise<void> => {
      while (!stop) {
        const p = `r${round}/w${w}-${n++}.md`;
        const ok = await put(p, `round ${round} writer ${w} ${p} ${'x'.repeat(n % 200)}`);
        if (ok && killed) afterKill++;
      }
    };
    const writers = Array.from({ length: 4 }, (_, w) => writer(w));
    await until(() => acked.size >= 20 * (round + 1), `round ${round}: some acknowledged writes`, 60000);
    await active.kill('SIGKILL');
    killed = true;
    await until(() => afterKill >= 20, `round ${round}: writes through the front end after the takeover`, 60000);
    stop = true;
    await Promise.all(writers);
    t.equal(await role(standby), 'active', `round ${round}: the standby took over`);
    const all = [...acked];
    const wrong: string[] = [];
    for (let i = 0; i < all.length; i += 64)
      await Promise.all(
        all.slice(i, i + 64).map(async ([p, body]) => {
          if ((await readText(standby.client.as({}), `/${p}`).catch(() => undefined)) !== body) wrong.push(p);
        }),
      );
    t.same(wrong, [], `round ${round}: all ${acked.size} acknowledged writes are there, with their content`);
    // The killed daemon comes back as the standby of the next round: the other one dies next.
    await active.restart();
    await until(async () => (await role(active)) === 'standby', `round ${round}: the killed daemon to follow`);
    [active, standby] = [standby, active];
  }
  t.same(bad, [], 'no refused connection, no reset, no answer but 200 or 503 EAGAIN + Retry-After');
  t.equal(workers.size, 1, 'one worker process answered throughout (it was never restarted)');
  t.notMatch(svc.stderr(), /sidecar exited/, 'serve never had to restart its worker');
  t.ok(acked.size > 100, `${acked.size} acknowledged writes checked (${unavailable} answered 503 meanwhile)`);
});
