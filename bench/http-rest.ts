/**
 * REST throughput: GET and PUT of a 4 KiB file at concurrency 1 and 32 (autocannon, keep-alive),
 * against `mdvfs serve` (durable writes, data dir on disk), a bare express 5 app answering the same
 * 4 KiB from memory (our framework floor), and a bare `node:http` server doing the same (what this
 * machine can do at all). The three run in turn, in separate processes, within the same run.
 * Targets (ratio of our req/s to bare express): GET ≥ 0.7, durable PUT ≥ 0.4. p99 latencies in notes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import http from 'node:http';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import { ROOT_DIR, compareRow, diskDir, errorRow, freePort, killProc, log, median, onCleanup, sleep, startServe } from './util.js';

export type { BenchTable } from './types.js';

interface AutocannonResult {
  requests: { average: number };
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
type Autocannon = (opts: { url: string; connections: number; duration: number; pipelining?: number; requests?: AutocannonRequest[] }) => Promise<AutocannonResult>;

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as Autocannon;

const SIZE = 4096;
const BODY = Buffer.alloc(SIZE, 'x');
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
  const proc = spawn(process.execPath, ['--input-type=module', '-e', BASELINE_SRC[name]], { cwd: ROOT_DIR, env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
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

function put(port: number, path: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method: 'PUT', path, headers: { 'content-length': body.length }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    r.on('error', reject);
    r.end(body);
  });
}

interface Measure {
  rps: number;
  p99: number;
}

async function load(port: number, op: 'GET' | 'PUT', connections: number, duration: number): Promise<Measure> {
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
  const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration, requests: [request] });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${op} c=${connections} on :${port}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99 };
}

export async function benchRest(opts: BenchOptions): Promise<BenchTable> {
  const title = 'REST GET/PUT of 4 KiB vs bare express 5 and node:http';
  // --quick must fit the harness's 30 s budget: 12 one-second runs plus start-up.
  const duration = opts.quick ? 1 : 8;
  const reps = opts.quick ? 1 : 3;
  const rows: BenchRow[] = [];
  const ports = new Map<ServerName, number>();
  try {
    const serve = await startServe(diskDir('mdvfs-bench-rest-'));
    ports.set('mdvfs', serve.port);
    for (const name of ['express', 'node:http'] as const) ports.set(name, (await startBaseline(name)).port);
    for (const [name, port] of ports) {
      const s = await put(port, '/fs/bench/get.md', BODY);
      if (s !== 200) throw new Error(`seeding ${name}: HTTP ${s}`);
    }
  } catch (err) {
    return { title, rows: [errorRow(title, err)] };
  }

  for (const op of ['GET', 'PUT'] as const) {
    for (const c of [1, 32]) {
      const name = `${op} 4 KiB, c=${c}`;
      try {
        const got = new Map<ServerName, Measure[]>();
        // Warm-up (JIT, connection setup; once per op with --quick), then alternate the servers so
        // machine drift hits all alike.
        if (!opts.quick || c === 1) for (const port of ports.values()) await load(port, op, c, 1);
        for (let r = 0; r < reps; r++) {
          const order = [...ports.entries()];
          if (r % 2 === 1) order.reverse();
          for (const [server, port] of order) {
            const m = await load(port, op, c, duration);
            got.set(server, [...(got.get(server) ?? []), m]);
            await sleep(opts.quick ? 50 : 200);
          }
        }
        const med = (s: ServerName) => ({ rps: median(got.get(s)!.map((m) => m.rps)), p99: median(got.get(s)!.map((m) => m.p99)) });
        const ours = med('mdvfs');
        const ex = med('express');
        const bare = med('node:http');
        log(`${name}: mdvfs ${ours.rps.toFixed(0)} req/s (p99 ${ours.p99} ms), express ${ex.rps.toFixed(0)} (p99 ${ex.p99}), node:http ${bare.rps.toFixed(0)} (p99 ${bare.p99})`);
        const p99 = `p99: mdvfs ${ours.p99} ms, express ${ex.p99} ms, node:http ${bare.p99} ms`;
        rows.push(compareRow({ name: `${name}: mdvfs vs bare express`, unit: 'req/s', better: 'higher', ours: ours.rps, baseline: ex.rps, target: op === 'GET' ? 0.7 : 0.4, note: `${p99}${op === 'PUT' ? '; mdvfs PUTs are durable (fsync), the baselines keep bytes in memory' : ''}` }));
        rows.push(compareRow({ name: `${name}: bare express vs bare node:http`, unit: 'req/s', better: 'higher', ours: ex.rps, baseline: bare.rps, note: 'the framework floor, for context' }));
      } catch (err) {
        rows.push(errorRow(name, err));
      }
    }
  }
  return { title, rows };
}
