/**
 * HTTP workers (issue 16): REST GET and PUT of a 4 KiB file at concurrency 32 against `mdvfs serve`
 * with SERVICE_HTTP_WORKERS=1 and =2 (same data dir layout, durable writes, data dir on disk), the
 * two servers run in turn. Reports the scaling ratio (2 workers' req/s over 1 worker's) and the
 * daemon's CPU time per request, which says how far the one daemon is from being the bottleneck.
 *
 * Not pinned: two workers need both cores of a 2-core machine, where autocannon (this process)
 * competes with them, so on such a machine the ratio is a floor; on more cores it is the real one.
 */
import { readFileSync } from 'node:fs';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import { compareRow, diskDir, errorRow, log, median, sleep, startServe } from './util.js';
import { BODY, cpuSeconds, load, processTree, put, type Measure, type Side } from './http-rest.js';

export type { BenchTable } from './types.js';

/** The daemon among a serve's processes (its command line ends in ` daemon`). */
function daemonPid(pids: number[]): number {
  for (const pid of pids) {
    try {
      if (/ daemon$/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim())) return pid;
    } catch {
      // gone
    }
  }
  throw new Error('no daemon process under mdvfs serve');
}

interface Run extends Measure {
  daemonUs: number;
}

async function measure(side: Side, daemon: number, op: 'GET' | 'PUT', duration: number): Promise<Run> {
  const d0 = cpuSeconds([daemon]);
  const m = await load(side, op, 32, duration);
  const d = cpuSeconds([daemon]) - d0;
  return { ...m, daemonUs: m.total > 0 ? (d / m.total) * 1e6 : NaN };
}

export async function benchWorkers(opts: BenchOptions): Promise<BenchTable> {
  const title = 'HTTP workers: REST 4 KiB at c=32, 2 workers vs 1';
  const duration = opts.quick ? 1 : 4;
  const reps = opts.quick ? 1 : 5;
  const rows: BenchRow[] = [];
  const sides = new Map<number, Side & { daemon: number }>();
  try {
    for (const workers of [1, 2]) {
      const serve = await startServe(diskDir(`mdvfs-bench-workers-${workers}-`), {
        SERVICE_HTTP_WORKERS: String(workers),
      });
      const s = await put(serve.port, '/fs/bench/get.md', BODY);
      if (s !== 200) throw new Error(`seeding ${workers} worker(s): HTTP ${s}`);
      const pids = processTree(serve.proc.pid!);
      sides.set(workers, { port: serve.port, pids, daemon: daemonPid(pids) });
    }
  } catch (err) {
    return { title, rows: [errorRow(title, err)] };
  }
  for (const op of ['GET', 'PUT'] as const) {
    const name = `${op} 4 KiB, c=32: 2 HTTP workers vs 1`;
    try {
      const got = new Map<number, Run[]>();
      for (const side of sides.values()) await load(side, op, 32, opts.quick ? 0.5 : 1); // warm-up
      for (let r = 0; r < reps; r++) {
        const order = [...sides.entries()];
        if (r % 2 === 1) order.reverse();
        for (const [workers, side] of order) {
          got.set(workers, [...(got.get(workers) ?? []), await measure(side, side.daemon, op, duration)]);
          await sleep(opts.quick ? 50 : 200);
        }
      }
      const med = (w: number) => {
        const ms = got.get(w)!;
        return {
          rps: median(ms.map((m) => m.rps)),
          cpuUs: median(ms.map((m) => m.cpuUs)),
          daemonUs: median(ms.map((m) => m.daemonUs)),
        };
      };
      const one = med(1);
      const two = med(2);
      log(
        `${name}: 1 worker ${one.rps.toFixed(0)} req/s (daemon ${one.daemonUs.toFixed(0)} µs CPU/req), 2 workers ${two.rps.toFixed(0)} req/s (daemon ${two.daemonUs.toFixed(0)} µs CPU/req)`,
      );
      rows.push(
        compareRow({
          name,
          unit: 'req/s',
          better: 'higher',
          ours: two.rps,
          baseline: one.rps,
          note: `daemon CPU per request: ${one.daemonUs.toFixed(0)} µs (1 worker), ${two.daemonUs.toFixed(0)} µs (2 workers); all server processes: ${one.cpuUs.toFixed(0)} / ${two.cpuUs.toFixed(0)} µs; ${reps} × ${duration} s each, not pinned (autocannon shares the cores)`,
        }),
      );
    } catch (err) {
      rows.push(errorRow(name, err));
    }
  }
  return { title, rows };
}
