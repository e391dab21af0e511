/**
 * `mdvfs import <hostdir> [--to <path>] [--watch]`: copies a host folder (a notes vault) into the
 * filesystem, then optionally follows its changes with chokidar until interrupted.
 *
 * Security: the walk never follows a symlink out of the source folder. Symlinks whose real target
 * lies inside it are recreated as relative symlinks; the others are skipped with a warning.
 */
import { lstat, readdir, readFile, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Dirent } from 'node:fs';
import { VfsError } from '../daemon/errors.js';
import type { CmdContext } from './context.js';
import { CliError, errorLine } from './errors.js';
import { Progress, pool } from './progress.js';

interface Entry {
  rel: string; // relative to the source root, '/'-separated
  kind: 'dir' | 'file' | 'symlink';
}

export interface ImportSummary {
  target: string;
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  failed: number;
  skipped: number;
}

const CONCURRENCY = 16;

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);
}

function vfsJoin(base: string, rel: string): string {
  if (rel === '') return base;
  return base.endsWith('/') ? base + rel : `${base}/${rel}`;
}

/** One import session: the source root, the target, and the counters shared by the initial copy and --watch. */
class Importer {
  readonly summary: ImportSummary;
  private progress: Progress | undefined;
  private timesUnsupported = false;

  constructor(
    private readonly ctx: CmdContext,
    readonly root: string, // realpath of the source
    readonly target: string, // resolved target in the filesystem
    private readonly targetCreated = true, // the target was made by this import (only then does it get the folder's times)
  ) {
    this.summary = { target, files: 0, dirs: 0, symlinks: 0, bytes: 0, failed: 0, skipped: 0 };
  }

  private fail(what: string, err: unknown): void {
    this.progress?.interrupt();
    this.summary.failed++;
    this.ctx.err.write(errorLine(err, `mdvfs: import: ${what}`));
  }

  private skip(message: string): void {
    this.progress?.interrupt();
    this.summary.skipped++;
    this.ctx.err.write(`mdvfs: import: ${message}\n`);
  }

  /** Walks the source without following symlinks; names that are not valid UTF-8 are reported. */
  async walk(): Promise<Entry[]> {
    const out: Entry[] = [];
    // Pre-order in name order with an explicit stack of open directories (no recursion, whatever the depth).
    const stack: { rel: string; names: Dirent<Buffer>[]; i: number }[] = [];
    const open = async (rel: string): Promise<void> => {
      const dir = path.join(this.root, rel);
      try {
        const names = await readdir(dir, { withFileTypes: true, encoding: 'buffer' });
        names.sort((a, b) => Buffer.compare(a.name, b.name));
        stack.push({ rel, names, i: 0 });
      } catch (err) {
        this.fail(`cannot read ${dir}`, err);
      }
    };
    await open('');
    while (stack.length > 0) {
      const f = stack[stack.length - 1]!;
      const d = f.names[f.i++];
      if (d === undefined) {
        stack.pop();
        continue;
      }
      const dir = path.join(this.root, f.rel);
      const name = d.name.toString('utf8');
      const childRel = f.rel === '' ? name : `${f.rel}/${name}`;
      if (!Buffer.from(name, 'utf8').equals(d.name)) {
        this.fail(`cannot import ${path.join(dir, name)}`, new CliError('EILSEQ', 'the file name is not valid UTF-8'));
        continue;
      }
      if (d.isDirectory()) {
        out.push({ rel: childRel, kind: 'dir' });
        await open(childRel);
      } else if (d.isFile()) out.push({ rel: childRel, kind: 'file' });
      else if (d.isSymbolicLink()) out.push({ rel: childRel, kind: 'symlink' });
      else
        this.fail(
          `cannot import ${path.join(dir, name)}`,
          new CliError('EINVAL', 'not a regular file, directory or symlink'),
        );
    }
    return out;
  }

  async copyAll(entries: Entry[]): Promise<void> {
    this.progress = new Progress('importing', entries.length);
    const copied = new Set<string>();
    // Directories first (parents are created on demand anyway; this keeps empty ones too).
    await pool(
      entries.filter((e) => e.kind === 'dir'),
      CONCURRENCY,
      async (e) => {
        if (await this.apply(e, false)) copied.add(e.rel);
        this.progress?.tick();
      },
    );
    await pool(
      entries.filter((e) => e.kind !== 'dir'),
      CONCURRENCY,
      async (e) => {
        await this.apply(e);
        this.progress?.tick();
      },
    );
    // A directory's time changes as entries are added to it: set them last, the deepest first
    // (the walk is in pre-order, so reversed every directory comes before its parent).
    const dirs = entries.filter((e) => e.kind === 'dir' && copied.has(e.rel)).reverse();
    for (const e of dirs) await this.keepTimes(e.rel);
    // The target itself takes the folder's times only when this import made it: an existing directory
    // it was copied into (maybe someone else's) keeps its own.
    if (this.targetCreated) await this.keepTimes('');
    this.progress.finish();
    this.progress = undefined;
  }

  /**
   * Gives the copy of `rel` the source's modification and access times (to the nanosecond), as `cp -p`
   * does; returns false (reported) when they could not be set. Symlinks keep the time of their creation:
   * fs.utimens follows them.
   */
  async keepTimes(rel: string): Promise<boolean> {
    const host = path.join(this.root, rel);
    const dst = vfsJoin(this.target, rel);
    if (this.timesUnsupported) return true;
    try {
      const st = await stat(host, { bigint: true });
      await this.ctx.caller.call('fs.utimens', {
        path: dst,
        atime: st.atimeNs.toString(),
        mtime: st.mtimeNs.toString(),
      });
      return true;
    } catch (err) {
      if (err instanceof VfsError && err.code === 'ENOTSUP') {
        // Over --url: REST has no call that sets times. Said once; the copy itself succeeded.
        this.timesUnsupported = true;
        this.progress?.interrupt();
        this.ctx.err.write(
          'mdvfs: import: modification times are not kept over --url (REST has no call that sets them); import through the local daemon to keep them\n',
        );
        return true;
      }
      if (vanished(err)) {
        this.skip(`skipped ${host}: it vanished while being imported`);
        return false;
      }
      this.fail(`cannot keep the times of ${host}`, err);
      return false;
    }
  }

  /**
   * Copies one entry; returns false when it failed or was skipped. A file gets the source's times at
   * once; a directory too unless `dirTimes` is false (the initial copy sets them after its contents).
   */
  async apply(e: Entry, dirTimes = true): Promise<boolean> {
    const host = path.join(this.root, e.rel);
    const dst = vfsJoin(this.target, e.rel);
    const caller = this.ctx.caller;
    try {
      if (e.kind === 'dir') {
        await caller.call('fs.mkdir', { path: dst, parents: true });
        this.summary.dirs++;
        return dirTimes ? this.keepTimes(e.rel) : true;
      }
      if (e.kind === 'file') {
        let data: Buffer;
        try {
          data = await readFile(host);
        } catch (err) {
          if (vanished(err)) this.skip(`skipped ${host}: it vanished while being imported`);
          else this.fail(`cannot read ${host}`, err);
          return false;
        }
        await caller.call('fs.write', { path: dst }, { data });
        this.summary.files++;
        this.summary.bytes += data.length;
        return this.keepTimes(e.rel);
      }
      // Security: resolve the link on the host and refuse anything that leaves the source folder.
      let real: string;
      try {
        real = await realpath(host);
      } catch {
        this.skip(`skipped ${host}: dangling symlink -> ${await readlink(host).catch(() => '?')}`);
        return false;
      }
      if (!inside(this.root, real)) {
        this.skip(`skipped ${host}: symlink points outside the source folder`);
        return false;
      }
      const target = path.relative(path.dirname(host), real) || '.';
      try {
        await caller.call('fs.symlink', { target, path: dst });
      } catch (err) {
        if (!(err instanceof VfsError && err.code === 'EEXIST')) throw err;
        await caller.call('fs.delete', { path: dst, recursive: true });
        await caller.call('fs.symlink', { target, path: dst });
      }
      this.summary.symlinks++;
      return true;
    } catch (err) {
      this.fail(`cannot import ${host}`, err);
      return false;
    }
  }

  /** Applies a removal seen by the watcher; a missing target is already the wanted state. */
  async remove(rel: string): Promise<void> {
    try {
      await this.ctx.caller.call('fs.delete', { path: vfsJoin(this.target, rel), recursive: true });
    } catch (err) {
      if (!(err instanceof VfsError && err.code === 'ENOENT'))
        this.fail(`cannot remove ${vfsJoin(this.target, rel)}`, err);
    }
  }
}

/**
 * A host entry removed between its event (or the walk) and its reading, as `rm -r` of a folder being
 * watched does: skipped with a note (rsync's "file has vanished"), not a failure; its unlink event follows.
 */
function vanished(err: unknown): boolean {
  return !(err instanceof VfsError) && (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

/** Runs the import command. Exit status 1 when anything could not be imported. */
export async function runImport(
  ctx: CmdContext,
  hostDir: string,
  opts: { to?: string; watch?: boolean },
): Promise<void> {
  const root = await realpath(hostDir);
  if (!(await stat(root)).isDirectory()) throw new VfsError('ENOTDIR', 'import', hostDir);
  const toArg = opts.to !== undefined ? ctx.path(opts.to) : ctx.path(path.basename(root) || 'import');
  // Resolving through mkdir gives the absolute target, so later relative writes cannot drift.
  const made = await ctx.caller.call('fs.mkdir', { path: toArg, parents: true });
  const importer = new Importer(ctx, root, made.path, made.created);

  let watcher: import('chokidar').FSWatcher | undefined;
  const queue: Array<() => Promise<void>> = [];
  let draining: Promise<void> | undefined;
  // Events wait until the first copy is done: applying a delete before the copy writes a stale file back would undo it.
  let copied = false;
  const drain = (): void => {
    if (draining || !copied) return;
    const run = async () => {
      // The first await comes before any bookkeeping, so `draining` is set before this can clear it.
      await Promise.resolve();
      for (let job = queue.shift(); job; job = queue.shift()) await job();
      draining = undefined;
    };
    draining = run();
  };
  if (opts.watch) {
    const { watch } = await import('chokidar');
    // Start watching before the first copy, so nothing that changes during the copy is lost.
    watcher = watch(root, { ignoreInitial: true, followSymlinks: false, persistent: true });
    const relOf = (p: string) => path.relative(root, p).split(path.sep).join('/');
    const note = (verb: string, rel: string) => ctx.out.write(`${verb} ${vfsJoin(importer.target, rel)}\n`);
    const onAddOrChange = (verb: string) => (p: string) => {
      queue.push(async () => {
        const rel = relOf(p);
        let st;
        try {
          st = await lstat(p);
        } catch {
          return; // gone again before we got to it; its unlink event follows
        }
        const kind = st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'file';
        if (await importer.apply({ rel, kind })) note(verb, rel);
      });
      drain();
    };
    watcher.on('add', onAddOrChange('added'));
    watcher.on('change', onAddOrChange('updated'));
    watcher.on('addDir', onAddOrChange('added'));
    const onRemove = (p: string) => {
      queue.push(async () => {
        const rel = relOf(p);
        if (rel === '') return;
        await importer.remove(rel);
        note('removed', rel);
      });
      drain();
    };
    watcher.on('unlink', onRemove);
    watcher.on('unlinkDir', onRemove);
    watcher.on('error', (err) => ctx.err.write(errorLine(err, 'mdvfs: import: watch')));
    const w = watcher;
    await new Promise<void>((resolve) => w.once('ready', () => resolve()));
  }

  const entries = await importer.walk();
  await importer.copyAll(entries);
  copied = true;
  drain();
  const s = importer.summary;
  const line = `imported ${s.files} file${s.files === 1 ? '' : 's'}, ${s.dirs} director${s.dirs === 1 ? 'y' : 'ies'}${s.symlinks > 0 ? `, ${s.symlinks} symlink${s.symlinks === 1 ? '' : 's'}` : ''} (${s.bytes} bytes) into ${s.target}`;
  ctx.out.write(
    `${line}${s.failed > 0 ? `; ${s.failed} failed` : ''}${s.skipped > 0 ? `; ${s.skipped} skipped` : ''}\n`,
  );
  if (s.failed > 0) ctx.exitCode = 1;

  if (watcher) {
    ctx.err.write(`mdvfs: watching ${root} (Ctrl-C to stop)\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        // A second Ctrl-C does not wait for the last changes to be sent.
        process.once('SIGINT', () => process.exit(130));
        resolve();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    await watcher.close();
    while (draining) await draining;
    if (importer.summary.failed > 0) ctx.exitCode = 1;
  }
}
