/**
 * MCP over stdio: tool calls per second of `mdvfs-mcp` against the reference
 * `@modelcontextprotocol/server-filesystem`, in the same run, on the same files.
 *
 * Both servers run as child processes driven by the SDK's real Client over StdioClientTransport.
 * The same N markdown files of 1 KiB exist twice on tmpfs: as plain files (the reference server's
 * allowed directory) and in an mdvfs data dir (written through the daemon, default fsync setting).
 * Calls are issued one at a time, as an agent does, alternating between the two servers call by call: read_file ↔ read_text_file, write_file ↔ write_file
 * (overwriting existing files), and search. The reference `search_files` matches file *names* by glob,
 * so it is compared both with our `search_files` (a content regex, more work) and with our
 * `find_files` (the same name-glob job).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { BenchOptions, BenchRow, BenchTable } from './types.js';
import { ROOT_DIR, compareRow, errorRow, log, median, nowMs, onCleanup, populate, shmDir, startDaemonProc } from './util.js';

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
  onCleanup(() => client.close());
  return client;
}

type Call = (i: number) => Promise<void>;

function caller(client: Client, tool: string, args: (i: number) => Record<string, unknown>): Call {
  return async (i) => {
    const r = await client.callTool({ name: tool, arguments: args(i) });
    if (r.isError) throw new Error(`${tool} failed: ${JSON.stringify(r.content).slice(0, 200)}`);
  };
}

/**
 * Median latency (ms) of `n` calls on each side, interleaved call by call (alternating which side
 * goes first), so bursts of load on a shared machine hit both sides alike.
 */
async function interleaved(n: number, a: Call, b: Call): Promise<{ a: number; b: number }> {
  const la: number[] = [];
  const lb: number[] = [];
  const one = async (f: Call, i: number, into: number[]): Promise<void> => {
    const t0 = nowMs();
    await f(i);
    into.push(nowMs() - t0);
  };
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) {
      await one(a, i, la);
      await one(b, i, lb);
    } else {
      await one(b, i, lb);
      await one(a, i, la);
    }
  }
  return { a: median(la), b: median(lb) };
}

/** `<root>/d<k>/f<i>.md`, as bench/util.ts's populate names them. */
function rel(i: number): string {
  return `d${String(Math.floor(i / 1000)).padStart(3, '0')}/f${String(i).padStart(6, '0')}.md`;
}

export async function benchMcp(opts: BenchOptions): Promise<BenchTable> {
  const files = opts.quick ? 200 : 2000;
  const calls = opts.quick ? 300 : 3000;
  const searches = opts.quick ? 15 : 100;
  const warmupCalls = opts.quick ? 200 : 1000;
  const title = `MCP over stdio: tool calls/s, mdvfs-mcp vs @modelcontextprotocol/server-filesystem (${files.toLocaleString('en')} files of 1 KiB on tmpfs, one call at a time)`;
  const rows: BenchRow[] = [];
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
    log(`mcp: ${files} files on both sides; starting both servers`);

    const ours = await connect([MCP_STDIO], { SERVICE_DATA_DIR: dataDir });
    const theirs = await connect([REFERENCE, plain], {});

    const content = `# rewritten\n${'lorem ipsum dolor sit amet\n'.repeat(37)}`;
    const pick = (i: number): number => (i * 7919) % files; // spread over all files, same order on both sides
    const cases: { name: string; ours: Call; baseline: Call; n: number; note: string; target?: number }[] = [
      {
        name: 'read_file ↔ read_text_file',
        ours: caller(ours, 'read_file', (i) => ({ path: `/bench/${rel(pick(i))}` })),
        baseline: caller(theirs, 'read_text_file', (i) => ({ path: path.join(plain, rel(pick(i))) })),
        n: calls,
        note: '1 KiB markdown file',
        target: 2,
      },
      {
        name: 'write_file ↔ write_file',
        ours: caller(ours, 'write_file', (i) => ({ path: `/bench/${rel(pick(i))}`, content })),
        baseline: caller(theirs, 'write_file', (i) => ({ path: path.join(plain, rel(pick(i))), content })),
        n: calls,
        note: 'overwrites a 1 KiB file; ours is acknowledged durable (SQLite group commit, SERVICE_FSYNC=full), theirs is a plain write',
        target: 2,
      },
      {
        name: 'search_files (ours: content regex) ↔ search_files (theirs: name glob)',
        ours: caller(ours, 'search_files', (i) => ({ pattern: `file ${pick(i)}$`, path: '/bench' })),
        baseline: caller(theirs, 'search_files', (i) => ({ path: plain, pattern: `**/f*${pick(i)}.md` })),
        n: searches,
        note: `ours greps the contents of all ${files.toLocaleString('en')} files; theirs only matches names`,
        target: 2,
      },
      {
        name: 'find_files ↔ search_files (both: name glob)',
        ours: caller(ours, 'find_files', (i) => ({ name: `f*${pick(i)}.md`, path: '/bench' })),
        baseline: caller(theirs, 'search_files', (i) => ({ path: plain, pattern: `**/f*${pick(i)}.md` })),
        n: searches,
        note: 'the like-for-like name search (informational)',
      },
    ];
    for (const c of cases) {
      try {
        log(`mcp: ${c.name}`);
        // Both servers are JIT-compiled Node: the first few hundred calls are several times slower.
        await interleaved(c.n === calls ? warmupCalls : Math.max(2, c.n >> 1), c.ours, c.baseline);
        const m = await interleaved(c.n, c.ours, c.baseline);
        rows.push(
          compareRow({
            name: c.name,
            unit: 'calls/s',
            better: 'higher',
            ours: 1000 / m.a,
            baseline: 1000 / m.b,
            note: `${c.note}; ${c.n} calls per side, median latency`,
            ...(c.target === undefined ? {} : { target: c.target }),
          }),
        );
      } catch (err) {
        rows.push(errorRow(c.name, err));
      }
    }
    return { title, rows };
  } catch (err) {
    rows.push(errorRow('mcp stdio', err));
    return { title, rows };
  }
}
