/**
 * Commit of one changed file in a large tree: mdvfs (`vcs.commit` over the socket, default
 * SERVICE_FSYNC=full, data dir on tmpfs) vs `git add -A && git commit` of the same change in a git
 * repository of the same files on tmpfs. Each repetition changes one file on both sides first
 * (untimed) and then times the commit alone.
 */
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import type { BenchTable } from './types.js';
import { buildStore, compareRow, errorRow, filePath, log, nowMs, paired, shmDir, startDaemonProc } from './util.js';

const SIZE = 1024;

/** The content `populate` (bench/util.ts) gives file number `i`, so both sides hold the same files. */
function content(i: number): Buffer {
  const b = Buffer.alloc(SIZE, 'abcdefghijklmnopqrstuvwxyz\n'.repeat(Math.ceil(SIZE / 27)));
  b.write(`# file ${i}\n`, 0);
  return b;
}

const gitEnv = (cwd: string): NodeJS.ProcessEnv => ({
  ...process.env,
  GIT_AUTHOR_NAME: 'bench',
  GIT_AUTHOR_EMAIL: 'bench@example.invalid',
  GIT_COMMITTER_NAME: 'bench',
  GIT_COMMITTER_EMAIL: 'bench@example.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: cwd,
});

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', args, { cwd, stdio: 'ignore', env: gitEnv(cwd) });
}

const gitAsync = (cwd: string, ...args: string[]): Promise<unknown> =>
  promisify(execFile)('git', args, { cwd, env: gitEnv(cwd), maxBuffer: 1 << 20 });

/** The same files as the store, in a git repository with one initial commit; returns the time of that commit. */
async function buildRepo(repo: string, count: number): Promise<number> {
  for (let d = 0; d * 1000 < count; d++)
    await mkdir(path.join(repo, path.dirname(filePath('', d * 1000))), { recursive: true });
  for (let i = 0; i < count; i += 256) {
    const batch: Promise<void>[] = [];
    for (let k = i; k < Math.min(count, i + 256); k++)
      batch.push(writeFile(path.join(repo, filePath('', k)), content(k)));
    await Promise.all(batch);
  }
  await gitAsync(repo, 'init', '-q');
  await gitAsync(repo, 'config', 'core.fsync', 'none');
  const t0 = nowMs();
  await gitAsync(repo, 'add', '-A');
  await gitAsync(repo, 'commit', '-q', '-m', 'initial');
  return nowMs() - t0;
}

export async function benchCommit(opts: { quick: boolean }): Promise<BenchTable> {
  const count = opts.quick ? 10_000 : 100_000;
  const title = 'Commit of 1 changed file vs git commit';
  const name = `commit 1 changed file in a ${count.toLocaleString('en-US')}-file tree`;
  try {
    log(`commit: building a ${count}-file store and a git repository of the same files`);
    const repo = path.join(shmDir('mdvfs-bench-git-'), 'repo');
    // built side by side (the store by a daemon process, the repository by git processes)
    const [dataDir, initialGit] = await Promise.all([buildStore(count, SIZE), buildRepo(repo, count)]);
    log('commit: built; starting the daemon');
    const d = await startDaemonProc(dataDir);
    const root = d.client.as({});
    const t0 = nowMs();
    await root.call('vcs.commit', { message: 'initial' });
    const initialOurs = nowMs() - t0;

    // Each side changes its own copy of file k, then commits; the change is untimed.
    let oursRep = 0;
    let gitRep = 0;
    const pick = (rep: number): number => (rep * 7919) % count;
    const change = (i: number, rep: number): Buffer => Buffer.concat([content(i), Buffer.from(`edit ${rep}\n`)]);
    const r = await paired({
      warmup: 1,
      reps: opts.quick ? 5 : 9,
      ours: async () => {
        const rep = oursRep++;
        const i = pick(rep);
        await root.call('fs.write', { path: filePath('/bench', i) }, { data: change(i, rep) });
        const s = nowMs();
        const c = await root.call('vcs.commit', { message: `edit ${rep}` });
        const ms = nowMs() - s;
        if (c.changes !== 1) throw new Error(`expected 1 change, the commit recorded ${c.changes}`);
        return ms;
      },
      baseline: async () => {
        const rep = gitRep++;
        const i = pick(rep);
        writeFileSync(path.join(repo, filePath('', i)), change(i, rep));
        const s = nowMs();
        git(repo, 'add', '-A');
        git(repo, 'commit', '-q', '-m', `edit ${rep}`);
        return nowMs() - s;
      },
    });
    await d.stop();
    const files = `${count.toLocaleString('en-US')} files of 1 KiB in ${count / 1000} directories of 1,000`;
    return {
      title,
      rows: [
        compareRow({
          name,
          unit: 'ms',
          better: 'lower',
          ours: r.ours,
          baseline: r.baseline,
          target: 10,
          note: `${files}, both on tmpfs; ours = one vcs.commit round trip over the socket (durable, SERVICE_FSYNC=full); baseline = git add -A + git commit (core.fsync none); ${r.oursAll.length} paired reps`,
        }),
        compareRow({
          name: `first commit of the whole ${count.toLocaleString('en-US')}-file tree`,
          unit: 'ms',
          better: 'lower',
          ours: initialOurs,
          baseline: initialGit,
          note: 'one run each (informational): hashes every directory',
        }),
      ],
    };
  } catch (err) {
    return { title, rows: [errorRow(name, err)] };
  }
}
