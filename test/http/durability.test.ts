// SIGKILL of every process of the service (serve, daemon, sidecar) during a burst of concurrent
// writes loses no acknowledged write.
import t from 'tap';
import { alive, client, servePids, startService, tempDataDir, until } from '../helpers/http.js';

t.test('SIGKILL of the whole service during a write burst loses no acknowledged write', async (t) => {
  const dataDir = tempDataDir(t);
  const svc = await startService(t, { dataDir });
  const root = client(svc);
  const acked = new Map<string, string>();
  let stop = false;
  let n = 0;
  const writer = async (w: number) => {
    while (!stop) {
      const i = n++;
      const path = `/burst/w${w}/f${i}.md`;
      const body = `write ${i} by ${w}\n`.repeat(1 + (i % 7));
      try {
        const r = await root.put(`/fs/${path}`, body);
        if (r.status === 200) acked.set(path, body);
      } catch {
        // the connection died with the service: not acknowledged
      }
    }
  };
  const writers = Array.from({ length: 16 }, (_, w) => writer(w));
  await until(() => acked.size >= 200, 'some acknowledged writes', 60000);
  const pids = servePids(svc.proc.pid!);
  for (const pid of [pids.daemon!, pids.http!, svc.proc.pid!]) process.kill(pid, 'SIGKILL');
  stop = true;
  await Promise.all(writers);
  await svc.exited;
  await until(() => !alive(pids.daemon!) && !alive(pids.http!), 'every process to die');
  const ackedCount = acked.size;

  const svc2 = await startService(t, { dataDir });
  const root2 = client(svc2);
  let lost = 0;
  for (const [path, body] of acked) {
    const r = await root2.get(`/fs/${path}`);
    if (r.status !== 200 || r.text !== body) lost++;
  }
  t.equal(lost, 0, `all ${ackedCount} acknowledged writes survived kill -9`);
});
