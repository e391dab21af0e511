/**
 * The benchmark harness: `npm run bench` (full) or `npm run bench -- --quick` (under 3 minutes).
 *
 * Each comparison module runs in its own child process (its own process group), so a crash, a hang
 * or a leaked server in one cannot spoil the others: the harness kills the group when the module
 * ends or overruns its time budget. Results go to bench/results/latest.json, docs/benchmarks.md and
 * docs/benchmarks.svg. A module that fails or is missing becomes a row with met = null and the reason;
 * the harness itself never fails because a comparison did.
 *
 * Options: --quick, --only core,writes (comma list of keys), --no-write (print, do not write docs),
 * --profile (run each module's process, and the daemons and servers it starts through bench/util.ts, with
 *   --cpu-prof into $TMPDIR/mdvfs-bench-profiles/<key>/, and print each profile's top self times),
 * --budget-factor 2 (stretch the per-module time budgets on a loaded machine),
 * --render-only (rewrite docs/benchmarks.{md,svg} from bench/results/latest.json),
 * --merge (keep the last results of the modules not selected with --only, marked with their run).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { collectMeta, renderMarkdown, renderSvg, summarizeProfile, type ModuleResult, type Results } from './report.js';
import type { BenchFn, BenchTable } from './types.js';
import { ROOT_DIR, runCleanups } from './util.js';

interface ModuleSpec {
  key: string;
  file: string; // relative to bench/
  export: string;
  title: string; // used when the module cannot run
  quickBudgetS: number;
  fullBudgetS: number;
}

/** In report order. Budgets are caps; the quick ones add up to what fits in 3 minutes with the build. */
export const MODULES: ModuleSpec[] = [
  {
    key: 'core',
    file: 'core.ts',
    export: 'benchCore',
    title: 'Core operations in-process vs node:fs on tmpfs',
    quickBudgetS: 15,
    fullBudgetS: 300,
  },
  {
    key: 'writes',
    file: 'writes.ts',
    export: 'benchWrites',
    title: 'Group commit: small acknowledged writes',
    quickBudgetS: 20,
    fullBudgetS: 600,
  },
  {
    key: 'rest',
    file: 'http-rest.ts',
    export: 'benchRest',
    title: 'REST GET/PUT vs bare express 5 and node:http',
    quickBudgetS: 30,
    fullBudgetS: 600,
  },
  {
    key: 'workers',
    file: 'http-workers.ts',
    export: 'benchWorkers',
    title: 'HTTP workers: REST 4 KiB at c=32, 2 workers vs 1',
    quickBudgetS: 25,
    fullBudgetS: 300,
  },
  {
    key: 'scale',
    file: 'scale.ts',
    export: 'benchScale',
    title: 'Scaling: REST read/write mix vs tree size',
    quickBudgetS: 20,
    fullBudgetS: 600,
  },
  {
    key: 'mcp',
    file: 'mcp-stdio.ts',
    export: 'benchMcp',
    title: 'MCP stdio vs @modelcontextprotocol/server-filesystem',
    quickBudgetS: 25,
    fullBudgetS: 300,
  },
  {
    key: 'commit',
    file: 'commit.ts',
    export: 'benchCommit',
    title: 'Commit vs git commit',
    // the scoped-commit row and a log row that builds a history of commits first
    quickBudgetS: 45,
    fullBudgetS: 900,
  },
  {
    key: 'grep',
    file: 'grep.ts',
    export: 'benchGrep',
    title: 'grep vs GNU grep -rE',
    quickBudgetS: 15,
    fullBudgetS: 300,
  },
  {
    key: 'fuse',
    file: 'fuse.ts',
    export: 'benchFuse',
    title: 'FUSE mount vs tmpfs and bindfs',
    // With the real-life rows (git of 2,000 files, rsync of 1,000) on four targets (the mount in both
    // modes, disk, bindfs): ~47 s on a busy machine.
    quickBudgetS: 80,
    fullBudgetS: 1600,
  },
  {
    key: 'startup',
    file: 'startup.ts',
    export: 'benchStartup',
    title: 'Cold start and resident memory',
    quickBudgetS: 15,
    fullBudgetS: 600,
  },
  {
    key: 'recovery',
    file: 'recovery.ts',
    export: 'benchRecovery',
    title: 'kill -9 recovery',
    quickBudgetS: 20,
    fullBudgetS: 300,
  },
  {
    key: 'stall',
    file: 'stall.ts',
    export: 'benchStall',
    title: 'Stalls: worst latency of a small read while one heavy request runs',
    quickBudgetS: 60,
    fullBudgetS: 600,
  },
  {
    key: 'stall-pending',
    file: 'stall.ts',
    export: 'benchStallPending',
    title: 'Stalls with many pending changes: worst latency of a small read during status, diff and commit',
    quickBudgetS: 60,
    fullBudgetS: 900,
  },
  {
    key: 'postgres',
    file: 'postgres.ts',
    export: 'benchPostgres',
    title: 'PostgreSQL store: durable small writes, failover, standby lag, recovery after an outage',
    // a private cluster (initdb), then the failover rounds, each restarting a daemon as the standby,
    // then the client-visible failover through HTTP at 1k and 100k files (10k quick, building the
    // store first), then 10 s PostgreSQL stops (1 quick, 3 full)
    quickBudgetS: 240,
    fullBudgetS: 1800,
  },
];

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i >= 0) return args[i + 1];
  const eq = args.find((a) => a.startsWith(`${name}=`));
  return eq?.slice(name.length + 1);
}

function failedTable(spec: ModuleSpec, note: string): BenchTable {
  return {
    title: spec.title,
    rows: [{ name: spec.title, ours: null, baseline: null, unit: '', ratio: null, target: '—', met: null, note }],
  };
}

// ---------- child: run one module ----------

async function runChild(key: string, quick: boolean, out: string): Promise<void> {
  // Over budget, the harness sends SIGTERM to the module's process group: undo what util.ts set up
  // (temp dirs, servers) before going; SIGKILL follows 3 s later.
  process.once('SIGTERM', () => {
    void runCleanups().finally(() => process.exit(143));
  });
  const spec = MODULES.find((m) => m.key === key);
  let result: { tables: BenchTable[]; error?: string };
  try {
    if (!spec) throw new Error(`unknown module ${key}`);
    const mod = (await import(pathToFileURL(path.join(ROOT_DIR, 'bench', spec.file)).href)) as Record<string, unknown>;
    const fn = mod[spec.export];
    if (typeof fn !== 'function') throw new Error(`bench/${spec.file} does not export ${spec.export}()`);
    const r = await (fn as BenchFn)({ quick });
    result = { tables: Array.isArray(r) ? r : [r] };
  } catch (err) {
    result = { tables: [], error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  await runCleanups();
  writeFileSync(out, JSON.stringify(result));
}

// ---------- parent ----------

function runModule(
  spec: ModuleSpec,
  quick: boolean,
  profile: boolean,
  budgetS: number,
  cacheDir: string,
): Promise<ModuleResult> {
  const started = Date.now();
  const file = path.join(ROOT_DIR, 'bench', spec.file);
  if (!existsSync(file))
    return Promise.resolve({
      key: spec.key,
      seconds: 0,
      tables: [failedTable(spec, `not run: bench/${spec.file} does not exist yet`)],
    });
  const out = path.join(os.tmpdir(), `mdvfs-bench-${process.pid}-${spec.key}.json`);
  rmSync(out, { force: true });
  const nodeArgs = ['--import', 'tsx'];
  const env: NodeJS.ProcessEnv = { ...process.env, MDVFS_BENCH_CACHE: cacheDir };
  const profDir = path.join(os.tmpdir(), 'mdvfs-bench-profiles', spec.key);
  if (profile) {
    rmSync(profDir, { recursive: true, force: true });
    mkdirSync(profDir, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profDir}`);
    env.MDVFS_BENCH_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${profDir}`;
  }
  const args = [
    ...nodeArgs,
    path.join(ROOT_DIR, 'bench', 'run.ts'),
    '--child',
    spec.key,
    '--out',
    out,
    ...(quick ? ['--quick'] : []),
  ];
  return new Promise((resolve) => {
    // detached: the module gets its own process group, which we can kill as a whole.
    const child = spawn(process.execPath, args, {
      cwd: ROOT_DIR,
      detached: true,
      stdio: ['ignore', 'inherit', 'inherit'],
      env,
    });
    let timedOut = false;
    const killGroup = (sig: NodeJS.Signals): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, sig);
      } catch {
        // the group is already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), 3000).unref();
    }, budgetS * 1000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      // Anything the module left running (servers, daemons) goes with its group.
      setTimeout(() => killGroup('SIGKILL'), timedOut ? 3000 : 200).unref();
      const seconds = (Date.now() - started) / 1000;
      let tables: BenchTable[];
      if (timedOut)
        tables = [failedTable(spec, `not run: exceeded its ${budgetS} s budget${quick ? ' in --quick' : ''}`)];
      else if (!existsSync(out))
        tables = [failedTable(spec, `not run: module process exited (${code ?? signal}) without results`)];
      else {
        const r = JSON.parse(readFileSync(out, 'utf8')) as { tables: BenchTable[]; error?: string };
        tables = r.error !== undefined ? [failedTable(spec, `not run: ${r.error.split('\n')[0]}`)] : r.tables;
        if (r.error !== undefined) process.stderr.write(`bench ${spec.key}: ${r.error}\n`);
      }
      rmSync(out, { force: true });
      if (profile && existsSync(profDir)) {
        for (const f of readdirSync(profDir).filter((x) => x.endsWith('.cpuprofile'))) {
          try {
            process.stderr.write(`${summarizeProfile(path.join(profDir, f), 12).join('\n')}\n\n`);
          } catch {
            // a profile cut short by a kill: skip it
          }
        }
      }
      resolve({ key: spec.key, seconds, tables });
    });
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const child = argValue(args, '--child');
  if (child !== undefined) {
    await runChild(child, quick, argValue(args, '--out') ?? path.join(os.tmpdir(), `mdvfs-bench-${child}.json`));
    process.exit(0);
  }
  if (args.includes('--render-only')) {
    // Re-renders docs from the last results (after editing bench/findings.md), measuring nothing.
    const results = JSON.parse(readFileSync(path.join(ROOT_DIR, 'bench', 'results', 'latest.json'), 'utf8')) as Results;
    writeFileSync(path.join(ROOT_DIR, 'docs', 'benchmarks.svg'), renderSvg(results));
    writeFileSync(path.join(ROOT_DIR, 'docs', 'benchmarks.md'), renderMarkdown(results));
    return;
  }
  const only = argValue(args, '--only')?.split(',').filter(Boolean);
  const profile = args.includes('--profile');
  const noWrite = args.includes('--no-write');
  const started = new Date();
  const t0 = Date.now();
  // --quick: the whole run (after the build) must end well inside 3 minutes.
  // --budget-factor stretches every budget (for a loaded machine); the report's command line shows it.
  const factor = Number(argValue(args, '--budget-factor') ?? '1') || 1;
  const totalBudgetS = (quick ? 160 : 3 * 3600) * factor;
  const selected = MODULES.filter((m) => only === undefined || only.includes(m.key));
  const modules: ModuleResult[] = [];
  // Built stores shared by the modules (see buildStore), on tmpfs, removed at the end.
  const cacheDir = mkdtempSync(path.join(existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'mdvfs-bench-cache-'));
  process.on('exit', () => rmSync(cacheDir, { recursive: true, force: true }));
  // Time a module leaves unused carries over to the next ones (the total still caps the run).
  let carryS = 0;
  for (const spec of selected) {
    const left = totalBudgetS - (Date.now() - t0) / 1000;
    const own = (quick ? spec.quickBudgetS : spec.fullBudgetS) * factor;
    const budget = Math.min(own + carryS, Math.max(0, left));
    if (budget < 3) {
      modules.push({
        key: spec.key,
        seconds: 0,
        tables: [failedTable(spec, 'not run: the run had used its time budget')],
      });
      continue;
    }
    process.stderr.write(`bench: ${spec.key} (budget ${Math.round(budget)} s)...\n`);
    const r = await runModule(spec, quick, profile, budget, cacheDir);
    process.stderr.write(`bench: ${spec.key} done in ${r.seconds.toFixed(1)} s\n`);
    modules.push(r);
    carryS = Math.max(0, budget - r.seconds);
  }
  const extra = [
    ...(quick ? ['--quick'] : []),
    ...(factor !== 1 ? [`--budget-factor ${factor}`] : []),
    ...(only ? [`--only ${only.join(',')}`] : []),
    ...(args.includes('--merge') ? ['--merge'] : []),
  ];
  const command = `npm run bench${extra.length > 0 ? ` -- ${extra.join(' ')}` : ''}`;
  // --merge: modules not run this time keep their last results (marked with when and how they ran),
  // so that a quick run can sit beside full-size measurements of the slow comparisons.
  const latest = path.join(ROOT_DIR, 'bench', 'results', 'latest.json');
  let shown = modules;
  if (args.includes('--merge') && existsSync(latest)) {
    const prev = JSON.parse(readFileSync(latest, 'utf8')) as Results;
    shown = MODULES.flatMap((spec) => {
      const now = modules.find((x) => x.key === spec.key);
      if (now) return [now];
      const old = prev.modules.find((x) => x.key === spec.key);
      return old
        ? [
            {
              ...old,
              from: old.from ?? { date: prev.date, command: prev.command, quick: prev.quick, commit: prev.meta.commit },
            },
          ]
        : [];
    });
  }
  const results: Results = {
    date: started.toISOString(),
    command,
    quick,
    seconds: (Date.now() - t0) / 1000,
    meta: collectMeta(),
    modules: shown,
  };
  const md = renderMarkdown(results);
  if (noWrite) {
    process.stdout.write(md);
    return;
  }
  mkdirSync(path.join(ROOT_DIR, 'bench', 'results'), { recursive: true });
  mkdirSync(path.join(ROOT_DIR, 'docs'), { recursive: true });
  writeFileSync(path.join(ROOT_DIR, 'bench', 'results', 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(path.join(ROOT_DIR, 'docs', 'benchmarks.svg'), renderSvg(results));
  writeFileSync(path.join(ROOT_DIR, 'docs', 'benchmarks.md'), md);
  process.stderr.write(
    `bench: wrote docs/benchmarks.md, docs/benchmarks.svg, bench/results/latest.json in ${results.seconds.toFixed(0)} s\n`,
  );
}

main().catch((err: unknown) => {
  // A comparison's failure never gets here (it becomes a row); this is the harness itself failing.
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
