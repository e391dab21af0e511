/**
 * REST throughput: GET and PUT of a 4 KiB file at concurrency 1 and 32 (autocannon, keep-alive),
 * against `mdvfs serve` (durable writes, data dir on disk), a bare express 5 app answering the same
 * 4 KiB from memory (our framework floor), and a bare `node:http` server doing the same (what this
 * machine can do at all). The three run in turn, in separate processes, within the same run.
 * Targets (ratio of our req/s to bare express): GET ≥ 0.7, durable PUT ≥ 0.4. p99 latencies in notes.
 *
 * Placement (issue #8: client and server each on one core): on a machine with at least 2 CPUs the
 * load generator (this process, all its threads) is pinned to CPU 0 and every server process to
 * CPU 1 with taskset: for mdvfs the supervisor, the daemon and the HTTP sidecar together, for each
 * baseline its one process. Each row also reports the server side's CPU time per request (all its
 * processes, from /proc), which a loaded machine disturbs much less than requests/s.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import http from 'node:http';
import os from 'node:os';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import {
  ROOT_DIR,
  compareRow,
  diskDir,
  errorRow,
  freePort,
  killProc,
  log,
  median,
  onCleanup,
  sleep,
  startServe,
} from './util.js';

export type { BenchTable } from './types.js';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
interface AutocannonRequest {
  method?: string;
  path?: string;
  body?: Buffer | string;
  headers?: Record<string, string>;
  setupRequest?: (req: AutocannonRequest) => AutocannonRequest;
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  pipelining?: number;
  requests?: AutocannonRequest[];
}) => Promise<AutocannonResult>;

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as Autocannon;

const SIZE = 4096;
export const BODY = Buffer.alloc(SIZE, 'x');
BODY.write('# bench\n');

/** The baselines: the same two routes as our /fs/bench/*.md, from memory, no logging. */
const BASELINE_SRC = {
  express: `
import express from 'express';
const files = new Map([['/fs/bench/get.md', Buffer.alloc(${SIZE}, 'x')]]);
const app = express();
app.get('/fs/*splat', (req, res) => {
  const b = files.get(req.path);
  if (!b) { res.status(404).json({ error: 'ENOENT', code: 'ENOENT' }); return; }
  res.type('text/markdown; charset=utf-8').setHeader('ETag', '"e"');
  res.send(b);
});
app.put('/fs/*splat', express.raw({ type: () => true, limit: 10485760 }), (req, res) => {
  files.set(req.path, req.body);
  res.json({ path: req.path, size: req.body.length, etag: 'e' });
});
const s = app.listen(Number(process.env.PORT), '127.0.0.1', () => process.stderr.write('ready\\n'));
`,
  'node:http': `
import http from 'node:http';
const files = new Map([['/fs/bench/get.md', Buffer.alloc(${SIZE}, 'x')]]);
http.createServer((req, res) => {
  if (req.method === 'GET') {
    const b = files.get(req.url);
    if (!b) { res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"ENOENT","code":"ENOENT"}'); return; }
    res.writeHead(200, { 'content-type': 'text/markdown; charset=utf-8', 'content-length': b.length, etag: '"e"' }).end(b);
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const b = Buffer.concat(chunks);
    files.set(req.url, b);
    const out = JSON.stringify({ path: req.url, size: b.length, etag: 'e' });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
  });
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.stderr.write('ready\\n'));
`,
} as const;

type ServerName = 'mdvfs' | keyof typeof BASELINE_SRC;

async function startBaseline(name: keyof typeof BASELINE_SRC): Promise<{ port: number; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(process.execPath, ['--input-type=module', '-e', BASELINE_SRC[name]], {
    cwd: ROOT_DIR,
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  onCleanup(() => killProc(proc, 'SIGTERM', 2000));
  await new Promise<void>((resolve, reject) => {
    let err = '';
    proc.stderr!.on('data', (b: Buffer) => {
      err += b.toString();
      if (err.includes('ready')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`${name} baseline exited (${code}): ${err.slice(-300)}`)));
  });
  return { port, proc };
}

/** A process and all its descendants (from /proc). */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** Pins every thread of these processes to one CPU; false if taskset is missing or refuses. */
function pin(pids: number[], cpu: number): boolean {
  try {
    for (const pid of pids) execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const TICK_S = (() => {
  try {
    return 1 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  } catch {
    return 0.01;
  }
})();

/** User + system CPU seconds used so far by these processes (all threads). */
export function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // exited
    }
  }
  return ticks * TICK_S;
}

export function put(port: number, path: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = http.request(
      { host: '127.0.0.1', port, method: 'PUT', path, headers: { 'content-length': body.length }, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    r.on('error', reject);
    r.end(body);
  });
}

export interface Measure {
  rps: number;
  p99: number;
  /** Server-side CPU time per request (µs), all of the side's processes. */
  cpuUs: number;
  /** Requests answered. */
  total: number;
}

export interface Side {
  port: number;
  pids: number[];
}

export async function load(
  { port, pids }: Side,
  op: 'GET' | 'PUT',
  connections: number,
  duration: number,
): Promise<Measure> {
  let i = 0;
  const request: AutocannonRequest =
    op === 'GET'
      ? { method: 'GET', path: '/fs/bench/get.md' }
      : {
          method: 'PUT',
          body: BODY,
          headers: { 'content-type': 'text/markdown' },
          // 1000 distinct files, so PUTs are real writes and not one hot inode
          setupRequest: (req) => ({ ...req, path: `/fs/bench/put-${i++ % 1000}.md` }),
        };
  const cpu0 = cpuSeconds(pids);
  const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration, requests: [request] });
  const cpu = cpuSeconds(pids) - cpu0;
  if (r.non2xx > 0 || r.errors > 0)
    throw new Error(`${op} c=${connections} on :${port}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return {
    rps: r.requests.average,
    p99: r.latency.p99,
    cpuUs: r.requests.total > 0 ? (cpu / r.requests.total) * 1e6 : NaN,
    total: r.requests.total,
  };
}

export async function benchRest(opts: BenchOptions): Promise<BenchTable> {
  const title = 'REST GET/PUT of 4 KiB vs bare express 5 and node:http';
  // Full: 5 paired repetitions of 4 s per side and case (about 5 minutes in all). --quick must fit
  // the harness's 30 s budget on a loaded machine: one repetition of 0.75 s (2 × 0.5 s overran it).
  const duration = opts.quick ? 0.75 : 4;
  const reps = opts.quick ? 1 : 5;
  const rows: BenchRow[] = [];
  const sides = new Map<ServerName, Side>();
  let placement = 'not pinned (fewer than 2 CPUs or no taskset)';
  try {
    // One HTTP worker: this table compares one sidecar with one baseline process (bench/http-workers.ts scales them).
    const serve = await startServe(diskDir('mdvfs-bench-rest-'), { SERVICE_HTTP_WORKERS: '1' });
    sides.set('mdvfs', { port: serve.port, pids: processTree(serve.proc.pid!) });
    for (const name of ['express', 'node:http'] as const) {
      const b = await startBaseline(name);
      sides.set(name, { port: b.port, pids: processTree(b.proc.pid!) });
    }
    for (const [name, { port }] of sides) {
      const s = await put(port, '/fs/bench/get.md', BODY);
      if (s !== 200) throw new Error(`seeding ${name}: HTTP ${s}`);
    }
    if (
      os.availableParallelism() >= 2 &&
      pin([process.pid], 0) &&
      [...sides.values()].every((side) => pin(side.pids, 1))
    ) {
      placement = 'autocannon pinned to CPU 0, each server side (mdvfs: daemon + sidecar + supervisor) to CPU 1';
    }
  } catch (err) {
    return { title, rows: [errorRow(title, err)] };
  }
  log(`placement: ${placement}`);

  for (const op of ['GET', 'PUT'] as const) {
    for (const c of [1, 32]) {
      const name = `${op} 4 KiB, c=${c}`;
      try {
        const got = new Map<ServerName, Measure[]>();
        // Warm-up (JIT, connection setup; once per op with --quick), then alternate the servers so
        // machine drift hits all alike.
        if (!opts.quick || c === 1) for (const side of sides.values()) await load(side, op, c, opts.quick ? 0.5 : 1);
        for (let r = 0; r < reps; r++) {
          const order = [...sides.entries()];
          if (r % 2 === 1) order.reverse();
          for (const [server, side] of order) {
            const m = await load(side, op, c, duration);
            got.set(server, [...(got.get(server) ?? []), m]);
            await sleep(opts.quick ? 50 : 200);
          }
        }
        const med = (s: ServerName) => {
          const ms = got.get(s)!;
          return {
            rps: median(ms.map((m) => m.rps)),
            p99: median(ms.map((m) => m.p99)),
            cpuUs: median(ms.map((m) => m.cpuUs)),
          };
        };
        const ours = med('mdvfs');
        const ex = med('express');
        const bare = med('node:http');
        log(
          `${name}: mdvfs ${ours.rps.toFixed(0)} req/s (p99 ${ours.p99} ms, ${ours.cpuUs.toFixed(0)} µs CPU/req), express ${ex.rps.toFixed(0)} (p99 ${ex.p99}, ${ex.cpuUs.toFixed(0)} µs), node:http ${bare.rps.toFixed(0)} (p99 ${bare.p99}, ${bare.cpuUs.toFixed(0)} µs)`,
        );
        const p99 = `p99: mdvfs ${ours.p99} ms, express ${ex.p99} ms, node:http ${bare.p99} ms`;
        const cpu = `server CPU per request: mdvfs ${ours.cpuUs.toFixed(0)} µs, express ${ex.cpuUs.toFixed(0)} µs, node:http ${bare.cpuUs.toFixed(0)} µs`;
        const how = `${reps} × ${duration} s per side; ${placement}`;
        rows.push(
          compareRow({
            name: `${name}: mdvfs vs bare express`,
            unit: 'req/s',
            better: 'higher',
            ours: ours.rps,
            baseline: ex.rps,
            target: op === 'GET' ? 0.7 : 0.4,
            note: `${p99}; ${cpu}${op === 'PUT' ? '; mdvfs PUTs are durable (fsync), the baselines keep bytes in memory' : ''}; ${how}`,
          }),
        );
        rows.push(
          compareRow({
            name: `${name}: bare express vs bare node:http`,
            unit: 'req/s',
            better: 'higher',
            ours: ex.rps,
            baseline: bare.rps,
            note: 'the framework floor, for context',
          }),
        );
      } catch (err) {
        rows.push(errorRow(name, err));
      }
    }
  }
  return { title, rows };
}
