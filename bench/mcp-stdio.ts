/**
 * MCP over stdio: tool calls per second of `mdvfs-mcp` against the reference
 * `@modelcontextprotocol/server-filesystem`, in the same run, on the same files.
 *
 * The same N markdown files of 1 KiB exist twice on tmpfs: as plain files (the reference server's
 * allowed directory) and in an mdvfs data dir (written through the daemon, default fsync setting).
 * Pairs: read_file ↔ read_text_file, write_file ↔ write_file (overwriting existing files), and
 * search. The reference `search_files` matches file *names* by glob, so it is compared both with our
 * `search_files` (a content regex, more work) and with our `find_files` (the same name-glob job).
 *
 * Two kinds of load, both servers in the same run:
 * - the SDK's real Client over StdioClientTransport, one call at a time, alternating between the two
 *   servers call by call: what one agent sees. Its own per-call work (response parsing, output-schema
 *   validation) is in both sides' latency, so these rows are informational.
 * - a lean client that speaks newline-delimited JSON-RPC to the child's stdio directly (initialize
 *   handshake, then tools/call), with 1 and with 8 calls in flight (MCP clients issue parallel tool
 *   calls), in timed paired repetitions that alternate which server goes first: the servers' own
 *   capacity, not the load generator's. The target sits on the 8-in-flight rows.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import {
  ROOT_DIR,
  compareRow,
  errorRow,
  killProc,
  log,
  median,
  nowMs,
  onCleanup,
  paired,
  populate,
  shmDir,
  startDaemonProc,
} from './util.js';

const MCP_STDIO = path.join(ROOT_DIR, 'dist', 'mcp', 'stdio.js');
const REFERENCE = path.join(ROOT_DIR, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');

async function connect(args: string[], env: Record<string, string>): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'mdvfs-bench', version: '1.0.0' });
  await client.connect(transport);
  onCleanup(async () => {
    // The reference server does not exit when its stdin closes (the SDK client would wait 2 s for it).
    if (transport.pid !== null) process.kill(transport.pid, 'SIGTERM');
    await client.close();
  });
  return client;
}

export type Call = (i: number) => Promise<void>;

function caller(client: Client, tool: string, args: (i: number) => Record<string, unknown>): Call {
  return async (i) => {
    const r = await client.callTool({ name: tool, arguments: args(i) });
    if (r.isError) throw new Error(`${tool} failed: ${JSON.stringify(r.content).slice(0, 200)}`);
  };
}

/**
 * A minimal MCP client: newline-delimited JSON-RPC over the child's stdin/stdout, no SDK, no schema
 * validation of the answers (it only checks `isError`), so that with calls in flight the server's
 * capacity is measured rather than the client's.
 */
export class LeanClient {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }
  >();
  private buf = '';

  readonly pid: number;

  private constructor(private readonly proc: ChildProcess) {
    this.pid = proc.pid!;
    proc.stdout!.setEncoding('utf8');
    proc.stdout!.on('data', (chunk: string) => {
      this.buf += chunk;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const msg = JSON.parse(line) as { id?: number; result?: Record<string, unknown>; error?: { message: string } };
        if (typeof msg.id !== 'number') continue; // notifications
        const p = this.pending.get(msg.id);
        if (!p) continue;
        this.pending.delete(msg.id);
        if (msg.error) p.reject(new Error(msg.error.message));
        else p.resolve(msg.result ?? {});
      }
    });
    proc.on('exit', () => {
      for (const p of this.pending.values()) p.reject(new Error('server exited'));
      this.pending.clear();
    });
  }

  static async start(args: string[], env: Record<string, string>): Promise<LeanClient> {
    const proc = spawn(process.execPath, args, {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', ...env },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    onCleanup(() => killProc(proc));
    const c = new LeanClient(proc);
    await c.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'mdvfs-bench-lean', version: '1.0.0' },
    });
    proc.stdin!.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    return c;
  }

  /** Closes stdin, as a client going away does, and waits for the server to exit. */
  close(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve();
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.stdin!.end();
    return exited;
  }

  request(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }

  call(tool: string, args: (i: number) => Record<string, unknown>): Call {
    return async (i) => {
      const r = await this.request('tools/call', { name: tool, arguments: args(i) });
      if (r.isError) throw new Error(`${tool} failed: ${JSON.stringify(r.content).slice(0, 200)}`);
    };
  }
}

/** CPU time (user + system, ms) a process has used so far, from /proc (NaN where there is none). */
function cpuMs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, in clock ticks of 10 ms
  } catch {
    return NaN;
  }
}

/** CPU spent per call by some processes over the timed repetitions of one side. */
class CpuMeter {
  calls = 0;
  readonly ms: number[];
  constructor(private readonly pids: number[]) {
    this.ms = pids.map(() => 0);
  }
  async measure(run: (count: { n: number }) => Promise<number>): Promise<number> {
    const before = this.pids.map(cpuMs);
    const count = { n: 0 };
    const rate = await run(count);
    this.pids.forEach((pid, k) => (this.ms[k]! += cpuMs(pid) - before[k]!));
    this.calls += count.n;
    return rate;
  }
  /** µs of CPU per call, per process. */
  perCall(): number[] {
    return this.ms.map((ms) => Math.round((ms * 1000) / Math.max(1, this.calls)));
  }
}

/** Calls per second with `inFlight` calls outstanding at all times, for about `ms` milliseconds (at least `inFlight` calls). */
export async function throughput(
  f: Call,
  inFlight: number,
  ms: number,
  start: number,
  count?: { n: number },
): Promise<number> {
  let next = start;
  let done = 0;
  const t0 = nowMs();
  const worker = async (): Promise<void> => {
    do {
      await f(next++);
      done++;
      if (count) count.n++;
    } while (nowMs() - t0 < ms);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return (done * 1000) / (nowMs() - t0);
}

/**
 * Median latency (ms) of `n` calls on each side, interleaved call by call (alternating which side
 * goes first), so bursts of load on a shared machine hit both sides alike.
 */
async function interleaved(
  n: number,
  a: Call,
  b: Call,
  maxMs = Infinity,
): Promise<{ a: number; b: number; n: number }> {
  const la: number[] = [];
  const lb: number[] = [];
  const one = async (f: Call, i: number, into: number[]): Promise<void> => {
    const t0 = nowMs();
    await f(i);
    into.push(nowMs() - t0);
  };
  const start = nowMs();
  // n calls per side, or fewer (at least 4) when they take longer than maxMs in all
  for (let i = 0; i < n && (i < 4 || nowMs() - start < maxMs); i++) {
    if (i % 2 === 0) {
      await one(a, i, la);
      await one(b, i, lb);
    } else {
      await one(b, i, lb);
      await one(a, i, la);
    }
  }
  return { a: median(la), b: median(lb), n: la.length };
}

/** `<root>/d<k>/f<i>.md`, as bench/util.ts's populate names them. */
function rel(i: number): string {
  return `d${String(Math.floor(i / 1000)).padStart(3, '0')}/f${String(i).padStart(6, '0')}.md`;
}

export async function benchMcp(opts: BenchOptions): Promise<BenchTable> {
  const files = opts.quick ? 200 : 2000;
  const calls = opts.quick ? 120 : 3000;
  const searches = opts.quick ? 10 : 40; // the reference takes ~170 ms per search over 2,000 files
  const warmupCalls = opts.quick ? 80 : 1000;
  // Time caps, so that a loaded machine does not push the module past its budget.
  const sdkWarmMaxMs = opts.quick ? 150 : 5000; // SDK client warm-up per comparison
  const sdkMaxMs = opts.quick ? 400 : 15000; // SDK client measurement per comparison
  const repMs = opts.quick ? 200 : 1000; // one timed repetition of the lean client
  const warmMs = opts.quick ? 1000 : 3000; // the lean client's warm-up per server, 8 calls in flight
  const title = `MCP over stdio: tool calls/s, mdvfs-mcp vs @modelcontextprotocol/server-filesystem (${files.toLocaleString('en')} files of 1 KiB on tmpfs)`;
  const rows: BenchRow[] = [];
  const t0 = nowMs();
  const at = (): string => `${((nowMs() - t0) / 1000).toFixed(1)} s`;
  try {
    // The same files twice: plain files for the reference server, and an mdvfs data dir.
    const plain = shmDir('mdvfs-bench-mcp-plain-');
    const base = Buffer.alloc(1024, 'abcdefghijklmnopqrstuvwxyz\n'.repeat(40));
    for (let i = 0; i < files; i++) {
      const f = path.join(plain, rel(i));
      if (i % 1000 === 0) mkdirSync(path.dirname(f), { recursive: true });
      const b = Buffer.from(base);
      b.write(`# file ${i}\n`, 0);
      writeFileSync(f, b);
    }
    const dataDir = path.join(shmDir('mdvfs-bench-mcp-data-'), 'data');
    const daemon = await startDaemonProc(dataDir);
    onCleanup(() => daemon.stop('SIGTERM'));
    await populate(daemon.client, '/bench', files);
    log(`mcp: ${files} files on both sides; starting both servers, twice (SDK client, lean client)`);

    const oursEnv = { SERVICE_DATA_DIR: dataDir };
    const [ours, theirs, leanOurs, leanTheirs] = await Promise.all([
      connect([MCP_STDIO], oursEnv),
      connect([REFERENCE, plain], {}),
      LeanClient.start([MCP_STDIO], oursEnv),
      LeanClient.start([REFERENCE, plain], {}),
    ]);

    const content = `# rewritten\n${'lorem ipsum dolor sit amet\n'.repeat(37)}`;
    const pick = (i: number): number => (i * 7919) % files; // spread over all files, same order on both sides
    type Args = (i: number) => Record<string, unknown>;
    interface Case {
      name: string;
      ours: [tool: string, args: Args];
      baseline: [tool: string, args: Args];
      n: number;
      note: string;
      lean: boolean; // also measured with the lean client (the target is on its 8-in-flight row)
    }
    const allCases: Case[] = [
      {
        name: 'read_file ↔ read_text_file',
        ours: ['read_file', (i) => ({ path: `/bench/${rel(pick(i))}` })],
        baseline: ['read_text_file', (i) => ({ path: path.join(plain, rel(pick(i))) })],
        n: calls,
        note: '1 KiB markdown file',
        lean: true,
      },
      {
        name: 'write_file ↔ write_file',
        ours: ['write_file', (i) => ({ path: `/bench/${rel(pick(i))}`, content })],
        baseline: ['write_file', (i) => ({ path: path.join(plain, rel(pick(i))), content })],
        n: calls,
        note: 'overwrites a 1 KiB file; ours is acknowledged durable (SQLite group commit, SERVICE_FSYNC=full), theirs is a plain write',
        lean: true,
      },
      {
        name: 'search_files (ours: content regex) ↔ search_files (theirs: name glob)',
        ours: ['search_files', (i) => ({ pattern: `file ${pick(i)}$`, path: '/bench' })],
        baseline: ['search_files', (i) => ({ path: plain, pattern: `**/f*${pick(i)}.md` })],
        n: searches,
        note: `ours greps the contents of all ${files.toLocaleString('en')} files; theirs only matches names`,
        lean: true,
      },
      {
        name: 'find_files ↔ search_files (both: name glob)',
        ours: ['find_files', (i) => ({ name: `f*${pick(i)}.md`, path: '/bench' })],
        baseline: ['search_files', (i) => ({ path: plain, pattern: `**/f*${pick(i)}.md` })],
        n: searches,
        note: 'the like-for-like name search',
        lean: false,
      },
    ];
    // --quick leaves out the informational like-for-like name search to stay inside its time budget.
    const cases = opts.quick ? allCases.filter((c) => c.lean) : allCases;
    // The lean client's servers are processes of their own: warm them up (JIT) on a mix of the
    // measured tools, 8 calls in flight, before the first timed repetition.
    log(`mcp: lean client warm-up, ${warmMs} ms per server (at ${at()})`);
    for (const [client, side] of [
      [leanOurs, 'ours'],
      [leanTheirs, 'baseline'],
    ] as const) {
      const calls = cases
        .filter((c) => c.lean)
        .map((c) => {
          const [tool, args] = c[side];
          return client.call(tool, args);
        });
      await throughput((i) => calls[i % calls.length]!(i), 8, warmMs, 0);
    }
    const sdkNote =
      'SDK Client (StdioClientTransport), one call at a time, alternating call by call, median latency; informational: the latency one agent sees, ' +
      "with the SDK client's own per-call work (response parsing, output-schema validation) in both sides' numbers";
    for (const c of cases) {
      try {
        log(`mcp: ${c.name}: SDK client, one call at a time (at ${at()})`);
        const a = caller(ours, ...c.ours);
        const b = caller(theirs, ...c.baseline);
        // Both servers are JIT-compiled Node: the first few hundred calls are several times slower.
        await interleaved(c.n === calls ? warmupCalls : Math.max(2, c.n >> 1), a, b, sdkWarmMaxMs);
        const m = await interleaved(c.n, a, b, sdkMaxMs);
        rows.push(
          compareRow({
            name: c.name,
            unit: 'calls/s',
            better: 'higher',
            ours: 1000 / m.a,
            baseline: 1000 / m.b,
            note: `${c.note}; ${sdkNote}; ${m.n} calls per side`,
          }),
        );
      } catch (err) {
        rows.push(errorRow(c.name, err));
      }
      if (!c.lean) continue;
      const la = leanOurs.call(...c.ours);
      const lb = leanTheirs.call(...c.baseline);
      for (const inFlight of [1, 8]) {
        const name = `${c.name}: lean client, ${inFlight} in flight`;
        try {
          log(`mcp: ${name} (at ${at()})`);
          let ka = 0; // both sides walk the same files in the same order
          let kb = 0;
          const cpuOurs = new CpuMeter([leanOurs.pid, daemon.proc.pid!]);
          const cpuTheirs = new CpuMeter([leanTheirs.pid]);
          const r = await paired({
            warmup: 0,
            reps: 5,
            ours: () => cpuOurs.measure((n) => throughput(la, inFlight, repMs, ++ka * 100_003, n)),
            baseline: () => cpuTheirs.measure((n) => throughput(lb, inFlight, repMs, ++kb * 100_003, n)),
          });
          const [mcpUs, daemonUs] = cpuOurs.perCall();
          const [refUs] = cpuTheirs.perCall();
          const cpu = Number.isFinite(refUs)
            ? `; CPU per call: ours ${mcpUs} µs in mdvfs-mcp + ${daemonUs} µs in the daemon, theirs ${refUs} µs`
            : '';
          log(
            `  calls/s ours ${r.oursAll.map(Math.round).join(' ')}, theirs ${r.baselineAll.map(Math.round).join(' ')}${cpu}`,
          );
          const how =
            inFlight === 1
              ? "lean client (raw newline-delimited JSON-RPC over the child's stdio), 1 call in flight: the round trip without the SDK client's cost; informational"
              : `lean client (raw newline-delimited JSON-RPC over the child's stdio), ${inFlight} calls in flight: the server's capacity, where the issue's target applies`;
          rows.push(
            compareRow({
              name,
              unit: 'calls/s',
              better: 'higher',
              ours: r.ours,
              baseline: r.baseline,
              note: `${c.note}; ${how}; median of 5 paired timed repetitions of ~${repMs} ms alternating which server goes first, after ${warmMs} ms of warm-up${cpu}`,
              ...(inFlight === 8 ? { target: 2 } : {}),
            }),
          );
        } catch (err) {
          rows.push(errorRow(name, err));
        }
      }
    }
    return { title, rows };
  } catch (err) {
    rows.push(errorRow('mcp stdio', err));
    return { title, rows };
  }
}
