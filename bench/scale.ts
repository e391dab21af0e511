/**
 * Scaling: the same REST read/write mix (90% GET, 10% PUT of 1 KiB files chosen at random, one
 * request at a time over a keep-alive connection) against `mdvfs serve` with 1k files and with 10k
 * and 100k files (10k at most with --quick). Latency should stay flat as the tree grows. The 1k
 * server stays up and each repetition alternates between it and the bigger one every 20 requests.
 * If the REST server cannot start, the same mix runs over the daemon socket and the rows say so.
 */
import http from 'node:http';
import type { DaemonClient } from '../daemon/rpc/client.js';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import {
  buildStore,
  compareRow,
  errorRow,
  filePath,
  log,
  median,
  nowMs,
  percentile,
  startDaemonProc,
  startServe,
} from './util.js';

interface Target {
  label: string;
  files: number;
  /** One request of the mix; resolves when the answer has fully arrived. */
  get(p: string): Promise<void>;
  put(p: string, body: Buffer): Promise<void>;
  stop(): Promise<void>;
}

function restTarget(port: number, files: number, stop: () => Promise<void>): Target {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const req = (method: string, p: string, body?: Buffer): Promise<void> =>
    new Promise((resolve, reject) => {
      const r = http.request(
        {
          host: '127.0.0.1',
          port,
          method,
          path: `/fs/${p}`,
          agent,
          headers: body ? { 'content-type': 'text/markdown', 'content-length': body.length } : {},
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`${method} /fs/${p}: HTTP ${res.statusCode}`)),
          );
        },
      );
      r.on('error', reject);
      r.end(body);
    });
  return {
    label: 'REST',
    files,
    get: (p) => req('GET', p),
    put: (p, b) => req('PUT', p, b),
    stop: async () => {
      agent.destroy();
      await stop();
    },
  };
}

function socketTarget(client: DaemonClient, files: number, stop: () => Promise<void>): Target {
  return {
    label: 'socket',
    files,
    get: async (p) => {
      await client.request('fs.read', { path: p });
    },
    put: async (p, data) => {
      await client.call('fs.write', { path: p }, { data });
    },
    stop,
  };
}

async function startTarget(files: number, preferRest: boolean): Promise<{ target: Target; restError?: string }> {
  const dataDir = await buildStore(files);
  let restError: string | undefined;
  if (preferRest) {
    try {
      const s = await startServe(dataDir);
      return { target: restTarget(s.port, files, s.stop) };
    } catch (err) {
      restError = (err as Error).message.split('\n')[0];
    }
  }
  const d = await startDaemonProc(dataDir);
  return { target: socketTarget(d.client, files, () => d.stop()), ...(restError === undefined ? {} : { restError }) };
}

/** Runs `count` requests of the mix; returns per-request latencies in ms. */
async function mix(t: Target, count: number, seed: number): Promise<number[]> {
  let x = seed >>> 0 || 1;
  const rand = (): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  const body = Buffer.alloc(1024, 'z');
  const lat: number[] = [];
  for (let i = 0; i < count; i++) {
    // An absolute path; over REST it becomes /fs//bench/... (the absolute form of DESIGN §5).
    const p = filePath('/bench', Math.floor(rand() * t.files));
    const t0 = nowMs();
    if (rand() < 0.1) await t.put(p, body);
    else await t.get(p);
    lat.push(nowMs() - t0);
  }
  return lat;
}

export async function benchScale(opts: BenchOptions): Promise<BenchTable> {
  const sizes = opts.quick ? [10000] : [10000, 100000];
  const count = opts.quick ? 400 : 2000;
  let title = 'Scaling: REST read/write mix (90% GET / 10% PUT, 1 KiB, c=1) vs tree size';
  const rows: BenchRow[] = [];
  let small: Target | undefined;
  try {
    log('scale: 1k-file server');
    const a = await startTarget(1000, true);
    small = a.target;
    if (a.restError !== undefined)
      title = `Scaling: read/write mix over the daemon socket (REST server unavailable: ${a.restError}) vs tree size`;
    let seed = 1;
    for (const size of sizes) {
      let big: Target | undefined;
      try {
        log(`scale: ${size}-file server`);
        big = (await startTarget(size, small.label === 'REST')).target;
        await mix(small, count / 4, seed++);
        await mix(big, count / 4, seed++);
        // Paired repetitions, and within each the two servers alternate every CHUNK requests, so
        // that load from other processes on the machine hits both sides alike.
        const CHUNK = 20;
        const p50 = { small: [] as number[], big: [] as number[] };
        const p99 = { small: [] as number[], big: [] as number[] };
        for (let rep = 0; rep < 5; rep++) {
          const lat = { small: [] as number[], big: [] as number[] };
          for (let k = 0; k < count / CHUNK; k++) {
            const order: ('small' | 'big')[] = (k + rep) % 2 === 0 ? ['big', 'small'] : ['small', 'big'];
            for (const side of order) lat[side].push(...(await mix(side === 'big' ? big : small, CHUNK, seed++)));
          }
          for (const side of ['small', 'big'] as const) {
            p50[side].push(median(lat[side]));
            p99[side].push(percentile(lat[side], 99));
          }
        }
        const r = { ours: median(p50.big), baseline: median(p50.small) };
        rows.push(
          compareRow({
            name: `p50 latency, ${size.toLocaleString('en')} files (ours) vs 1,000 files (baseline)`,
            unit: 'ms',
            better: 'lower',
            ours: r.ours,
            baseline: r.baseline,
            target: 0.8,
            targetText: '≥ 0.8 (flat: at most 1.25× the 1k latency)',
            note: `5 repetitions of ${count} requests per side over ${small.label}, the sides alternating every ${CHUNK} requests`,
          }),
        );
        rows.push(
          compareRow({
            name: `p99 latency, ${size.toLocaleString('en')} vs 1,000 files`,
            unit: 'ms',
            better: 'lower',
            ours: median(p99.big),
            baseline: median(p99.small),
            note: 'median over repetitions of each repetition’s p99',
          }),
        );
      } catch (err) {
        rows.push(errorRow(`mix at ${size} files`, err));
      } finally {
        await big?.stop();
      }
    }
  } catch (err) {
    rows.push(errorRow('scaling mix', err));
  } finally {
    await small?.stop();
  }
  return { title, rows };
}
