/**
 * Shared helpers for the benchmark modules: statistics, paired repetitions, temp dirs on tmpfs,
 * free ports, and real daemon / `mdvfs serve` processes (spawned from the built `dist/`).
 *
 *   const p = await paired({ warmup: 1, reps: 5, ours: () => timeMs(runOurs), baseline: () => timeMs(runBase) });
 *   return { title, rows: [compareRow({ name: 'x', unit: 'ms', better: 'lower', ...p, target: 10 })] };
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectSocket, type DaemonClient } from '../daemon/rpc/client.js';
import { socketPathFor } from '../daemon/rpc/connect.js';
import type { BenchRow } from './types.js';
import { DAEMON_V8_FLAGS } from '../daemon/node-flags.js';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CLI = path.join(ROOT_DIR, 'dist', 'cli', 'main.js');

// ---------- statistics ----------

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[rank]!;
}

export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Milliseconds taken by `fn`. */
export async function timeMs(fn: () => unknown): Promise<number> {
  const t0 = nowMs();
  await fn();
  return nowMs() - t0;
}

export interface PairedResult {
  ours: number; // median
  baseline: number; // median
  oursAll: number[];
  baselineAll: number[];
}

/**
 * Warm-up, then `reps` paired repetitions that alternate which side goes first (so drift in machine
 * load hits both sides alike). Each function returns one measurement (time, rate...).
 */
export async function paired(opts: {
  warmup?: number;
  reps?: number;
  ours: () => Promise<number>;
  baseline: () => Promise<number>;
}): Promise<PairedResult> {
  const warmup = opts.warmup ?? 1;
  const reps = Math.max(5, opts.reps ?? 5);
  for (let i = 0; i < warmup; i++) {
    await opts.ours();
    await opts.baseline();
  }
  const oursAll: number[] = [];
  const baselineAll: number[] = [];
  for (let i = 0; i < reps; i++) {
    if (i % 2 === 0) {
      oursAll.push(await opts.ours());
      baselineAll.push(await opts.baseline());
    } else {
      baselineAll.push(await opts.baseline());
      oursAll.push(await opts.ours());
    }
  }
  return { ours: median(oursAll), baseline: median(baselineAll), oursAll, baselineAll };
}

// ---------- rows ----------

/** The first number of a target text such as `≥ 10` or `≥ 0.7` (NaN when there is none). */
export function targetValue(target: string): number {
  const m = /(\d+(?:\.\d+)?)/.exec(target);
  return m ? Number(m[1]) : NaN;
}

export function round(x: number | null, digits = 3): number | null {
  if (x === null || !Number.isFinite(x)) return null;
  const f = 10 ** Math.max(0, digits - Math.max(0, Math.floor(Math.log10(Math.abs(x) || 1)) + 1));
  return Math.round(x * f) / f;
}

/**
 * A row comparing two medians. `better: 'lower'` for times (ratio = baseline / ours, a speed-up),
 * `'higher'` for rates (ratio = ours / baseline). `target` is the threshold for that ratio.
 */
export function compareRow(o: {
  name: string;
  unit: string;
  better: 'lower' | 'higher';
  ours: number;
  baseline: number;
  target?: number;
  targetText?: string;
  note?: string;
}): BenchRow {
  const ratio = o.better === 'lower' ? o.baseline / o.ours : o.ours / o.baseline;
  const target = o.target === undefined ? (o.targetText ?? '—') : (o.targetText ?? `≥ ${o.target}`);
  const met = o.target === undefined || !Number.isFinite(ratio) ? null : ratio >= o.target;
  const row: BenchRow = {
    name: o.name,
    ours: round(o.ours, 4),
    baseline: round(o.baseline, 4),
    unit: o.unit,
    ratio: round(ratio, 3),
    target,
    met,
  };
  if (o.note !== undefined) row.note = o.note;
  return row;
}

/** A row for a comparison that could not run: it stays in the report with the reason. */
export function errorRow(name: string, err: unknown): BenchRow {
  const msg = err instanceof Error ? err.message : String(err);
  return {
    name,
    ours: null,
    baseline: null,
    unit: '',
    ratio: null,
    target: '—',
    met: null,
    note: `error: ${msg.split('\n')[0]!.slice(0, 300)}`,
  };
}

// ---------- temp dirs, cleanup ----------

const cleanups: (() => void | Promise<void>)[] = [];

/** Registers work to undo at the end of the module (dirs, processes), in reverse order. */
export function onCleanup(fn: () => void | Promise<void>): void {
  cleanups.push(fn);
}

export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    try {
      await fn();
    } catch {
      // best effort: a cleanup failure must not hide the results
    }
  }
}

/**
 * A fresh temp dir on tmpfs (/dev/shm) when present, removed at cleanup. It is returned as a symlink
 * under os.tmpdir(): clients refuse data dirs whose path is under /dev (connectDaemon's guard against
 * pseudo filesystems), and /dev/shm is the machine's tmpfs.
 */
export function shmDir(prefix = 'mdvfs-bench-'): string {
  if (!existsSync('/dev/shm')) return tempDirIn(os.tmpdir(), prefix);
  const real = tempDirIn('/dev/shm', prefix);
  const link = path.join(os.tmpdir(), path.basename(real));
  symlinkSync(real, link);
  onCleanup(() => rmSync(link, { force: true }));
  return link;
}

/** A fresh temp dir on the disk under os.tmpdir() (for fsync measurements), removed at cleanup. */
export function diskDir(prefix = 'mdvfs-bench-'): string {
  return tempDirIn(os.tmpdir(), prefix);
}

function tempDirIn(base: string, prefix: string): string {
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(path.join(base, prefix));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------- ports, processes ----------

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function exited(p: ChildProcess): boolean {
  return p.exitCode !== null || p.signalCode !== null;
}

/** Sends `signal` to one process we started and waits for it to exit (SIGKILL after `graceMs`). */
export function killProc(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10000): Promise<void> {
  if (exited(p)) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      if (!exited(p)) p.kill('SIGKILL');
    }, graceMs);
    p.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    p.kill(signal);
  });
}

/**
 * Extra node flags for the daemons and servers the benchmarks start, from MDVFS_BENCH_NODE_ARGS
 * (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`; node refuses --cpu-prof in NODE_OPTIONS).
 */
export function benchNodeArgs(): string[] {
  return (process.env.MDVFS_BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
}

/** Resident memory of a live process in KiB (VmRSS from /proc/<pid>/status). */
export function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

export interface DaemonProc {
  dataDir: string;
  proc: ChildProcess;
  client: DaemonClient;
  stderr(): string;
  /** SIGTERM (clean) or SIGKILL; closes the client first. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Spawns `node dist/cli/main.js daemon` for `dataDir` (no wait); `cli`: another build's main.js. */
export function spawnDaemonProc(
  dataDir: string,
  env: NodeJS.ProcessEnv = {},
  cli = CLI,
): { proc: ChildProcess; stderr: () => string } {
  let err = '';
  const proc = spawn(process.execPath, [...DAEMON_V8_FLAGS, ...benchNodeArgs(), cli, 'daemon'], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  proc.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
    if (err.length > 20000) err = err.slice(-10000);
  });
  // SIGTERM first: a daemon run with --cpu-prof writes its profile only on a clean exit.
  onCleanup(() => killProc(proc, 'SIGTERM', 3000));
  return { proc, stderr: () => err };
}

/** Polls the data dir's socket until it answers `sys.health`; returns the connected client. */
export async function waitHealthy(
  dataDir: string,
  proc: ChildProcess,
  stderr: () => string,
  timeoutMs = 120000,
  pollMs = 5,
): Promise<DaemonClient> {
  const sock = socketPathFor(dataDir);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const c = await connectSocket(sock);
      try {
        await c.call('sys.health', {});
        return c;
      } catch (err) {
        c.close();
        throw err;
      }
    } catch {
      if (exited(proc)) throw new Error(`daemon exited (${proc.exitCode ?? proc.signalCode}): ${stderr().slice(-500)}`);
      if (Date.now() > deadline)
        throw new Error(`daemon did not answer within ${timeoutMs} ms: ${stderr().slice(-500)}`);
      await sleep(pollMs);
    }
  }
}

/** Starts a daemon and waits until it answers. */
export async function startDaemonProc(
  dataDir: string,
  env: NodeJS.ProcessEnv = {},
  startTimeoutMs?: number,
  cli = CLI,
): Promise<DaemonProc> {
  const { proc, stderr } = spawnDaemonProc(dataDir, env, cli);
  const client = await waitHealthy(dataDir, proc, stderr, startTimeoutMs);
  return {
    dataDir,
    proc,
    client,
    stderr,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      client.close();
      await killProc(proc, signal);
    },
  };
}

/**
 * Writes `count` files of `size` bytes through the daemon, pipelined `window` at a time, as
 * `<root>/d<k>/f<i>.md` with 1,000 files per directory. Contents differ per file (no dedup).
 */
export async function populate(
  client: DaemonClient,
  root: string,
  count: number,
  size = 1024,
  window = 256,
  start = 0,
): Promise<void> {
  const base = Buffer.alloc(size, 'abcdefghijklmnopqrstuvwxyz\n'.repeat(Math.ceil(size / 27)));
  const make = (i: number): Buffer => {
    const b = Buffer.from(base);
    b.write(`# file ${i}\n`, 0);
    return b;
  };
  let next = start;
  const end = start + count;
  const worker = async (): Promise<void> => {
    while (next < end) {
      const i = next++;
      await client.call('fs.write', { path: filePath(root, i), parents: true }, { data: make(i) });
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, count) }, worker));
}

/** The path `populate` gives file number `i`. */
export function filePath(root: string, i: number): string {
  return `${root}/d${String(Math.floor(i / 1000)).padStart(3, '0')}/f${String(i).padStart(6, '0')}.md`;
}

// ---------- REST server (mdvfs serve) ----------

export interface ServeProc {
  dataDir: string;
  port: number;
  proc: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** GET /health on 127.0.0.1:port; resolves with the status code (0 on a connection error). */
export function httpStatus(port: number, p = '/health'): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.setTimeout(5000, () => req.destroy());
  });
}

/** Starts `node dist/cli/main.js serve` on a free port and waits for GET /health. */
export async function startServe(dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<ServeProc> {
  const port = await freePort();
  let err = '';
  const proc = spawn(process.execPath, [...benchNodeArgs(), CLI, 'serve'], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_LISTEN: `127.0.0.1:${port}`, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  proc.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
    if (err.length > 20000) err = err.slice(-10000);
  });
  onCleanup(() => killProc(proc, 'SIGTERM', 5000));
  const deadline = Date.now() + 60000;
  while ((await httpStatus(port)) !== 200) {
    if (exited(proc)) throw new Error(`mdvfs serve exited (${proc.exitCode ?? proc.signalCode}): ${err.slice(-500)}`);
    if (Date.now() > deadline) throw new Error(`mdvfs serve did not answer /health: ${err.slice(-500)}`);
    await sleep(50);
  }
  return { dataDir, port, proc, stderr: () => err, stop: () => killProc(proc, 'SIGTERM', 10000) };
}

/**
 * A data dir on tmpfs holding `count` files of 1 KiB under /bench (built through a daemon with
 * SERVICE_FSYNC=off, which changes only how fast the build goes, not what is stored). The daemon is
 * stopped cleanly before returning.
 */
export async function buildStore(count: number, size = 1024): Promise<string> {
  const dataDir = path.join(shmDir('mdvfs-bench-store-'), 'data');
  // The harness shares built stores between its module processes (MDVFS_BENCH_CACHE, on tmpfs).
  const cacheRoot = process.env.MDVFS_BENCH_CACHE;
  const cached = cacheRoot === undefined ? undefined : path.join(cacheRoot, `store-${count}-${size}`);
  if (cached !== undefined && existsSync(path.join(cached, '.complete'))) {
    cpSync(cached, dataDir, { recursive: true });
    rmSync(path.join(dataDir, '.complete'), { force: true });
    return dataDir;
  }
  const d = await startDaemonProc(dataDir, { SERVICE_FSYNC: 'off' });
  try {
    await populate(d.client, '/bench', count, size);
  } finally {
    await d.stop('SIGTERM');
  }
  if (cached !== undefined) {
    rmSync(cached, { recursive: true, force: true });
    cpSync(dataDir, cached, { recursive: true });
    writeFileSync(path.join(cached, '.complete'), '');
  }
  return dataDir;
}

/** Progress lines on stderr (the harness's stdout stays clean). */
export function log(msg: string): void {
  process.stderr.write(`  ${msg}\n`);
}

/**
 * `writers` clients writing 200-byte files under `dir` over one connection until it drops (the
 * daemon is gone); `acked` lists the paths whose writes were acknowledged.
 */
export function startWriters(
  client: DaemonClient,
  dir: string,
  writers: number,
): { acked: string[]; done: Promise<void> } {
  const acked: string[] = [];
  const data = Buffer.alloc(200, 'y');
  let i = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const p = `${dir}/f${i++}.md`;
      try {
        await client.call('fs.write', { path: p, parents: true }, { data });
      } catch {
        return; // the daemon is gone
      }
      acked.push(p);
    }
  };
  return { acked, done: Promise.all(Array.from({ length: writers }, worker)).then(() => undefined) };
}
