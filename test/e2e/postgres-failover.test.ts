/**
 * Several daemons on one PostgreSQL database (docs/deploy.md): kill -9 of the active daemon during a
 * burst of acknowledged writes, 10 rounds: a standby takes over within 5 s with every acknowledged
 * write and fsck clean. Fencing and the standby's stream: postgres-fencing.test.ts; front ends that
 * follow the active daemon: postgres-frontends.test.ts.
 */
import t from 'tap';
import { readText, spawnDaemon, text, type TestDaemon } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;

t.test(
  'kill -9 of the active daemon during a burst: a standby serves every acknowledged write, 10 rounds',
  async (t) => {
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
    t.ok(
      times[times.length - 1]! < 5000,
      `the standby served within 5 s every time (median ${times[5]} ms, worst ${times[times.length - 1]} ms)`,
    );
    t.ok(acked.size > 400, `${acked.size} acknowledged writes checked`);
  },
);
