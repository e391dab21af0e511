/**
 * `mdvfs export <path> <hostdir>`: writes a subtree of the filesystem out to a host folder, byte
 * for byte. Security: names come from the daemon, which never allows '/', '.', '..' or NUL, and
 * they are checked again here; existing host symlinks in the way are replaced, never followed.
 */
import { lstat, mkdir, symlink, unlink, writeFile } from 'node:fs/promises';
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
}

const CONCURRENCY = 16;

function safeName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
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
              fail(`skipped ${JSON.stringify(e.name)}`, new VfsError('EINVAL', 'export', undefined, 'unsafe file name'));
              continue;
            }
            const src = listing.path.endsWith('/') ? listing.path + e.name : `${listing.path}/${e.name}`;
            const rel = d.rel === '' ? e.name : `${d.rel}/${e.name}`;
            const kind = e.is_symlink ? 'symlink' : e.is_dir ? 'dir' : 'file';
            jobs.push({ src, rel, kind });
            if (kind === 'dir') next.push({ src, rel });
          }
        } catch (err) {
          fail(`cannot list ${d.src}`, err);
        }
      });
      level = next;
    }
  } else {
    jobs.push({ src: st.path, rel: baseName(st.path), kind: 'file' });
  }

  await mkdir(root, { recursive: true });
  const progress = new Progress('exporting', jobs.length);
  bar.progress = progress;
  jobs.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  for (const j of jobs.filter((j) => j.kind === 'dir')) {
    const dst = path.join(root, ...j.rel.split('/'));
    try {
      if (await isSymlink(dst)) await unlink(dst);
      await mkdir(dst, { recursive: true });
      dirs++;
    } catch (err) {
      fail(`cannot create ${dst}`, err);
    }
    progress.tick();
  }
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
          files++;
          bytes += data.length;
        } else {
          const { target } = await caller.call('fs.readlink', { path: j.src });
          // Only links that stay inside the exported tree are recreated; others would point elsewhere on the host.
          const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(j.rel), target));
          if (target.startsWith('/') || resolved === '..' || resolved.startsWith('../')) {
            progress.interrupt();
            ctx.err.write(`mdvfs: export: skipped ${j.src}: symlink -> ${target} points outside the exported tree\n`);
          } else {
            await unlink(dst).catch(() => undefined);
            await symlink(target, dst);
            links++;
          }
        }
      } catch (err) {
        fail(`cannot export ${j.src}`, err);
      }
      progress.tick();
    },
  );
  progress.finish();
  ctx.out.write(
    `exported ${files} file${files === 1 ? '' : 's'}, ${dirs} director${dirs === 1 ? 'y' : 'ies'}${links > 0 ? `, ${links} symlink${links === 1 ? '' : 's'}` : ''} (${bytes} bytes) to ${root}${failed > 0 ? `; ${failed} failed` : ''}\n`,
  );
  if (failed > 0) ctx.exitCode = 1;
}
