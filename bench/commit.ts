/**
 * Commit of one changed file in a large tree: mdvfs (`vcs.commit` over the socket, default
 * SERVICE_FSYNC=full, data dir on tmpfs) vs `git add -A && git commit` of the same change in a git
 * repository of the same files on tmpfs. Each repetition changes one file on both sides first
 * (untimed) and then times the commit alone. Then a non-admin's scoped commit while others have
 * pending changes (vs `git commit -- <path>`), and the log of one file in a long history (vs
 * `git log -- <path>`).
 */
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import type { BenchRow, BenchTable } from './types.js';
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
    const scoped = await scopedCommit(d, repo, count, opts.quick);
    await d.stop();
    const logRow = await logOfOneFile(opts.quick);
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
        compareRow({
          name: `scoped commit of 1 file by a non-admin while ${OTHERS} others' changes are pending (${count.toLocaleString('en-US')}-file tree)`,
          unit: 'ms',
          better: 'lower',
          ours: scoped.ours,
          baseline: scoped.baseline,
          target: 10,
          note: `ours = alice's vcs.commit (takes only what she may read: lists the pending changes, grafts her one change onto HEAD); baseline = git commit -- <that file> with ${OTHERS} other modified files in the work tree; ${scoped.reps} paired reps`,
        }),
        logRow,
      ],
    };
  } catch (err) {
    return { title, rows: [errorRow(name, err)] };
  }
}

/** Files others changed (private to them) and did not commit while alice commits hers (the scoped-commit row). */
const OTHERS = 100;

/**
 * A non-admin's commit in a tree where others have pending changes: root leaves OTHERS files of
 * the tree changed (untimed), alice changes one file in her home and commits (timed). git's
 * nearest equivalent is a commit limited to a path while other files are modified.
 */
async function scopedCommit(
  d: Awaited<ReturnType<typeof startDaemonProc>>,
  repo: string,
  count: number,
  quick: boolean,
): Promise<{ ours: number; baseline: number; reps: number }> {
  const root = d.client.as({});
  await root.call('admin.userAdd', { name: 'alice' });
  await root.call('vcs.commit', { message: 'alice joins' }); // her home, so her commits take only her file
  const alice = d.client.as({ authorization: 'User alice' });
  for (let k = 0; k < OTHERS; k++) {
    const i = (k * 104729) % count;
    await root.call(
      'fs.write',
      { path: filePath('/bench', i) },
      { data: Buffer.concat([content(i), Buffer.from('pending\n')]) },
    );
    // private: alice may not read them, so they stay pending for root
    await root.call('fs.chmod', { path: filePath('/bench', i), mode: '0600' });
    writeFileSync(path.join(repo, filePath('', i)), Buffer.concat([content(i), Buffer.from('pending\n')]));
  }
  await mkdir(path.join(repo, 'alice'), { recursive: true });
  let oursRep = 0;
  let gitRep = 0;
  const r = await paired({
    warmup: 1,
    reps: quick ? 5 : 9,
    ours: async () => {
      const rep = oursRep++;
      await alice.call('fs.write', { path: 'notes.md' }, { data: Buffer.from(`alice ${rep}\n`) });
      const s = nowMs();
      const c = await alice.call('vcs.commit', { message: `alice ${rep}` });
      const ms = nowMs() - s;
      if (c.changes !== 1) throw new Error(`expected 1 change in alice's commit, it recorded ${c.changes}`);
      return ms;
    },
    baseline: async () => {
      const rep = gitRep++;
      writeFileSync(path.join(repo, 'alice', 'notes.md'), `alice ${rep}\n`);
      const s = nowMs();
      git(repo, 'add', '--', 'alice/notes.md');
      git(repo, 'commit', '-q', '-m', `alice ${rep}`, '--', 'alice/notes.md');
      return nowMs() - s;
    },
  });
  return { ours: r.ours, baseline: r.baseline, reps: r.oursAll.length };
}

/**
 * `vcs.log {path}` for a file changed by every 10th commit of a long history, vs `git log -- <path>`
 * on the same history (built with git fast-import). Both list every commit of the file.
 */
async function logOfOneFile(quick: boolean): Promise<BenchRow> {
  const commits = quick ? 1_000 : 10_000;
  const every = 10;
  const name = `log of one file with ${(commits / every).toLocaleString('en-US')} commits in a ${commits.toLocaleString('en-US')}-commit history`;
  try {
    log(`commit: building a ${commits}-commit history on both sides`);
    const dataDir = path.join(shmDir('mdvfs-bench-log-'), 'data');
    const d = await startDaemonProc(dataDir, { SERVICE_FSYNC: 'off' });
    const root = d.client.as({});
    const file = (n: number): string => (n % every === 0 ? 'log/target.md' : `log/other-${n % 50}.md`);
    const stream: string[] = [];
    for (let n = 0; n < commits; n++) {
      const body = `commit ${n}\n`;
      await root.call('fs.write', { path: '/' + file(n) }, { data: Buffer.from(body) });
      await root.call('vcs.commit', { message: `c${n}` });
      stream.push(
        `commit refs/heads/main\ncommitter bench <bench@example.invalid> ${1700000000 + n} +0000\ndata ${`c${n}`.length}\nc${n}\n` +
          `M 100644 inline ${file(n)}\ndata ${Buffer.byteLength(body)}\n${body}\n`,
      );
    }
    const repo = path.join(shmDir('mdvfs-bench-log-git-'), 'repo');
    await mkdir(repo, { recursive: true });
    git(repo, 'init', '-q', '-b', 'main');
    execFileSync('git', ['fast-import', '--quiet'], {
      cwd: repo,
      input: stream.join(''),
      env: gitEnv(repo),
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    git(repo, 'checkout', '-q', 'main');
    let count = 0;
    const r = await paired({
      warmup: 1,
      reps: quick ? 5 : 9,
      ours: async () => {
        const s = nowMs();
        const l = await root.call('vcs.log', { path: '/log/target.md' });
        const ms = nowMs() - s;
        count = l.commits.length;
        return ms;
      },
      baseline: async () => {
        const s = nowMs();
        execFileSync('git', ['log', '--format=%H %s', '--', 'log/target.md'], {
          cwd: repo,
          env: gitEnv(repo),
          stdio: 'ignore',
        });
        return nowMs() - s;
      },
    });
    await d.stop();
    if (count !== commits / every) throw new Error(`vcs.log listed ${count} commits, expected ${commits / every}`);
    const row = compareRow({
      name,
      unit: 'ms',
      better: 'lower',
      ours: r.ours,
      baseline: r.baseline,
      targetText: '< 50 ms',
      note: `ours = one vcs.log {path} round trip (all ${count} commits); baseline = git log --format='%H %s' -- <path> (a process); history of ${commits.toLocaleString('en-US')} commits each changing one of 51 files; ${r.oursAll.length} paired reps`,
    });
    return { ...row, met: r.ours < 50 };
  } catch (err) {
    return errorRow(name, err);
  }
}
