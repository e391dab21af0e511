/**
 * grep of a selective regex over a markdown corpus: mdvfs (`search.grep` recursive over the socket)
 * vs GNU `grep -rnE` over the same files on tmpfs. Both sides must report the same matches.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { BenchTable } from './types.js';
import { compareRow, errorRow, log, nowMs, paired, shmDir, startDaemonProc } from './util.js';

const WORDS =
  'the of and to in is that for it as with was on be by this are from at or an which have not but had they his were can all one there their has been more will would other when what some time into about than only its them these may first new also any used two then could after most such where over each because made very'.split(
    ' ',
  );
const PATTERN = 'TODO\\((alice|bob)\\): fix #[0-9]{3,4}\\b';

/** A deterministic pseudo-random generator (xorshift32), so every run greps the same corpus. */
function rng(seed: number): () => number {
  let x = seed | 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
}

/** About 4 KiB of markdown; one file in 200 carries the needle once. */
function doc(i: number): string {
  const r = rng(i + 1);
  const word = () => WORDS[Math.floor(r() * WORDS.length)]!;
  const sentence = () => {
    const n = 6 + Math.floor(r() * 12);
    const w = Array.from({ length: n }, word);
    w[0] = w[0]!.charAt(0).toUpperCase() + w[0]!.slice(1);
    return w.join(' ') + '.';
  };
  const lines: string[] = [`# Note ${i}`, ''];
  let bytes = 0;
  let k = 0;
  while (bytes < 4000) {
    const kind = k++ % 5;
    const block =
      kind === 0
        ? `## Section ${k}`
        : kind === 3
          ? `- ${sentence()}\n- ${sentence()}`
          : kind === 4
            ? '```\nconst x = ' + Math.floor(r() * 1000) + ';\n```'
            : `${sentence()} ${sentence()} ${sentence()}`;
    lines.push(block, '');
    bytes += block.length + 2;
  }
  if (i % 200 === 7)
    lines.splice(4, 0, `TODO(${i % 400 === 7 ? 'alice' : 'bob'}): fix #${1000 + (i % 9000)} before release`);
  return lines.join('\n');
}

export async function benchGrep(opts: { quick: boolean }): Promise<BenchTable> {
  const count = opts.quick ? 2000 : 10000;
  const title = 'grep vs GNU grep -rE';
  const name = `grep a selective regex over ${count.toLocaleString('en-US')} markdown files`;
  try {
    const dir = path.join(shmDir('mdvfs-bench-grep-'), 'corpus');
    const dataDir = path.join(shmDir('mdvfs-bench-grep-data-'), 'data');
    // Building with SERVICE_FSYNC=off changes only how fast the store fills, not what is stored.
    const d = await startDaemonProc(dataDir, { SERVICE_FSYNC: 'off' });
    const root = d.client.as({});
    log(`grep: writing ${count} files to the daemon and to tmpfs`);
    let bytes = 0;
    for (let s = 0; s < count; s += 256) {
      const batch: Promise<unknown>[] = [];
      for (let i = s; i < Math.min(count, s + 256); i++) {
        const rel = `d${String(Math.floor(i / 500)).padStart(2, '0')}/n${String(i).padStart(5, '0')}.md`;
        const body = Buffer.from(doc(i));
        bytes += body.length;
        if (i % 500 === 0) await mkdir(path.join(dir, path.dirname(rel)), { recursive: true });
        batch.push(
          writeFile(path.join(dir, rel), body),
          root.call('fs.write', { path: `/corpus/${rel}` }, { data: body }),
        );
      }
      await Promise.all(batch);
    }

    const ours = async (): Promise<number> => {
      const t0 = nowMs();
      const r = await root.call('search.grep', {
        pattern: PATTERN,
        path: '/corpus',
        recursive: true,
        max_results: 100000,
      });
      const ms = nowMs() - t0;
      oursCount = r.count;
      return ms;
    };
    const gnu = async (): Promise<number> => {
      const t0 = nowMs();
      const out = await promisify(execFile)('grep', ['-rnE', PATTERN, dir], { maxBuffer: 64 << 20 });
      const ms = nowMs() - t0;
      gnuCount = out.stdout.split('\n').filter(Boolean).length;
      return ms;
    };
    let oursCount = -1;
    let gnuCount = -2;
    const r = await paired({ warmup: 1, reps: opts.quick ? 5 : 9, ours, baseline: gnu });
    await d.stop();
    if (oursCount !== gnuCount)
      throw new Error(`the two sides disagree: mdvfs found ${oursCount} matches, GNU grep ${gnuCount}`);
    return {
      title,
      rows: [
        compareRow({
          name,
          unit: 'ms',
          better: 'lower',
          ours: r.ours,
          baseline: r.baseline,
          target: 1,
          targetText: '≥ 1 (no slower)',
          note: `${(bytes / 1e6).toFixed(1)} MB in ${count / 500} directories, ${oursCount} matching lines; pattern /${PATTERN}/; ours = search.grep recursive over the socket (worker pool, warm); baseline = GNU grep -rnE on tmpfs (page cache warm, locale ${process.env.LC_ALL ?? process.env.LANG ?? 'default'}), process start included; ${r.oursAll.length} paired reps`,
        }),
      ],
    };
  } catch (err) {
    return { title, rows: [errorRow(name, err)] };
  }
}
