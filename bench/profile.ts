/**
 * The profiles behind the findings in docs/benchmarks.md, reproducible:
 *
 *   npm run build && node --import tsx bench/profile.ts [scenario...]
 *
 * Each scenario runs one workload of a comparison with every mdvfs process it involves started under
 * `node --cpu-prof` (stopped with SIGTERM so the profiles are written), then prints, per process, the
 * share of idle time and the functions with the most self time. Scenarios: rest-get-c1, rest-get-c32,
 * rest-put-c32, mcp-read, fuse-create, fuse-warm, fuse-rm, daemon-mutation, startup (default: all).
 *
 * MDVFS_PROFILE_MOUNT_ARGS: more `mdvfs mount` options for the fuse-* scenarios (e.g. --writeback).
 *
 * daemon-mutation first measures without the profiler (see `daemonMutation`): µs per call and daemon
 * CPU per call of the mount's create and unlink over the socket, against the same calls run in-process.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { summarizeProfile } from './report.js';
import { configFromEnv, openCore } from '../daemon/main.js';
import { invoke } from '../daemon/rpc/server.js';
import type { Caller } from '../daemon/rpc/client.js';
import type { Creds, Method, Params, Result } from '../daemon/rpc/protocol.js';
import { VfsError } from '../daemon/errors.js';
import {
  buildStore,
  CLI,
  exited,
  killProc,
  median,
  nowMs,
  populate,
  ROOT_DIR,
  runCleanups,
  shmDir,
  sleep,
  spawnDaemonProc,
  startDaemonProc,
  startServe,
  timeMs,
  waitHealthy,
} from './util.js';

interface AutocannonResult {
  requests: { average: number };
  latency: { p99: number };
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  requests: Record<string, unknown>[];
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** Which of our processes a profile came from, by the code it ran. */
function role(file: string): string {
  const text = readFileSync(file, 'utf8');
  if (text.includes('/dist/fuse/lowlevel/')) return 'mount (mdvfs mount)';
  if (text.includes('/dist/http/app.js')) return 'HTTP sidecar (mdvfs http)'; // it hosts /mcp too
  if (text.includes('/dist/mcp/stdio.js')) return 'stdio MCP server (mdvfs-mcp)';
  if (text.includes('/dist/daemon/store/')) return 'daemon';
  if (text.includes('/dist/http/serve.js')) return 'supervisor (mdvfs serve)';
  return 'process';
}

interface ProfNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

/**
 * Native write calls (writev, writeBuffer, writeUtf8String) are leaves; to see which stream pays
 * them, attribute their samples to the nearest caller in our code or in a package.
 */
function nativeWriteCallers(file: string): string[] {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfNode[] };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const total = prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0) || 1;
  const agg = new Map<string, number>();
  for (const n of prof.nodes) {
    if (!['writev', 'writeBuffer', 'writeUtf8String'].includes(n.callFrame.functionName) || !n.hitCount) continue;
    let id: number | undefined = n.id;
    let where = '(node internals)';
    while (id !== undefined) {
      const x = byId.get(id)!;
      const url = x.callFrame.url;
      if (url.includes('/dist/') || url.includes('/node_modules/')) {
        where =
          `${url.split(/\/dist\/|\/node_modules\//).pop()}:${x.callFrame.lineNumber + 1} ${x.callFrame.functionName}`.trim();
        break;
      }
      id = parent.get(id);
    }
    const key = `${n.callFrame.functionName} ← ${where}`;
    agg.set(key, (agg.get(key) ?? 0) + n.hitCount);
  }
  return [...agg.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([k, v]) => `        ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
}

/** Self time grouped by where the code lives: our modules, each package, node core, natives. */
function selfByArea(file: string): string {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfNode[] };
  const total = prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0) || 1;
  const agg = new Map<string, number>();
  for (const n of prof.nodes) {
    if (!n.hitCount) continue;
    const { url, functionName } = n.callFrame;
    let area: string;
    if (functionName === '(idle)' || functionName === '(garbage collector)' || functionName === '(program)')
      area = functionName;
    else if (url.includes('/node_modules/'))
      area = url
        .split('/node_modules/')
        .pop()!
        .split('/')
        .slice(0, url.includes('/node_modules/@') ? 2 : 1)
        .join('/');
    else if (url.includes('/dist/')) area = url.split('/dist/').pop()!.split('/').slice(0, -1).join('/') || 'dist';
    else if (url.startsWith('node:')) area = 'node core (JS)';
    else area = 'native (syscalls, V8 builtins)';
    agg.set(area, (agg.get(area) ?? 0) + n.hitCount);
  }
  return [...agg.entries()]
    .sort((a, b) => b[1] - a[1])
    .filter(([, v]) => v / total >= 0.01)
    .map(([k, v]) => `${k} ${((v / total) * 100).toFixed(0)}%`)
    .join(', ');
}

function report(dir: string, title: string, extra: string): void {
  process.stdout.write(`\n=== ${title}: ${extra}\n`);
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.cpuprofile'))) {
    const r = role(path.join(dir, f));
    if (r.startsWith('supervisor')) continue; // only waits on its children
    process.stdout.write(
      `--- ${r}\n${summarizeProfile(path.join(dir, f), 10).join('\n')}\n    by area: ${selfByArea(path.join(dir, f))}\n`,
    );
    const writes = nativeWriteCallers(path.join(dir, f));
    if (writes.length > 0) process.stdout.write(`    socket/pipe writes by caller:\n${writes.join('\n')}\n`);
  }
}

function profDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-profile-'));
  process.env.MDVFS_BENCH_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
  return dir;
}

async function rest(op: 'GET' | 'PUT', connections: number): Promise<void> {
  const dir = profDir();
  const s = await startServe(path.join(shmDir(), 'data'));
  const body = Buffer.alloc(4096, 'x');
  await fetch(`http://127.0.0.1:${s.port}/fs/bench/get.md`, { method: 'PUT', body });
  let i = 0;
  const request =
    op === 'GET'
      ? { method: 'GET', path: '/fs/bench/get.md' }
      : {
          method: 'PUT',
          body,
          headers: { 'content-type': 'text/markdown' },
          setupRequest: (r: Record<string, unknown>) => ({ ...r, path: `/fs/bench/put-${i++ % 1000}.md` }),
        };
  const r = await autocannon({ url: `http://127.0.0.1:${s.port}`, connections, duration: 5, requests: [request] });
  await s.stop();
  await sleep(300);
  report(
    dir,
    `REST ${op} 4 KiB, c=${connections}, 5 s of autocannon`,
    `${Math.round(r.requests.average)} req/s, p99 ${r.latency.p99} ms`,
  );
  rmSync(dir, { recursive: true, force: true });
}

async function mcpRead(): Promise<void> {
  const dir = profDir();
  const dataDir = path.join(shmDir(), 'data');
  const d = await startDaemonProc(dataDir);
  await populate(d.client, '/bench', 200);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--cpu-prof', `--cpu-prof-dir=${dir}`, path.join(ROOT_DIR, 'dist', 'mcp', 'stdio.js')],
    env: { ...(process.env as Record<string, string>), SERVICE_DATA_DIR: dataDir },
    stderr: 'ignore',
  });
  const c = new Client({ name: 'mdvfs-profile', version: '1' });
  await c.connect(transport);
  const n = 1500;
  const ms = await timeMs(async () => {
    for (let k = 0; k < n; k++)
      await c.callTool({
        name: 'read_file',
        arguments: { path: `/bench/d000/f${String((k * 7919) % 200).padStart(6, '0')}.md` },
      });
  });
  await c.close();
  await sleep(500);
  await d.stop();
  report(dir, `MCP stdio: ${n} × read_file of 1 KiB, one at a time`, `${Math.round(n / (ms / 1000))} calls/s`);
  rmSync(dir, { recursive: true, force: true });
}

/** Files removed by the fuse-rm scenario (as many as the FUSE bench's full run, in directories of 1,000). */
const RM_FILES = 10000;

function sh(cmd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn('bash', ['-c', cmd], { stdio: 'ignore' });
    p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd.slice(0, 60)}: exit ${code}`))));
  });
}

async function fuse(kind: 'create' | 'warm' | 'rm'): Promise<void> {
  const dataDir = path.join(shmDir(), 'data');
  if (kind === 'rm') {
    // The files are written before the profiled daemon starts: its profile holds the rm -rf alone.
    const p = await startDaemonProc(dataDir);
    await populate(p.client, '/set', RM_FILES, 100);
    await p.stop();
  }
  const dir = profDir();
  const d = await startDaemonProc(dataDir);
  if (kind === 'warm') await populate(d.client, '/set', 1000, 200);
  const mnt = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-profile-mnt-'));
  // MDVFS_PROFILE_MOUNT_ARGS: more `mdvfs mount` options (e.g. --writeback), space-separated.
  const more = (process.env.MDVFS_PROFILE_MOUNT_ARGS ?? '').split(' ').filter((a) => a !== '');
  const m = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, CLI, 'mount', mnt, ...more], {
    env: { ...process.env, SERVICE_DATA_DIR: dataDir },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  m.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  try {
    const deadline = Date.now() + 30000;
    while (!/mounted .* at /.test(err)) {
      if (exited(m) || Date.now() > deadline) throw new Error(`mount did not come up: ${err.slice(-300)}`);
      await sleep(20);
    }
    let extra: string;
    if (kind === 'create') {
      const ms = await timeMs(() =>
        sh(
          `mkdir -p ${mnt}/set/d0; for ((i=0;i<1000;i++)); do printf '# Note %d\\nneedle-%d\\n' $i $i > ${mnt}/set/d0/n$i.md; done`,
        ),
      );
      extra = `1,000 files created by a shell in ${Math.round(ms)} ms`;
    } else if (kind === 'rm') {
      // As in the FUSE bench, the kernel knows every entry already (there, from the create and ls -lR).
      await sh(`ls -lR ${mnt}/set > /dev/null`);
      const ms = await timeMs(() => sh(`rm -rf ${mnt}/set`));
      extra = `rm -rf of ${RM_FILES.toLocaleString('en')} files (after ls -lR) in ${Math.round(ms)} ms, ${Math.round((ms * 1000) / RM_FILES)} µs per file`;
    } else {
      const times: number[] = [];
      for (let k = 0; k < 5; k++)
        times.push(await timeMs(() => sh(`grep -r 'file 999' ${mnt}/set > /dev/null || true`)));
      extra = `grep -r over 1,000 files, 5 times: ${times.map((x) => Math.round(x)).join(', ')} ms`;
    }
    await killProc(m, 'SIGTERM', 10000);
    await d.stop();
    report(dir, `FUSE ${kind}`, extra);
  } finally {
    await killProc(m, 'SIGTERM', 5000);
    await sh(`fusermount3 -uz '${mnt}' 2>/dev/null; rmdir '${mnt}' 2>/dev/null; true`).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU seconds a process has used, all its threads (utime + stime of /proc/<pid>/stat). */
function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/** CPU seconds of a process's main thread (the event loop), from its scheduler statistics (ns). */
function mainThreadCpuSeconds(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
}

/** One side of the mutation workload: a caller, and how much CPU the side that serves it has used. */
interface MutationSide {
  caller: Pick<Caller, 'call'>;
  cpu(): { all: number; main: number };
}

interface PhaseCost {
  us: number;
  cpuUs: number;
  mainUs: number;
}

/**
 * The mount's per-file daemon calls, one in flight at a time (what a shell loop through the mount
 * sends): `n` exclusive writes of a new 1 KiB file with `stat` and `want_grant` (MountFs.send of a
 * created file), then `n` unlinks (rm -rf). Grants are released after the create phase, off the clock.
 */
async function mutationRound(
  side: MutationSide,
  dir: string,
  n: number,
): Promise<{ create: PhaseCost; unlink: PhaseCost }> {
  const data = Buffer.alloc(1024, 'note line\n');
  await side.caller.call('fs.mkdir', { path: dir, parents: true });
  const phase = async (fn: (i: number) => Promise<unknown>): Promise<PhaseCost> => {
    const c0 = side.cpu();
    const t0 = nowMs();
    for (let i = 0; i < n; i++) await fn(i);
    const ms = nowMs() - t0;
    const c1 = side.cpu();
    return { us: (ms * 1000) / n, cpuUs: ((c1.all - c0.all) * 1e6) / n, mainUs: ((c1.main - c0.main) * 1e6) / n };
  };
  const grants: string[] = [];
  const create = await phase(async (i) => {
    const r = await side.caller.call(
      'fs.write',
      { path: `${dir}/n${i}.md`, mode: 0o644, parents: false, exclusive: true, stat: true, want_grant: true },
      { data },
    );
    if (r.grant !== undefined) grants.push(r.grant);
  });
  if (grants.length > 0) await side.caller.call('fs.releaseGrant', { grants });
  const unlink = await phase((i) => side.caller.call('fs.unlink', { path: `${dir}/n${i}.md` }));
  return { create, unlink };
}

/**
 * Issue 18's per-mutation cost: the mount's create (fs.write) and rm (fs.unlink) sent to a daemon
 * process over its Unix socket by the real client, sequentially, on a connection subscribed to change
 * events as the mount's is (data dir on tmpfs, SERVICE_FSYNC=full), against the same calls run
 * in-process through the same `invoke` (params, runner, durability; no socket, no second process).
 * Reports medians of alternating rounds: µs per call, and the serving side's CPU per call (the
 * daemon's: all threads and its main thread; in-process: this process). Then the same workload once
 * more with the daemon under --cpu-prof, and its profile.
 */
async function daemonMutation(): Promise<void> {
  const n = Number(process.env.MDVFS_PROFILE_FILES ?? 1000);
  const rounds = Number(process.env.MDVFS_PROFILE_ROUNDS ?? 5);
  const creds: Creds = { origin: 'local' };
  const base = shmDir('mdvfs-profile-mutation-');
  mkdirSync(path.join(base, 'core'));
  const core = openCore({
    ...configFromEnv({ ...process.env, SERVICE_DATA_DIR: path.join(base, 'core') }),
    fsync: 'full',
  });
  // A connection of its own, so that grants work in-process as over the socket.
  const conn = { id: 1, onClose: (): void => undefined };
  const inProcess: MutationSide = {
    caller: {
      async call<M extends Method>(method: M, params: Params<M>, opts?: { data?: Buffer }): Promise<Result<M>> {
        const o = await invoke(core.service.handlers, { method, params, creds, data: opts?.data }, { conn });
        if (!o.ok) throw VfsError.fromWire(o.error);
        return o.result as Result<M>;
      },
    },
    cpu: () => {
      const u = process.cpuUsage();
      return { all: (u.user + u.system) / 1e6, main: (u.user + u.system) / 1e6 };
    },
  };
  const socketSide = async (name: string, cli?: string): Promise<{ side: MutationSide; stop: () => Promise<void> }> => {
    const d = await startDaemonProc(path.join(base, name), {}, undefined, cli);
    const pid = d.proc.pid!;
    await d.client.call('sys.subscribe', {});
    return {
      side: { caller: d.client.as(creds), cpu: () => ({ all: procCpuSeconds(pid), main: mainThreadCpuSeconds(pid) }) },
      stop: () => d.stop(),
    };
  };
  // MDVFS_PROFILE_BEFORE: another build's dist/cli/main.js (e.g. main's), measured alongside in the same rounds.
  const before = process.env.MDVFS_PROFILE_BEFORE;
  const sides: { label: string; side: MutationSide; stop?: () => Promise<void> }[] = [];
  const ours = await socketSide('daemon');
  sides.push({ label: 'socket', ...ours });
  if (before !== undefined) sides.push({ label: 'socket, before', ...(await socketSide('before', before)) });
  sides.push({ label: 'in-process', side: inProcess });
  const costs = sides.map(() => ({ create: [] as PhaseCost[], unlink: [] as PhaseCost[] }));
  // Warm every side (JIT, statement cache), then rotate which side goes first.
  for (const s of sides) await mutationRound(s.side, `/bench/warm`, n);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < sides.length; k++) {
      const i = (k + r) % sides.length;
      const x = await mutationRound(sides[i]!.side, `/bench/r${r}`, n);
      costs[i]!.create.push(x.create);
      costs[i]!.unlink.push(x.unlink);
    }
  }
  for (const s of sides) await s.stop?.();
  core.store.close();
  const med = (xs: PhaseCost[], k: keyof PhaseCost): string =>
    median(xs.map((x) => x[k]))
      .toFixed(1)
      .padStart(7);
  process.stdout.write(
    `\n=== daemon mutation cost: ${n} files × ${rounds} rounds, one call in flight, 1 KiB, SERVICE_FSYNC=full on tmpfs (medians)\n` +
      `    op              side              µs/call  server CPU µs/call  main thread µs/call\n`,
  );
  for (const op of ['create', 'unlink'] as const) {
    const name = op === 'create' ? 'fs.write (new)' : 'fs.unlink     ';
    sides.forEach((s, i) => {
      const c = costs[i]![op];
      const main = s.label === 'in-process' ? '  (same)' : med(c, 'mainUs');
      process.stdout.write(
        `    ${name}  ${s.label.padEnd(16)}  ${med(c, 'us')}  ${med(c, 'cpuUs')}             ${main}\n`,
      );
    });
  }
  if (process.env.MDVFS_PROFILE_NO_PROF === '1') {
    rmSync(base, { recursive: true, force: true });
    return;
  }
  const dir = profDir();
  const p = await startDaemonProc(path.join(base, 'prof'));
  await p.client.call('sys.subscribe', {});
  const profiled: MutationSide = { caller: p.client.as(creds), cpu: () => ({ all: 0, main: 0 }) };
  for (let r = 0; r < rounds; r++) await mutationRound(profiled, `/bench/p${r}`, n);
  await p.stop();
  delete process.env.MDVFS_BENCH_NODE_ARGS;
  report(dir, 'daemon under --cpu-prof, same workload', `${rounds} rounds of ${n} creates and ${n} unlinks`);
  if (process.env.MDVFS_PROFILE_KEEP === '1') process.stdout.write(`    profile kept in ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
  rmSync(base, { recursive: true, force: true });
}

async function startup(): Promise<void> {
  const n = 10000;
  const store = await buildStore(n);
  const dir = profDir();
  const t0 = nowMs();
  const { proc, stderr } = spawnDaemonProc(store);
  const client = await waitHealthy(store, proc, stderr);
  const ms = nowMs() - t0;
  client.close();
  await killProc(proc, 'SIGTERM');
  report(
    dir,
    `daemon cold start on ${n.toLocaleString('en')} files of 1 KiB`,
    `${Math.round(ms)} ms to the first answer`,
  );
  rmSync(dir, { recursive: true, force: true });
}

const SCENARIOS: Record<string, () => Promise<void>> = {
  'rest-get-c1': () => rest('GET', 1),
  'rest-get-c32': () => rest('GET', 32),
  'rest-put-c32': () => rest('PUT', 32),
  'mcp-read': mcpRead,
  'fuse-create': () => fuse('create'),
  'fuse-warm': () => fuse('warm'),
  'fuse-rm': () => fuse('rm'),
  'daemon-mutation': daemonMutation,
  startup,
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  for (const name of wanted.length > 0 ? wanted : Object.keys(SCENARIOS)) {
    const fn = SCENARIOS[name];
    if (!fn) {
      process.stderr.write(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}\n`);
      continue;
    }
    try {
      await fn();
    } catch (err) {
      process.stdout.write(`\n=== ${name}: failed: ${(err as Error).message}\n`);
    }
    await runCleanups();
  }
}

await main();
