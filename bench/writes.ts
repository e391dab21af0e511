/**
 * Group commit: a burst of small acknowledged writes over the socket (all in flight at once) to a
 * daemon with SERVICE_FSYNC=full, against the same count of sequential open + writeFileSync +
 * fsyncSync + close on the same disk (what one fsync per write costs).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { DaemonClient } from '../daemon/rpc/client.js';
import type { BenchOptions, BenchTable } from './types.js';
import { compareRow, diskDir, errorRow, paired, startDaemonProc, timeMs } from './util.js';

const SIZE = 100;

/** `n` acknowledged writes of SIZE bytes into `dir`, all in flight at once over one socket; resolves with the ms taken. */
export async function burst(client: DaemonClient, dir: string, n: number): Promise<number> {
  await client.call('fs.mkdir', { path: dir, parents: true });
  const data = Buffer.alloc(SIZE, 'x');
  return timeMs(() =>
    Promise.all(Array.from({ length: n }, (_, i) => client.call('fs.write', { path: `${dir}/f${i}.md` }, { data }))),
  );
}

function sequentialFsync(dir: string, n: number): Promise<number> {
  mkdirSync(dir, { recursive: true });
  const data = Buffer.alloc(SIZE, 'x');
  return timeMs(() => {
    for (let i = 0; i < n; i++) {
      const fd = openSync(path.join(dir, `f${i}.md`), 'w');
      writeFileSync(fd, data);
      fsyncSync(fd);
      closeSync(fd);
    }
  });
}

export async function benchWrites(opts: BenchOptions): Promise<BenchTable> {
  const title = 'Group commit: small acknowledged writes (SERVICE_FSYNC=full, disk)';
  // One fsync costs milliseconds on this disk, so --quick measures the baseline on fewer writes (its
  // cost per write does not depend on the count); the rates are compared.
  const n = 10000;
  const nBase = opts.quick ? 200 : n;
  try {
    const root = diskDir('mdvfs-bench-writes-');
    const d = await startDaemonProc(path.join(root, 'data'), { SERVICE_FSYNC: 'full' });
    const plain = path.join(root, 'plain');
    let rep = 0;
    try {
      await burst(d.client, '/bench/warm', 1000);
      await sequentialFsync(path.join(plain, 'warm'), 100);
      const r = await paired({
        warmup: 0,
        reps: 5,
        ours: async () => (n / (await burst(d.client, `/bench/r${rep++}`, n))) * 1000,
        baseline: async () => (nBase / (await sequentialFsync(path.join(plain, `r${rep++}`), nBase))) * 1000,
      });
      return {
        title,
        rows: [
          compareRow({
            name: `${n.toLocaleString('en')} pipelined socket writes vs ${nBase.toLocaleString('en')} × (write + fsync)`,
            unit: 'writes/s',
            better: 'higher',
            ours: r.ours,
            baseline: r.baseline,
            target: 10,
            note: `${SIZE}-byte files; ours = burst of ${n} acknowledged fs.write over one socket; baseline = sequential node:fs open/writeFileSync/fsyncSync/close on the same ext4 disk`,
          }),
          {
            name: `${n.toLocaleString('en')}-write burst, wall time`,
            ours: Math.round((n / r.ours) * 1000),
            baseline: Math.round((n / r.baseline) * 1000),
            unit: 'ms',
            ratio: null,
            target: '—',
            met: null,
            note: opts.quick ? 'baseline time extrapolated from its rate' : 'medians',
          },
        ],
      };
    } finally {
      await d.stop();
    }
  } catch (err) {
    return { title, rows: [errorRow('pipelined writes vs write+fsync', err)] };
  }
}
