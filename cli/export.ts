/**
 * `mdvfs export <path> <hostdir>`: writes a subtree of the filesystem out to a host folder, byte
 * for byte. Security: names come from the daemon, which never allows '/', '.', '..' or NUL, and
 * they are checked again here; existing host symlinks in the way are replaced, never followed.
 * Security: no symlink is created that resolves outside the export directory, chained links
 * included (a -> b, b -> ../..): such links are skipped with a warning naming them.
 */
import { lstat, lutimes, mkdir, realpath, symlink, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { VfsError } from '../daemon/errors.js';
import { listAll } from '../daemon/rpc/listing.js';
import type { CmdContext } from './context.js';
import { errorLine } from './errors.js';
import { baseName } from './format.js';
import { Progress, pool } from './progress.js';

interface Job {
  src: string; // absolute path in the filesystem
  rel: string; // relative host path, '/'-separated
  kind: 'dir' | 'file' | 'symlink';
  mtime: string; // nanoseconds since the epoch, as the daemon gives them
  atime: string | undefined;
}

/** Seconds (with a fraction) for fs.utimes from the daemon's nanosecond strings. */
function seconds(ns: string): number {
  const n = BigInt(ns);
  return Number(n / 1_000_000_000n) + Number(n % 1_000_000_000n) / 1e9;
}

/** Gives a host copy the times it has in the filesystem (an unknown access time becomes the modification time). */
async function keepTimes(dst: string, j: Job): Promise<void> {
  const set = j.kind === 'symlink' ? lutimes : utimes;
  await set(dst, seconds(j.atime ?? j.mtime), seconds(j.mtime));
}

const CONCURRENCY = 16;

function safeName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
}

const MAX_LINKS = 40;

/**
 * Whether the link at `rel` (with `targets` for every exported link) resolves outside the exported
 * tree, resolving component by component as the kernel will on the host: through other links, with
 * `..` taken after each link, not lexically. A path that stops existing, crosses a file or loops
 * cannot be followed at all, so it cannot lead outside either.
 */
function escapesTree(
  rel: string,
  kinds: ReadonlyMap<string, Job['kind']>,
  targets: ReadonlyMap<string, string>,
): boolean {
  const dir = rel.split('/').slice(0, -1);
  const first = targets.get(rel);
  if (first === undefined) return false;
  if (first.startsWith('/')) return true;
  let queue = first.split('/');
  let hops = 0;
  while (queue.length > 0) {
    const c = queue.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (dir.length === 0) return true;
      dir.pop();
      continue;
    }
    const here = [...dir, c].join('/');
    const kind = kinds.get(here);
    if (kind === undefined) return false;
    if (kind === 'symlink') {
      const target = targets.get(here);
      if (target === undefined || ++hops > MAX_LINKS) return false;
      if (target.startsWith('/')) return true;
      queue = [...target.split('/'), ...queue];
      continue;
    }
    if (kind === 'file' && queue.some((q) => q !== '' && q !== '.')) return false;
    dir.push(c);
  }
  return false;
}

async function isSymlink(p: string): Promise<boolean> {
  try {
    return (await lstat(p)).isSymbolicLink();
  } catch {
    return false;
  }
}

export async function runExport(ctx: CmdContext, vfsPath: string, hostDir: string): Promise<void> {
  const caller = ctx.caller;
  const st = await caller.call('fs.stat', { path: ctx.path(vfsPath) });
  const root = path.resolve(hostDir);
  let failed = 0;
  let files = 0;
  let dirs = 0;
  let links = 0;
  let bytes = 0;
  // Set once the tree is known; errors while listing come before it exists.
  const bar: { progress?: Progress } = {};
  const fail = (what: string, err: unknown) => {
    bar.progress?.interrupt();
    failed++;
    ctx.err.write(errorLine(err, `mdvfs: export: ${what}`));
  };

  // Collect the tree first (listings are pipelined), then copy with a bounded number in flight.
  const jobs: Job[] = [];
  if (st.kind === 'directory') {
    let level = [{ src: st.path, rel: '' }];
    while (level.length > 0) {
      const next: Array<{ src: string; rel: string }> = [];
      await pool(level, CONCURRENCY, async (d) => {
        try {
          const listing = await listAll(caller, d.src);
          for (const e of listing.entries) {
            if (!safeName(e.name)) {
              fail(
                `skipped ${JSON.stringify(e.name)}`,
                new VfsError('EINVAL', 'export', undefined, 'unsafe file name'),
              );
              continue;
            }
            const src = listing.path.endsWith('/') ? listing.path + e.name : `${listing.path}/${e.name}`;
            const rel = d.rel === '' ? e.name : `${d.rel}/${e.name}`;
            const kind = e.is_symlink ? 'symlink' : e.is_dir ? 'dir' : 'file';
            jobs.push({ src, rel, kind, mtime: e.mtime_ns, atime: e.atime_ns });
            if (kind === 'dir') next.push({ src, rel });
          }
        } catch (err) {
          fail(`cannot list ${d.src}`, err);
        }
      });
      level = next;
    }
  } else {
    jobs.push({ src: st.path, rel: baseName(st.path), kind: 'file', mtime: st.mtime_ns, atime: st.atime_ns });
  }

  // mkdir answers the first directory it made, or undefined when the folder was there already.
  const rootCreated = (await mkdir(root, { recursive: true })) !== undefined;
  const progress = new Progress('exporting', jobs.length);
  bar.progress = progress;
  jobs.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  const madeDirs = new Set<string>();
  for (const j of jobs.filter((j) => j.kind === 'dir')) {
    const dst = path.join(root, ...j.rel.split('/'));
    try {
      if (await isSymlink(dst)) await unlink(dst);
      await mkdir(dst, { recursive: true });
      madeDirs.add(j.rel);
      dirs++;
    } catch (err) {
      fail(`cannot create ${dst}`, err);
    }
    progress.tick();
  }
  // Every link's target first: whether one stays inside can depend on the others.
  const targets = new Map<string, string>();
  await pool(
    jobs.filter((j) => j.kind === 'symlink'),
    CONCURRENCY,
    async (j) => {
      try {
        targets.set(j.rel, (await caller.call('fs.readlink', { path: j.src })).target);
      } catch (err) {
        fail(`cannot export ${j.src}`, err);
      }
    },
  );
  const kinds = new Map(jobs.map((j) => [j.rel, j.kind]));
  const made: { dst: string; src: string; target: string }[] = [];
  const skipLink = (src: string, target: string): void => {
    progress.interrupt();
    ctx.err.write(`mdvfs: export: skipped ${src}: symlink -> ${target} resolves outside the exported tree\n`);
  };
  await pool(
    jobs.filter((j) => j.kind !== 'dir'),
    CONCURRENCY,
    async (j) => {
      const dst = path.join(root, ...j.rel.split('/'));
      try {
        if (j.kind === 'file') {
          const { data } = await caller.request('fs.read', { path: j.src });
          if (await isSymlink(dst)) await unlink(dst);
          await writeFile(dst, data);
          await keepTimes(dst, j);
          files++;
          bytes += data.length;
        } else {
          const target = targets.get(j.rel);
          // Only links that stay inside the exported tree are recreated; others would point elsewhere on the host.
          if (target === undefined) {
            // its readlink failed (reported above)
          } else if (escapesTree(j.rel, kinds, targets)) skipLink(j.src, target);
          else {
            await unlink(dst).catch(() => undefined);
            await symlink(target, dst);
            await keepTimes(dst, j);
            made.push({ dst, src: j.src, target });
            links++;
          }
        }
      } catch (err) {
        fail(`cannot export ${j.src}`, err);
      }
      progress.tick();
    },
  );
  // Second line of defence: what was already in the host directory (a link of its own on the way)
  // can still lead out. The host decides: a link that resolves outside the real root is removed.
  const realRoot = await realpath(root);
  for (const m of made) {
    const real = await realpath(m.dst).catch(() => null); // dangling: leads nowhere
    if (real !== null && real !== realRoot && !real.startsWith(realRoot + '/')) {
      await unlink(m.dst).catch(() => undefined);
      links--;
      skipLink(m.src, m.target);
    }
  }
  // Directory times last, the deepest first: creating entries in a directory changes its time.
  const dirJobs = jobs.filter((j) => j.kind === 'dir' && madeDirs.has(j.rel)).reverse();
  // The folder itself takes the exported directory's times only when this export made it.
  if (st.kind === 'directory' && rootCreated)
    dirJobs.push({ src: st.path, rel: '', kind: 'dir', mtime: st.mtime_ns, atime: st.atime_ns });
  for (const j of dirJobs) {
    const dst = path.join(root, ...j.rel.split('/'));
    await keepTimes(dst, j).catch((err: unknown) => fail(`cannot set the times of ${dst}`, err));
  }
  progress.finish();
  ctx.out.write(
    `exported ${files} file${files === 1 ? '' : 's'}, ${dirs} director${dirs === 1 ? 'y' : 'ies'}${links > 0 ? `, ${links} symlink${links === 1 ? '' : 's'}` : ''} (${bytes} bytes) to ${root}${failed > 0 ? `; ${failed} failed` : ''}\n`,
  );
  if (failed > 0) ctx.exitCode = 1;
}
