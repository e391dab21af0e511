/**
 * kill -9 recovery: with N files in the store (100,000; 10,000 with --quick) and a pipelined write
 * burst in flight, SIGKILL the daemon and time from the signal to the restarted daemon answering
 * `sys.health`; then check that every acknowledged write of the burst is there. Paired with a clean
 * restart (SIGTERM, which flushes) of the same store, so the ratio shows what a crash costs on top.
 */
import type { BenchOptions, BenchTable } from './types.js';
import {
  buildStore,
  compareRow,
  errorRow,
  killProc,
  log,
  nowMs,
  paired,
  sleep,
  startDaemonProc,
  startWriters,
  type DaemonProc,
} from './util.js';

/** A daemon started again on an existing store, answering. */
const restart = (dataDir: string): Promise<DaemonProc> => startDaemonProc(dataDir);

export async function benchRecovery(opts: BenchOptions): Promise<BenchTable> {
  const n = opts.quick ? 10000 : 100000;
  const title = `Recovery after kill -9 (${n.toLocaleString('en')} files, write burst in flight)`;
  try {
    log(`recovery: building a store of ${n} files`);
    const dataDir = await buildStore(n);
    let d = await restart(dataDir);
    let round = 0;
    let checked = 0;
    let missing = 0;
    const r = await paired({
      warmup: 1,
      reps: 5,
      ours: async () => {
        const burst = startWriters(d.client, `/crash/r${round++}`, 64);
        await sleep(150);
        const t0 = nowMs();
        await killProc(d.proc, 'SIGKILL');
        d.client.close();
        await burst.done;
        d = await restart(dataDir);
        const ms = nowMs() - t0;
        // Every acknowledged write must have survived (the crash test proves this; here it keeps us honest).
        const results = await Promise.allSettled(burst.acked.map((p) => d.client.call('fs.stat', { path: p })));
        checked += results.length;
        missing += results.filter((x) => x.status === 'rejected').length;
        return ms;
      },
      baseline: async () => {
        const t0 = nowMs();
        await d.stop('SIGTERM');
        d = await restart(dataDir);
        return nowMs() - t0;
      },
    });
    await d.stop('SIGTERM');
    return {
      title,
      rows: [
        compareRow({
          name: `SIGKILL → answering vs SIGTERM → answering`,
          unit: 'ms',
          better: 'lower',
          ours: r.ours,
          baseline: r.baseline,
          target: 0.5,
          targetText: '≥ 0.5 (harness target: a crash costs at most 2× a clean restart)',
          note: `${checked} acknowledged writes checked after the kills, ${missing} missing`,
        }),
      ],
    };
  } catch (err) {
    return { title, rows: [errorRow('kill -9 recovery', err)] };
  }
}
