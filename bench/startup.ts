/**
 * Cold start and resident memory: a data dir of N files of 1 KiB (100,000; 10,000 with --quick), built
 * by writing through the daemon. Each repetition starts a fresh daemon process and times spawn →
 * first `sys.health` answer, then reads its VmRSS. The baseline is a fresh Node process that loads the
 * same files from a plain tmpfs directory into a Map (readdir + readFileSync), timed spawn → "ready".
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import {
  buildStore,
  compareRow,
  errorRow,
  exited,
  filePath,
  killProc,
  log,
  median,
  nowMs,
  onCleanup,
  paired,
  round,
  rssKiB,
  shmDir,
  spawnDaemonProc,
  startDaemonProc,
  waitHealthy,
} from './util.js';

const LOADER = `
const fs = require('node:fs'); const path = require('node:path');
const files = new Map();
const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) {
  const p = path.join(d, e.name); if (e.isDirectory()) walk(p); else files.set(p, fs.readFileSync(p)); } };
walk(process.argv[1]);
process.stdout.write('ready ' + files.size + '\\n');
setInterval(() => {}, 1 << 30);
`;

/** Starts the plain loader on `dir`; resolves at its "ready" line with the time and its RSS. */
async function plainLoad(dir: string): Promise<{ ms: number; rssKiB: number }> {
  const t0 = nowMs();
  const p = spawn(process.execPath, ['-e', LOADER, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(() => killProc(p, 'SIGKILL', 500));
  try {
    const ms = await new Promise<number>((resolve, reject) => {
      let out = '';
      p.stdout!.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('\n')) resolve(nowMs() - t0);
      });
      p.once('exit', (c) => reject(new Error(`loader exited ${c}`)));
    });
    return { ms, rssKiB: rssKiB(p.pid!) };
  } finally {
    await killProc(p, 'SIGKILL', 500);
  }
}

/** Spawns a daemon on `dataDir`; resolves when it answers sys.health, with the time and its RSS. */
async function daemonLoad(dataDir: string): Promise<{ ms: number; rssKiB: number }> {
  const t0 = nowMs();
  const { proc, stderr } = spawnDaemonProc(dataDir);
  const client = await waitHealthy(dataDir, proc, stderr);
  const ms = nowMs() - t0;
  const rss = rssKiB(proc.pid!);
  client.close();
  if (!exited(proc)) await killProc(proc, 'SIGTERM');
  return { ms, rssKiB: rss };
}

export async function benchStartup(opts: BenchOptions): Promise<BenchTable> {
  const n = opts.quick ? 10000 : 100000;
  const title = `Cold start and resident memory: ${n.toLocaleString('en')} files of 1 KiB`;
  try {
    log(`startup: building a store of ${n} files through the daemon`);
    const dataDir = await buildStore(n);
    const emptyDir = path.join(shmDir('mdvfs-bench-empty-'), 'data');
    await (await startDaemonProc(emptyDir)).stop('SIGTERM');
    // The same files, as a plain directory tree on tmpfs.
    const plain = shmDir('mdvfs-bench-plain-');
    const plainEmpty = shmDir('mdvfs-bench-plain-empty-');
    const base = Buffer.alloc(1024, 'abcdefghijklmnopqrstuvwxyz\n'.repeat(40));
    for (let i = 0; i < n; i++) {
      const f = path.join(plain, filePath('', i));
      if (i % 1000 === 0) mkdirSync(path.dirname(f), { recursive: true });
      const b = Buffer.from(base);
      b.write(`# file ${i}\n`, 0);
      writeFileSync(f, b);
    }
    const empty = { ours: [] as number[], base: [] as number[], oursMs: [] as number[], baseMs: [] as number[] };
    // Paired like every other row: 5 repetitions alternating which side goes first.
    for (let i = 0; i < 5; i++) {
      const first = i % 2 === 0;
      const b0 = first ? undefined : await plainLoad(plainEmpty);
      const o = await daemonLoad(emptyDir);
      const b = b0 ?? (await plainLoad(plainEmpty));
      empty.ours.push(o.rssKiB);
      empty.oursMs.push(o.ms);
      empty.base.push(b.rssKiB);
      empty.baseMs.push(b.ms);
    }
    const rss = { ours: [] as number[], base: [] as number[] };
    log('startup: paired cold starts');
    const r = await paired({
      warmup: 1,
      reps: 5,
      ours: async () => {
        const x = await daemonLoad(dataDir);
        rss.ours.push(x.rssKiB);
        return x.ms;
      },
      baseline: async () => {
        const x = await plainLoad(plain);
        rss.base.push(x.rssKiB);
        return x.ms;
      },
    });
    // Warm-up measurements are in rss too; the medians of the last 5 are what the table shows.
    const rssOurs = median(rss.ours.slice(-5)) / 1024;
    const rssBase = median(rss.base.slice(-5)) / 1024;
    const perTenK = (mib: number, emptyMiB: number): number => ((mib - emptyMiB) / n) * 10000;
    const mbOurs = perTenK(rssOurs, median(empty.ours) / 1024);
    const mbBase = perTenK(rssBase, median(empty.base) / 1024);
    const rows: BenchRow[] = [
      compareRow({
        name: `cold start to first answer, ${n.toLocaleString('en')} files`,
        unit: 'ms',
        better: 'lower',
        ours: r.ours,
        baseline: r.baseline,
        note: 'baseline: fresh node process reading the same files from tmpfs into a Map',
      }),
      compareRow({
        name: 'cold start, empty store (process start-up alone)',
        unit: 'ms',
        better: 'lower',
        ours: median(empty.oursMs),
        baseline: median(empty.baseMs),
        note: 'median of 5 paired reps; the fixed part of the cold start',
      }),
      {
        name: 'seconds per 100k files (cold start)',
        ours: round((r.ours / 1000) * (100000 / n)),
        baseline: round((r.baseline / 1000) * (100000 / n)),
        unit: 's',
        ratio: null,
        target: '—',
        met: null,
        note: n === 100000 ? 'measured at 100k' : `extrapolated linearly from ${n.toLocaleString('en')}`,
      },
      compareRow({
        name: 'resident memory per 10k files (VmRSS above an empty process)',
        unit: 'MiB',
        better: 'lower',
        ours: mbOurs,
        baseline: mbBase,
        note: `content alone is ${((10000 * 1024) / 2 ** 20).toFixed(1)} MiB per 10k files`,
      }),
      {
        name: `resident memory after load, ${n.toLocaleString('en')} files`,
        ours: round(rssOurs),
        baseline: round(rssBase),
        unit: 'MiB',
        ratio: null,
        target: '—',
        met: null,
        note: `empty: daemon ${(median(empty.ours) / 1024).toFixed(0)} MiB, node ${(median(empty.base) / 1024).toFixed(0)} MiB`,
      },
    ];
    return { title, rows };
  } catch (err) {
    return { title, rows: [errorRow('cold start', err)] };
  }
}
