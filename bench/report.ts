/**
 * Turns benchmark results into `docs/benchmarks.md` and the ratio chart `docs/benchmarks.svg`,
 * gathers the machine description for `bench/results/latest.json`, and summarises `--cpu-prof`
 * profiles (`node --import tsx bench/report.ts --profile <file.cpuprofile> [top]`).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BenchRow, BenchTable } from './types.js';
import { ROOT_DIR, targetValue } from './util.js';

export interface ModuleResult {
  key: string;
  seconds: number;
  tables: BenchTable[];
  /** Set on modules kept from an earlier run by `--merge`: when and how they were measured. */
  from?: { date: string; command: string; quick: boolean; commit?: string };
}

export interface Meta {
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  kernel: string;
  os: string;
  commit: string;
  dirty: boolean;
  libraries: Record<string, string>;
  tools: Record<string, string>;
}

export interface Results {
  date: string;
  command: string;
  quick: boolean;
  seconds: number;
  meta: Meta;
  modules: ModuleResult[];
}

// ---------- machine description ----------

function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, {
      cwd: ROOT_DIR,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    }).trim();
  } catch {
    return 'unavailable';
  }
}

function installedVersion(name: string): string {
  const file = path.join(ROOT_DIR, 'node_modules', ...name.split('/'), 'package.json');
  if (!existsSync(file)) return 'not installed';
  return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? 'unknown';
}

export function collectMeta(): Meta {
  const pkg = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const libraries: Record<string, string> = {};
  for (const name of [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})].sort())
    libraries[name] = installedVersion(name);
  const firstLine = (s: string): string => s.split('\n')[0] ?? s;
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    kernel: run('uname', ['-r']),
    os: firstLine(run('sh', ['-c', '. /etc/os-release && echo "$PRETTY_NAME"'])),
    commit: run('git', ['rev-parse', 'HEAD']),
    dirty: run('git', ['status', '--porcelain', '--untracked-files=no']) !== '',
    libraries,
    tools: {
      git: firstLine(run('git', ['--version'])),
      grep: firstLine(run('grep', ['--version'])),
      bindfs: firstLine(run('bindfs', ['--version'])),
      sqlite: installedVersion('better-sqlite3'),
    },
  };
}

// ---------- why a target is not met ----------

/**
 * What profiling found for targets that are not met, and what would fix them. Matched by module key
 * and a pattern on the row name; the report prints it under "Targets not met" whenever such a row
 * misses its target. Keep it to findings backed by a profile (see "Profiling" in the report).
 */
export interface Analysis {
  module: string;
  row: RegExp;
  title: string;
  reason: string;
  fix: string;
  /** The top self-time lines of the profile the reason comes from (summarizeProfile output). */
  profile?: string[];
}

/** An informational finding (a row without a target), printed whenever its module produced numbers. */
interface Observation {
  module: string;
  title: string;
  text: string;
  profile?: string[];
}

/**
 * The findings, read from bench/findings.md (prose lives there, not in code). Each `## analysis
 * <module> /<pattern>/` or `## observation <module>` section has a `### title`, its paragraphs (one
 * per line; an analysis has `Reason: ` and `Fix: ` ones) and an optional ```profile block.
 */
function readFindings(text: string): { analysis: Analysis[]; observations: Observation[] } {
  const analysis: Analysis[] = [];
  const observations: Observation[] = [];
  for (const section of text.split(/^## /m).slice(1)) {
    const lines = section.split('\n');
    const head = /^(analysis|observation) (\S+)(?: \/(.*)\/)?$/.exec(lines[0]!.trim());
    if (head === null) throw new Error(`bench/findings.md: cannot read the section '${lines[0]!}'`);
    let title = '';
    const paragraphs: string[] = [];
    let profile: string[] | undefined;
    let inProfile = false;
    for (const line of lines.slice(1)) {
      if (inProfile) {
        if (line === '```') inProfile = false;
        else profile!.push(line);
      } else if (line === '```profile') {
        inProfile = true;
        profile = [];
      } else if (line.startsWith('### ')) title = line.slice(4);
      else if (line.trim() !== '') paragraphs.push(line);
    }
    const withProfile = <T extends object>(x: T): T => (profile === undefined ? x : { ...x, profile });
    if (head[1] === 'observation') {
      observations.push(withProfile({ module: head[2]!, title, text: paragraphs.join(' ') }));
    } else {
      const field = (name: string): string =>
        (paragraphs.find((p) => p.startsWith(`${name}: `)) ?? '').slice(name.length + 2);
      analysis.push(
        withProfile({
          module: head[2]!,
          row: new RegExp(head[3] ?? ''),
          title,
          reason: field('Reason'),
          fix: field('Fix'),
        }),
      );
    }
  }
  return { analysis, observations };
}

const FINDINGS = readFindings(readFileSync(new URL('./findings.md', import.meta.url), 'utf8'));

export const ANALYSIS: Analysis[] = FINDINGS.analysis;

/** Same rule as ANALYSIS: only what a profile or a measurement showed. */
const OBSERVATIONS: Observation[] = FINDINGS.observations;

function fmt(x: number | null): string {
  if (x === null || !Number.isFinite(x)) return '—';
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function metCell(r: BenchRow): string {
  if (r.met === true) return '✅ yes';
  if (r.met === false) return '❌ no';
  return r.note?.startsWith('not run') || r.note?.startsWith('error') ? '⚠️ not run' : '—';
}

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

export function renderMarkdown(res: Results): string {
  const m = res.meta;
  const out: string[] = [];
  out.push('# Benchmarks', '');
  out.push('<!-- Generated by bench/run.ts (bench/report.ts). Do not edit by hand: run the command below. -->', '');
  out.push(`- Command: \`${res.command}\` (from the repository root; it builds first)`);
  out.push(
    `- Date: ${res.date} (${res.seconds.toFixed(0)} s)${res.quick ? ' — quick mode (a smoke test): smaller trees and counts, and REST and FUSE at one repetition to fit 3 minutes; the full run has at least 5 paired repetitions everywhere' : ''}`,
  );
  const kept = [
    ...new Map(
      res.modules.filter((x) => x.from !== undefined).map((x) => [`${x.from!.command} at ${x.from!.date}`, x.from!]),
    ).entries(),
  ];
  for (const [k, f] of kept) {
    const keys = res.modules
      .filter((x) => x.from !== undefined && `${x.from.command} at ${x.from.date}` === k)
      .map((x) => `\`${x.key}\``);
    out.push(
      `- Also shown, kept from an earlier run of this harness (\`--merge\`): ${keys.join(', ')} from \`${f.command}\` at ${f.date}${f.quick ? '' : ' (full sizes)'}${f.commit === undefined ? '' : `, commit \`${f.commit.slice(0, 12)}\``}`,
    );
  }
  out.push(
    `- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB RAM; ${m.os}; kernel ${m.kernel}; Node ${m.node}`,
  );
  out.push(`- Commit: \`${m.commit.slice(0, 12)}\`${m.dirty ? ' (with uncommitted changes)' : ''}`);
  out.push(`- Tools: ${m.tools.git}; ${m.tools.grep}; ${m.tools.bindfs}; better-sqlite3 ${m.tools.sqlite}`);
  out.push(
    `- Libraries: ${Object.entries(m.libraries)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  out.push('');
  out.push('How to read: every comparison runs warm-up rounds, then at least 5 paired repetitions that alternate');
  out.push('which side goes first; the tables show the median of each side. **ratio** is oriented so that higher is');
  out.push('better for mdvfs (baseline time ÷ our time, or our rate ÷ baseline rate); **target** is the threshold');
  out.push('that ratio must reach. Each module runs in its own process; a module that fails or is missing shows up');
  out.push('as a row with the reason instead of numbers. Full machine data: `bench/results/latest.json`.');
  out.push('');
  out.push('![ratio vs target per comparison (log scale)](benchmarks.svg)', '');

  const notMet: { area: string; key: string; row: BenchRow }[] = [];
  const notRun: { area: string; row: BenchRow }[] = [];
  for (const mod of res.modules) {
    for (const t of mod.tables) {
      out.push(`## ${t.title}`, '');
      out.push('| comparison | mdvfs | baseline | unit | ratio | target | met | notes |');
      out.push('|---|---:|---:|---|---:|---|---|---|');
      for (const r of t.rows) {
        out.push(
          `| ${cell(r.name)} | ${fmt(r.ours)} | ${fmt(r.baseline)} | ${cell(r.unit)} | ${r.ratio === null ? '—' : `${fmt(r.ratio)}×`} | ${cell(r.target)} | ${metCell(r)} | ${cell(r.note ?? '')} |`,
        );
        if (r.met === false) notMet.push({ area: t.title, key: mod.key, row: r });
        if (r.met === null && (r.note?.startsWith('not run') || r.note?.startsWith('error')))
          notRun.push({ area: t.title, row: r });
      }
      const when = mod.from === undefined ? 'this run' : `kept from \`${mod.from.command}\` at ${mod.from.date}`;
      out.push('', `<sub>module \`${mod.key}\`, ${mod.seconds.toFixed(1)} s, ${when}</sub>`, '');
    }
  }

  out.push('## Targets not met', '');
  const used: Analysis[] = [];
  if (notMet.length === 0) out.push('None in this run.', '');
  else {
    out.push('| comparison | area | ratio | target | why |', '|---|---|---:|---|---|');
    for (const { area, key, row } of notMet) {
      const a = ANALYSIS.find((x) => x.module === key && x.row.test(row.name));
      if (a && !used.includes(a)) used.push(a);
      const why = a ? `finding ${used.indexOf(a) + 1}` : 'not profiled yet';
      out.push(`| ${cell(row.name)} | ${cell(area)} | ${fmt(row.ratio)}× | ${cell(row.target)} | ${why} |`);
    }
    out.push('');
    used.forEach((a, i) => {
      out.push(`### Finding ${i + 1}: ${a.title}`, '');
      out.push(`**Why (profile):** ${a.reason}`, '');
      out.push(`**Fix:** ${a.fix}`, '');
      if (a.profile !== undefined && a.profile.length > 0) out.push('```text', ...a.profile, '```', '');
    });
  }
  const ran = new Set(
    res.modules.filter((mod) => mod.tables.some((t) => t.rows.some((r) => r.ours !== null))).map((mod) => mod.key),
  );
  // A module whose finding is already printed above does not repeat it here.
  const obs = OBSERVATIONS.filter(
    (o) => ran.has(o.module) && !used.some((a) => a.module === o.module && a.reason.includes(o.text.slice(0, 40))),
  );
  if (obs.length > 0) {
    out.push('## Other findings (rows without a target)', '');
    for (const o of obs) {
      out.push(`- **${o.title}**: ${o.text}`);
      if (o.profile !== undefined) out.push('', '    ```text', ...o.profile.map((l) => `    ${l}`), '    ```', '');
    }
    out.push('');
  }
  if (notRun.length > 0) {
    out.push('## Comparisons that did not run', '');
    for (const { area, row } of notRun)
      out.push(`- ${row.name === area ? area : `${area} — ${row.name}`}: ${row.note ?? ''}`);
    out.push('');
  }
  out.push('## Profiling', '');
  out.push(
    '`npm run bench -- --only <key> --profile` runs one module with `node --cpu-prof`, together with every daemon and',
  );
  out.push(
    'server it starts through `bench/util.ts` (they write their profiles when they are stopped with SIGTERM), and prints',
  );
  out.push('the functions with the most self time of each profile (files in `$TMPDIR/mdvfs-bench-profiles/<key>/`).');
  out.push(
    '`node --import tsx bench/report.ts --profile <file.cpuprofile>` summarises any one profile. The findings above come',
  );
  out.push(
    'from `node --import tsx bench/profile.ts [scenario...]` (after `npm run build`), which runs the workloads behind them',
  );
  out.push(
    '(rest-get-c1, rest-get-c32, rest-put-c32, mcp-read, fuse-create, fuse-warm, fuse-rm, daemon-mutation, startup) with the daemon, the HTTP sidecar,',
  );
  out.push(
    "the FUSE mount and the stdio MCP server each under `--cpu-prof`, and prints every process's idle share and top self times.",
  );
  out.push(
    "The findings' text lives in `bench/findings.md`; `npm run bench -- --render-only` re-renders this page from the last results after editing it.",
  );
  out.push('Module keys: ' + res.modules.map((x) => `\`${x.key}\``).join(', ') + '.', '');
  return `${out.join('\n')}\n`;
}

// ---------- SVG chart ----------

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Horizontal bars of each row's ratio on a log scale, with the target as a tick and parity (1×) as a line. */
export function renderSvg(res: Results): string {
  const items: ({ kind: 'head'; text: string } | { kind: 'row'; row: BenchRow })[] = [];
  for (const mod of res.modules) {
    for (const t of mod.tables) {
      const rows = t.rows.filter(
        (r) => r.ratio !== null || r.note?.startsWith('not run') === true || r.note?.startsWith('error') === true,
      );
      if (rows.length === 0) continue;
      items.push({ kind: 'head', text: t.title });
      for (const r of rows) items.push({ kind: 'row', row: r });
    }
  }
  const W = 1000;
  const labelW = 440;
  const plotX = labelW + 10;
  const plotW = W - plotX - 70;
  const lo = Math.log10(0.01);
  const hi = Math.log10(1000);
  const x = (v: number): number => plotX + ((Math.log10(Math.min(1000, Math.max(0.01, v))) - lo) / (hi - lo)) * plotW;
  const rowH = 20;
  const top = 50;
  const height = top + items.length * rowH + 40;
  const s: string[] = [];
  s.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="11">`,
  );
  s.push(`<rect width="${W}" height="${height}" fill="#ffffff"/>`);
  s.push(
    `<text x="10" y="20" font-size="14" font-weight="bold">mdvfs vs baselines: ratio (higher is better for mdvfs), log scale; black tick = target</text>`,
  );
  s.push(
    `<text x="10" y="36" fill="#555">${esc(`${res.command} · ${res.date} · ${res.meta.cpu}, ${res.meta.cores} cores · Node ${res.meta.node}`)}</text>`,
  );
  for (const g of [0.01, 0.1, 1, 10, 100, 1000]) {
    const gx = x(g);
    s.push(
      `<line x1="${gx.toFixed(1)}" y1="${top - 6}" x2="${gx.toFixed(1)}" y2="${height - 30}" stroke="${g === 1 ? '#333' : '#ddd'}" stroke-width="${g === 1 ? 1.2 : 1}"${g === 1 ? ' stroke-dasharray="4 3"' : ''}/>`,
    );
    s.push(`<text x="${gx.toFixed(1)}" y="${height - 16}" text-anchor="middle" fill="#555">${g}×</text>`);
  }
  items.forEach((it, i) => {
    const y = top + i * rowH;
    if (it.kind === 'head') {
      s.push(
        `<text x="10" y="${y + 14}" font-weight="bold">${esc(it.text.length > 110 ? `${it.text.slice(0, 107)}...` : it.text)}</text>`,
      );
      return;
    }
    const r = it.row;
    const name = r.name.length > 68 ? `${r.name.slice(0, 65)}...` : r.name;
    s.push(`<text x="${labelW}" y="${y + 14}" text-anchor="end">${esc(name)}</text>`);
    if (r.ratio === null) {
      s.push(
        `<text x="${plotX + 4}" y="${y + 14}" fill="#999">${esc(r.note?.startsWith('not run') || r.note?.startsWith('error') ? 'not run' : 'no ratio')}</text>`,
      );
      return;
    }
    const color = r.met === true ? '#2e8b57' : r.met === false ? '#c0392b' : '#7f8c8d';
    const w = Math.max(1, x(r.ratio) - plotX);
    s.push(
      `<rect x="${plotX}" y="${y + 4}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${color}"><title>${esc(`${r.name}: ${r.ratio}× (target ${r.target})`)}</title></rect>`,
    );
    s.push(`<text x="${(plotX + w + 4).toFixed(1)}" y="${y + 14}" fill="#333">${esc(fmt(r.ratio))}×</text>`);
    const tv = targetValue(r.target);
    if (Number.isFinite(tv) && tv > 0) {
      const tx = x(tv);
      s.push(
        `<line x1="${tx.toFixed(1)}" y1="${y + 1}" x2="${tx.toFixed(1)}" y2="${y + rowH - 1}" stroke="#000" stroke-width="2"/>`,
      );
    }
  });
  s.push('</svg>');
  return `${s.join('\n')}\n`;
}

// ---------- CPU profiles ----------

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

/** The functions with the most self time in a `.cpuprofile`, as text lines. */
export function summarizeProfile(file: string, top = 15): string[] {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    startTime: number;
    endTime: number;
    samples?: number[];
  };
  const totalHits = prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0) || 1;
  const byFn = new Map<string, number>();
  for (const n of prof.nodes) {
    const url = n.callFrame.url.replace(/^file:\/\//, '').replace(`${ROOT_DIR}/`, '');
    const key =
      `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url.split('/node_modules/').pop()}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
    byFn.set(key, (byFn.get(key) ?? 0) + (n.hitCount ?? 0));
  }
  const ms = (prof.endTime - prof.startTime) / 1000;
  const lines = [`${path.basename(file)}: ${ms.toFixed(0)} ms, ${totalHits} samples`];
  for (const [k, v] of [...byFn.entries()].sort((a, b) => b[1] - a[1]).slice(0, top))
    lines.push(`${((v / totalHits) * 100).toFixed(1).padStart(5)}%  ${k}`);
  return lines;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const i = process.argv.indexOf('--profile');
  const file = i >= 0 ? process.argv[i + 1] : undefined;
  if (file === undefined) {
    process.stderr.write('usage: node --import tsx bench/report.ts --profile <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarizeProfile(file, Number(process.argv[i + 2] ?? 15)).join('\n')}\n`);
}
