/**
 * Stalls: the latency of a small read (a 1 KiB file, issued every 5 ms from a second connection
 * in a worker thread of its own) while one heavy request runs on another connection: a diff of
 * 3,000 changed files, listing a 1,000,000-entry directory (all its pages; 100,000 with --quick),
 * deleting it, a commit of a 100,000-file tree (20,000) and a grep over 10,000 files (2,000).
 * Baseline: the same read loop with nothing heavy running, in the same run. Target: the worst
 * small read under 100 ms (issue 12: no request may hold the daemon's event loop).
 *
 * The store is built in-process through the core (openCore on tmpfs), which takes seconds where a
 * million socket writes would take minutes; the daemon then loads it like any store.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { configFromEnv, openCore } from '../daemon/main.js';
import { socketPathFor } from '../daemon/rpc/connect.js';
import { listAll } from '../daemon/rpc/listing.js';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import { errorRow, log, nowMs, percentile, ROOT_DIR, round, shmDir, sleep, startDaemonProc } from './util.js';

const TARGET_MS = 100;
const EVERY_MS = 5;

/** The small-read loop, in a worker so that the bench's own JSON parsing never delays it. */
const PROBE = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const { connectSocket } = await import(workerData.client);
  const c = await connectSocket(workerData.socket);
  let rec = null;
  let stop = false;
  parentPort.on('message', (m) => {
    if (m === 'start') rec = [];
    else if (m === 'end') { parentPort.postMessage(rec ?? []); rec = null; }
    else if (m === 'quit') stop = true;
  });
  parentPort.postMessage('ready');
  while (!stop) {
    const t0 = performance.now();
    await c.call('fs.read', { path: '/bench/small.md' });
    const ms = performance.now() - t0;
    if (rec !== null) rec.push(ms);
    await new Promise((r) => setTimeout(r, ${EVERY_MS}));
  }
  c.close();
  process.exit(0);
})();
`;

class Prober {
  private readonly w: Worker;
  readonly ready: Promise<void>;
  constructor(socket: string) {
    this.w = new Worker(PROBE, {
      eval: true,
      workerData: { socket, client: pathToFileURL(path.join(ROOT_DIR, 'dist', 'daemon', 'rpc', 'client.js')).href },
    });
    this.ready = new Promise((resolve, reject) => {
      this.w.once('message', () => resolve());
      this.w.once('error', reject);
    });
  }
  /** Small-read latencies (ms) while `fn` runs; plus how long `fn` took. */
  async during(fn: () => Promise<unknown>): Promise<{ lat: number[]; ms: number }> {
    this.w.postMessage('start');
    await sleep(3 * EVERY_MS);
    const t0 = nowMs();
    await fn();
    const ms = nowMs() - t0;
    const lat = new Promise<number[]>((resolve) => this.w.once('message', (m: number[]) => resolve(m)));
    this.w.postMessage('end');
    return { lat: await lat, ms };
  }
  async quit(): Promise<void> {
    this.w.postMessage('quit');
    await new Promise((r) => this.w.once('exit', r));
  }
}

const lines = (i: number, tag: string): string =>
  Array.from({ length: 40 }, (_, k) => `note ${i} line ${k}${k === 20 ? ` ${tag}` : ''}`).join('\n') + '\n';

/** Builds the store in-process; returns the commit ids of the diff's two sides. */
function build(dataDir: string, sizes: { big: number; tree: number; grep: number }): { from: string; to: string } {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const core = openCore({ ...configFromEnv({ SERVICE_FSYNC: 'off' }), dataDir });
  const root = core.registry.authenticate({}, { anonymous: 'root', userAuth: true });
  const scope = { id: '', root: '/' };
  const w = (p: string, s: string | Buffer): void =>
    void core.vfs.write(root, p, typeof s === 'string' ? Buffer.from(s) : s);
  w('/bench/small.md', Buffer.alloc(1024, 'small read\n'));
  const diffFile = (i: number): string => `/diff/d${String(i % 30).padStart(2, '0')}/f${String(i).padStart(4, '0')}.md`;
  for (let i = 0; i < 3000; i++) w(diffFile(i), lines(i, 'old'));
  const from = core.vcs.commit(root, scope, 'diff base').hash;
  for (let i = 0; i < 3000; i++) w(diffFile(i), lines(i, 'new'));
  const to = core.vcs.commit(root, scope, 'diff changes').hash;
  core.store.flushNow();
  const body = Buffer.alloc(1024, 'x');
  for (let i = 0; i < sizes.tree; i++) w(`/tree/d${Math.floor(i / 100)}/f${i}.md`, body);
  for (let i = 0; i < sizes.grep; i++)
    w(
      `/grep/d${Math.floor(i / 500)}/n${i}.md`,
      `# Note ${i}\n\n${'lorem ipsum dolor sit amet, consectetur adipiscing elit\n'.repeat(70)}${i % 200 === 7 ? `TODO(bob): fix #${1000 + i}\n` : ''}`,
    );
  core.store.flushNow();
  core.vfs.mkdir(root, '/big', {});
  const empty = Buffer.alloc(0);
  for (let i = 0; i < sizes.big; i++) {
    w(`/big/e${i}`, empty);
    if (i % 50000 === 49999) core.store.flushNow();
  }
  core.store.flushNow();
  core.store.close();
  core.grep.close();
  return { from, to };
}

function row(name: string, during: { lat: number[]; ms: number }, base: number[], note: string): BenchRow {
  const worst = Math.max(...during.lat);
  const p99 = percentile(during.lat, 99);
  const baseWorst = Math.max(...base);
  return {
    name,
    ours: round(worst, 4),
    baseline: round(baseWorst, 4),
    unit: 'ms',
    ratio: round(TARGET_MS / worst, 3),
    target: `≥ 1 (worst small read ≤ ${TARGET_MS} ms)`,
    met: worst <= TARGET_MS,
    note: `p99 ${p99.toFixed(1)} ms (idle p99 ${percentile(base, 99).toFixed(1)} ms); ${during.lat.length} reads while the heavy request took ${(during.ms / 1000).toFixed(2)} s; ${note}`,
  };
}

export async function benchStall(opts: BenchOptions): Promise<BenchTable> {
  const sizes = opts.quick ? { big: 100000, tree: 20000, grep: 2000 } : { big: 1000000, tree: 100000, grep: 10000 };
  const title = 'Stalls: worst latency of a small read while one heavy request runs';
  const rows: BenchRow[] = [];
  try {
    const dataDir = path.join(shmDir('mdvfs-bench-stall-'), 'data');
    log(
      `stall: building a store in-process (${sizes.big} entries in one directory, ${sizes.tree}-file tree, ${sizes.grep} grep files)`,
    );
    const { from, to } = build(dataDir, sizes);
    // grep's per-job time bound (2 s) would refuse a 40 MB grep on a loaded machine; the row is about the stall, not the bound.
    // Loading a million inodes takes minutes on a loaded 2-core machine: a start bound to match.
    const d = await startDaemonProc(dataDir, { SERVICE_REGEX_TIMEOUT_MS: '60000' }, 600000);
    const root = d.client.as({});
    const probe = new Prober(socketPathFor(dataDir));
    await probe.ready;
    const idleMs = opts.quick ? 1000 : 3000;
    const base = (await probe.during(() => sleep(idleMs))).lat;
    rows.push({
      name: 'small read, nothing heavy running (baseline)',
      ours: round(Math.max(...base), 4),
      baseline: null,
      unit: 'ms',
      ratio: null,
      target: '—',
      met: null,
      note: `p99 ${percentile(base, 99).toFixed(1)} ms over ${base.length} reads of a 1 KiB file, one every ${EVERY_MS} ms from a second connection`,
    });
    const heavy: [string, () => Promise<unknown>, string][] = [
      [
        'diff of 3,000 changed files',
        () => root.call('vcs.diff', { from, to }),
        'vcs.diff between two commits; 30 directories of 100 files of 40 lines, one line changed in each',
      ],
      [
        `list a ${sizes.big.toLocaleString('en')}-entry directory`,
        async () => {
          await root.call('fs.write', { path: '/big/touched' }, { data: Buffer.from('x') }); // the listing must sort again
          const l = await listAll(root, '/big');
          if (l.entries.length !== sizes.big + 1) throw new Error(`listed ${l.entries.length} entries`);
        },
        'every page (10,000 entries each) of a directory changed just before, so it is sorted again',
      ],
      [
        `delete that directory (rm -r)`,
        () => root.call('fs.delete', { path: '/big', recursive: true }),
        'fs.delete recursive, acknowledged once durable',
      ],
      [
        `commit a ${sizes.tree.toLocaleString('en')}-file tree`,
        () => root.call('vcs.commit', { message: 'tree' }),
        `${sizes.tree / 100} directories of 100 new 1 KiB files (plus the grep corpus)`,
      ],
      [
        `grep over ${sizes.grep.toLocaleString('en')} files`,
        () =>
          root.call('search.grep', {
            pattern: 'TODO\\(bob\\): fix #[0-9]+',
            path: '/grep',
            recursive: true,
            max_results: 100000,
          }),
        'search.grep recursive, ~4 KiB per file',
      ],
    ];
    for (const [name, fn, note] of heavy) {
      log(`stall: ${name}`);
      try {
        rows.push(row(`small read during: ${name}`, await probe.during(fn), base, note));
      } catch (err) {
        rows.push(errorRow(`small read during: ${name}`, err));
      }
    }
    await probe.quit();
    await d.stop();
  } catch (err) {
    rows.push(errorRow('stall benchmark', err));
  }
  return { title, rows };
}

/**
 * Stalls with many pending changes (issue 30): the same small-read probe while alice's status, diff
 * and commit of 100,000 pending files (20,000 with --quick) run, and while bob, who may see none of
 * them, asks for his status. The store is built in-process like the module above's.
 */
export async function benchStallPending(opts: BenchOptions): Promise<BenchTable> {
  const files = opts.quick ? 20000 : 100000;
  const title = `Stalls with ${files.toLocaleString('en')} pending changes: worst latency of a small read during status, diff and commit`;
  const rows: BenchRow[] = [];
  try {
    const dataDir = path.join(shmDir('mdvfs-bench-pending-'), 'data');
    log(`stall-pending: building a store in-process (${files} pending files in alice's home)`);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const core = openCore({ ...configFromEnv({ SERVICE_FSYNC: 'off' }), dataDir });
    const auth = (authorization?: string) =>
      core.registry.authenticate(authorization === undefined ? {} : { authorization }, {
        anonymous: 'root',
        userAuth: true,
      });
    const root = auth();
    for (const name of ['alice', 'bob'])
      await core.service.handlers['admin.userAdd']({ creds: {}, data: undefined }, { name });
    core.vfs.write(root, '/bench/small.md', Buffer.alloc(1024, 'small read\n'));
    core.vcs.commit(root, { id: '', root: '/' }, 'base');
    const alice = auth('User alice');
    for (let i = 0; i < files; i++) {
      core.vfs.write(alice, `/home/alice/notes/d${Math.floor(i / 100)}/n${i}.md`, Buffer.from(lines(i, 'pending')));
      if (i % 50000 === 49999) core.store.flushNow();
    }
    core.store.flushNow();
    core.store.close();
    core.grep.close();
    const d = await startDaemonProc(dataDir, {}, 600000);
    const probe = new Prober(socketPathFor(dataDir));
    await probe.ready;
    const base = (await probe.during(() => sleep(opts.quick ? 1000 : 3000))).lat;
    rows.push({
      name: 'small read, nothing heavy running (baseline)',
      ours: round(Math.max(...base), 4),
      baseline: null,
      unit: 'ms',
      ratio: null,
      target: '—',
      met: null,
      note: `p99 ${percentile(base, 99).toFixed(1)} ms over ${base.length} reads of a 1 KiB file, one every ${EVERY_MS} ms from a second connection`,
    });
    const aliceC = d.client.as({ authorization: 'User alice' });
    const bobC = d.client.as({ authorization: 'User bob' });
    const n = files.toLocaleString('en');
    const heavy: [string, () => Promise<unknown>, string][] = [
      [
        `alice's status of ${n} pending files`,
        async () => {
          const st = await aliceC.call('vcs.status', {});
          if (st.added.length + (st.more ?? 0) !== files)
            throw new Error(`status counted ${st.added.length + (st.more ?? 0)}`);
        },
        `vcs.status (the first one: it hashes the working tree too); answers the first page of 10,000 and counts the rest; ${files / 100} directories of 100 new files of 40 lines`,
      ],
      [
        `bob's status (he may see none of them)`,
        async () => {
          const st = await bobC.call('vcs.status', {});
          if (!st.clean) throw new Error('bob saw changes');
        },
        "vcs.status by a user who cannot search alice's 0700 home: the walk skips it whole",
      ],
      [
        `alice's diff of ${n} pending files`,
        () => aliceC.call('vcs.diff', {}),
        'vcs.diff of the working tree: every new file, cut at 4 MiB of output (the walk goes on to count the rest)',
      ],
      [
        `alice's commit of ${n} pending files`,
        async () => {
          const c = await aliceC.call('vcs.commit', { message: 'pending' });
          if (c.changes !== files) throw new Error(`committed ${c.changes} changes`);
        },
        'vcs.commit of her changes: trees written and changes found ahead in slices, then the atomic step',
      ],
    ];
    for (const [name, fn, note] of heavy) {
      log(`stall-pending: ${name}`);
      try {
        rows.push(row(`small read during: ${name}`, await probe.during(fn), base, note));
      } catch (err) {
        rows.push(errorRow(`small read during: ${name}`, err));
      }
    }
    await probe.quit();
    await d.stop();
  } catch (err) {
    rows.push(errorRow('stall-pending benchmark', err));
  }
  return { title, rows };
}
