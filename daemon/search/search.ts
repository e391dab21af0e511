/**
 * grep, find and tree. All three see only what the caller may list, search and read, like
 * `grep -r` on a Unix box, and never reveal names or content from unreadable places.
 */
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import picomatch from 'picomatch';
import { VfsError } from '../errors.js';
import { compareNames, sortedNames, type DirNode, type Node } from '../core/inode.js';
import { may, R, requireAccess, X, type Cred } from '../core/perms.js';
import { slicer, type Vfs } from '../core/vfs.js';
import type { GrepJob, GrepReply, LoadJob, MatchJob, MatchReply, WireJob } from './grep-worker.js';
import { loaderFlags } from '../node-flags.js';

/** Content bytes the pool lets each worker hold before it starts it afresh. */
const WORKER_CACHE_BYTES = 256 * 1024 * 1024;
/**
 * New content bytes packed per message to a worker. Packing means a fresh buffer, and allocating
 * 40 MiB at once took 500 ms on a loaded machine; parts this size are sent a turn apart.
 */
const WIRE_PART_BYTES = 4 * 1024 * 1024;

/** A small pool of grep workers; a job over its time bound kills its worker (ETIMEDOUT). */
export class GrepPool {
  private idle: Worker[] = [];
  private busy = 0;
  /**
   * Jobs waiting for a worker, per caller. The map's order is the round-robin order: a caller whose
   * job starts moves to the back, so one caller's batch never holds everyone else's behind it.
   */
  private readonly waiting = new Map<string, (() => void)[]>();
  /** Workers each caller holds now; at most `perCaller`, so another caller always finds one free soon. */
  private readonly busyBy = new Map<string, number>();
  private readonly perCaller: number;
  /** per worker: the contents it already holds (mirrors the worker's maps; it never evicts on its own) */
  private readonly sent = new WeakMap<Worker, { ids: Set<string>; bytes: number }>();
  private readonly online = new WeakMap<Worker, Promise<void>>();

  constructor(
    private readonly size: number,
    private readonly timeoutMs: number,
  ) {
    this.perCaller = Math.max(1, size - 1);
  }

  /** Waits for a worker slot for `caller` (fair: round-robin between callers, a cap per caller). */
  private async acquire(caller: string): Promise<void> {
    if (this.busy < this.size && !this.waiting.has(caller) && (this.busyBy.get(caller) ?? 0) < this.perCaller) {
      this.take(caller);
      return;
    }
    await new Promise<void>((resolve) => {
      const q = this.waiting.get(caller);
      if (q) q.push(resolve);
      else this.waiting.set(caller, [resolve]);
    });
  }

  private take(caller: string): void {
    this.busy++;
    this.busyBy.set(caller, (this.busyBy.get(caller) ?? 0) + 1);
  }

  private release(caller: string): void {
    this.busy--;
    const n = (this.busyBy.get(caller) ?? 1) - 1;
    if (n === 0) this.busyBy.delete(caller);
    else this.busyBy.set(caller, n);
    // Start waiting jobs: the first caller in round-robin order that is under its cap.
    while (this.busy < this.size) {
      let next: string | undefined;
      for (const k of this.waiting.keys()) {
        if ((this.busyBy.get(k) ?? 0) < this.perCaller) {
          next = k;
          break;
        }
      }
      if (next === undefined) return;
      const q = this.waiting.get(next)!;
      const resolve = q.shift()!;
      this.waiting.delete(next);
      if (q.length > 0) this.waiting.set(next, q); // to the back of the line
      this.take(next);
      resolve();
    }
  }

  private spawn(): Worker {
    const here = fileURLToPath(import.meta.url);
    const ext = path.extname(here);
    const file = path.join(path.dirname(here), `grep-worker${ext}`);
    const w = new Worker(file, { execArgv: loaderFlags(process.execArgv) });
    w.unref();
    // The time bound is for the search, not for starting a thread on a loaded machine (or one whose
    // module loaders take long, as a test runner's do): the worker says when its module has loaded.
    this.online.set(
      w,
      new Promise<void>((resolve) => {
        w.once('message', () => resolve());
        w.once('error', () => resolve());
        w.once('exit', () => resolve());
      }),
    );
    return w;
  }

  /** The job without its new contents, and those contents (what this worker does not hold yet). */
  private plan(worker: Worker, job: GrepJob): { head: Omit<WireJob, 'fresh'>; fresh: GrepJob['files'] } {
    let st = this.sent.get(worker);
    if (st === undefined) this.sent.set(worker, (st = { ids: new Set(), bytes: 0 }));
    const reset = st.bytes > WORKER_CACHE_BYTES;
    if (reset) {
      st.ids.clear();
      st.bytes = 0;
    }
    const n = job.files.length;
    const paths = new Array<string>(n);
    const ids = new Array<string>(n);
    const fresh: GrepJob['files'] = [];
    for (let i = 0; i < n; i++) {
      const f = job.files[i]!;
      paths[i] = f.path;
      ids[i] = f.id;
      if (!st.ids.has(f.id)) {
        st.ids.add(f.id);
        st.bytes += f.len;
        fresh.push(f);
      }
    }
    return {
      head: { pattern: job.pattern, flags: job.flags, max: job.max, offset: job.offset, reset, paths, ids },
      fresh,
    };
  }

  /**
   * `caller` names who asked (callerKey): the pool shares its workers fairly between callers. New
   * contents go in parts of at most WIRE_PART_BYTES (a `load` message each, a turn apart), the
   * last part with the job itself.
   */
  run(job: GrepJob, caller: string): Promise<GrepReply> {
    return this.exec<GrepReply>(caller, 'grep', 'pattern', async (w) => {
      const { head, fresh } = this.plan(w, job);
      let reset = head.reset;
      for (let i = 0; ;) {
        let j = i;
        let bytes = 0;
        while (j < fresh.length && (j === i || bytes + fresh[j]!.len <= WIRE_PART_BYTES)) bytes += fresh[j++]!.len;
        const part = pack(fresh, i, j, bytes);
        i = j;
        if (i >= fresh.length) {
          const msg: WireJob = { ...head, reset, fresh: part };
          w.postMessage(msg, [part.data]);
          return;
        }
        const load: LoadJob = { kind: 'load', reset, fresh: part };
        w.postMessage(load, [part.data]);
        reset = false;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    });
  }

  /** The indices of `subjects` that `re` matches, under the same time bound as grep. */
  async match(re: RegExp, subjects: string[], op: string, caller: string): Promise<number[]> {
    if (subjects.length === 0) return [];
    const job: MatchJob = { kind: 'match', source: re.source, flags: re.flags, subjects };
    return (await this.exec<MatchReply>(caller, op, 'glob', (w) => w.postMessage(job))).indices;
  }

  private async exec<R>(
    caller: string,
    op: string,
    what: string,
    post: (w: Worker) => void | Promise<void>,
  ): Promise<R> {
    await this.acquire(caller);
    const worker = this.idle.pop() ?? this.spawn();
    try {
      await this.online.get(worker);
      return await new Promise<R>((resolve, reject) => {
        const timer = setTimeout(() => {
          cleanup();
          void worker.terminate();
          reject(
            new VfsError(
              'ETIMEDOUT',
              op,
              undefined,
              `the ${what} took longer than ${this.timeoutMs} ms (catastrophic backtracking?); simplify it`,
            ),
          );
        }, this.timeoutMs);
        const onMessage = (m: { ok?: R; error?: string }) => {
          cleanup();
          this.idle.push(worker);
          if (m.ok !== undefined) resolve(m.ok);
          else reject(new VfsError('EINVAL', op, undefined, m.error ?? `${op} failed`));
        };
        const onError = (err: Error) => {
          cleanup();
          void worker.terminate();
          reject(new VfsError('EIO', op, undefined, err.message));
        };
        const cleanup = () => {
          clearTimeout(timer);
          worker.off('message', onMessage);
          worker.off('error', onError);
        };
        worker.on('message', onMessage);
        worker.on('error', onError);
        Promise.resolve(post(worker)).catch((err: unknown) =>
          onError(err instanceof Error ? err : new Error(String(err))),
        );
      });
    } finally {
      this.release(caller);
    }
  }

  close(): void {
    for (const w of this.idle) void w.terminate();
    this.idle = [];
  }
}

/** Packs the contents of files[i..j) (`bytes` in all) into one buffer for a worker. */
function pack(files: GrepJob['files'], i: number, j: number, bytes: number): WireJob['fresh'] {
  const data = new Uint8Array(bytes);
  const ids = new Array<string>(j - i);
  const lens = new Array<number>(j - i);
  let off = 0;
  for (let k = i; k < j; k++) {
    const f = files[k]!;
    data.set(new Uint8Array(f.buf, 0, f.len), off);
    ids[k - i] = f.id;
    lens[k - i] = f.len;
    off += f.len;
  }
  return { ids, lens, data: data.buffer };
}

/** Who shares the grep pool as one caller: the authenticated principal (delegation or not). */
export function callerKey(cred: Cred): string {
  return String(cred.user.uid);
}

/** Compiles the pattern first, so syntax errors are EINVAL rather than worker failures. */
export function compilePattern(pattern: string, ignoreCase: boolean): string {
  if (pattern === '') throw new VfsError('EINVAL', 'grep', undefined, 'an empty pattern');
  const flags = ignoreCase ? 'iu' : 'u';
  try {
    new RegExp(pattern, flags);
    return flags;
  } catch {
    try {
      new RegExp(pattern, ignoreCase ? 'i' : '');
      return ignoreCase ? 'i' : '';
    } catch (err) {
      throw new VfsError('EINVAL', 'grep', undefined, `invalid regular expression: ${(err as Error).message}`);
    }
  }
}

/** Files the collection visits between two checks of its time slice. */
const GREP_VISIT_BATCH = 256;
/** Sliced attempts before the collection runs in one go (a tree that never stops changing). */
const GREP_SLICED_ATTEMPTS = 3;

/**
 * The files a grep would read, in path order, each with its display path and content. The tree is
 * walked in slices that yield the event loop (`slicer`), so a grep over a big tree never holds it.
 * The result is a snapshot of one moment: if anything that could change it (an entry, a mode, an
 * owner, an identity, a file's content: `Vfs.generation`) changed while it was collected, it is
 * collected again; after GREP_SLICED_ATTEMPTS such attempts it runs in one go. `sliced: false`
 * collects in one go at once (the reference the tests compare against); `pauser` makes the pause
 * function of an attempt (tests pass one that yields more often).
 */
export async function grepFiles(
  vfs: Vfs,
  cred: Cred,
  abs: string,
  recursive: boolean,
  display: (p: string) => string,
  sliced = true,
  pauser: () => () => Promise<void> | undefined = slicer,
): Promise<GrepJob['files']> {
  for (let attempt = 0; ; attempt++) {
    const gen = vfs.generation;
    const start = vfs.resolve(cred, abs, 'grep', true);
    const files: GrepJob['files'] = [];
    const add = (n: Node, p: string) => {
      if (n.kind !== 'file' || !may(cred, n, R)) return;
      const buf = vfs.blobs.get(n.blob);
      files.push({ path: display(p), id: n.blob, buf: buf.buffer as SharedArrayBuffer, len: buf.length });
    };
    if (start.kind === 'file') {
      requireAccess(cred, start, R, 'grep', abs);
      add(start, abs);
      return files;
    }
    if (start.kind !== 'directory') return files;
    requireAccess(cred, start, R | X, 'grep', abs);
    const pause = sliced && attempt < GREP_SLICED_ATTEMPTS ? pauser() : () => undefined;
    let k = 0;
    let waited = false;
    for (const { node, path: p } of vfs.visible(cred, start, abs, recursive)) {
      add(node, p);
      if (++k % GREP_VISIT_BATCH === 0) {
        const w = pause();
        if (w !== undefined) {
          await w;
          waited = true;
        }
      }
    }
    if (waited && vfs.generation !== gen) continue; // the tree changed while we collected: collect again
    // Path order means sorted paths (`sub.md` before `sub/a.md`), not the walk's name order; the walk
    // is almost sorted already, which TimSort handles in about linear time.
    return files.sort((a, b) => compareNames(a.path, b.path));
  }
}

/**
 * find: names matching a glob (picomatch, `*` and `?` within a name; `**` over paths). The tree is
 * walked here; the compiled glob runs in the worker pool under the grep time bound, because a glob
 * such as `*a*a*a*a*a*a*b` backtracks like a hostile regex.
 */
export async function find(
  vfs: Vfs,
  pool: GrepPool,
  cred: Cred,
  abs: string,
  name: string | undefined,
  type: 'f' | 'd' | 'l' | undefined,
  display: (p: string) => string,
): Promise<string[]> {
  const start = vfs.resolve(cred, abs, 'find', true);
  const kindOk = (n: Node) =>
    type === undefined ||
    (type === 'f' && n.kind === 'file') ||
    (type === 'd' && n.kind === 'directory') ||
    (type === 'l' && n.kind === 'symlink');
  const paths: string[] = [];
  const subjects: string[] = [];
  const byPath = name !== undefined && name.includes('/');
  if (start.kind !== 'directory') {
    const base = abs.slice(abs.lastIndexOf('/') + 1);
    if (kindOk(start)) {
      paths.push(abs);
      subjects.push(base);
    }
  } else {
    requireAccess(cred, start, R | X, 'find', abs);
    const prefix = abs === '/' ? 1 : abs.length + 1;
    for (const { node, path: p } of vfs.visible(cred, start, abs, true)) {
      if (!kindOk(node)) continue;
      paths.push(p);
      subjects.push(byPath ? p.slice(prefix) : node.name);
    }
  }
  const byOrder = (hits: number[]) =>
    hits
      .map((i) => paths[i]!)
      .sort(compareNames)
      .map(display); // sorted paths, as grep
  if (name === undefined || name === '') return byOrder(paths.map((_, i) => i));
  const re = picomatch.makeRe(name, { dot: true, nocase: false });
  return byOrder(await pool.match(re, subjects, 'find', callerKey(cred)));
}

/**
 * Characters of one find or tree answer (at most 6 bytes of JSON each, well under the socket's
 * 16 MiB header limit). Past it the answer is cut and flagged `truncated`.
 */
export const LISTING_ANSWER_MAX = 2 * 1024 * 1024;

/** The leading items whose `size` fits `budget`, and whether any were left out. */
export function capItems<T>(
  items: T[],
  size: (x: T) => number,
  budget = LISTING_ANSWER_MAX,
): { results: T[]; truncated: boolean } {
  for (let i = 0; i < items.length; i++) {
    budget -= size(items[i]!);
    if (budget < 0) return { results: items.slice(0, i), truncated: true };
  }
  return { results: items, truncated: false };
}

/** The leading paths that fit the answer budget, and whether any were left out. */
export function capPaths(paths: string[]): { results: string[]; truncated: boolean } {
  return capItems(paths, (p) => p.length + 3);
}

/** Bytes of JSON one log answer may carry (commit messages may be 100,000 characters each). */
export const LOG_ANSWER_BYTES = 8 * 1024 * 1024;

/** Text like the Unix `tree` command; unreadable directories are shown but not opened. */
export function tree(
  vfs: Vfs,
  cred: Cred,
  abs: string,
  label: string,
  maxDepth: number | undefined,
): { text: string; directories: number; files: number; truncated?: boolean } {
  const start = vfs.resolve(cred, abs, 'tree', true);
  if (start.kind !== 'directory') throw new VfsError('ENOTDIR', 'tree', abs);
  requireAccess(cred, start, R, 'tree', abs);
  const lines: string[] = [label];
  let directories = 0;
  let files = 0;
  let budget = LISTING_ANSWER_MAX;
  let truncated = false;
  // Pre-order with an explicit stack: a recursive walk would overflow on a deep tree.
  const stack: { dir: DirNode; prefix: string; depth: number; names: string[]; i: number }[] = [];
  const open = (dir: DirNode, prefix: string, depth: number) => {
    if (may(cred, dir, R | X)) stack.push({ dir, prefix, depth, names: sortedNames(dir), i: 0 });
  };
  open(start, '', 1);
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    if (f.i >= f.names.length) {
      stack.pop();
      continue;
    }
    const i = f.i++;
    const name = f.names[i]!;
    budget -= f.prefix.length + name.length + 8;
    if (budget < 0) {
      truncated = true;
      break;
    }
    const child = f.dir.children.get(name)!;
    const last = i === f.names.length - 1;
    const suffix = child.kind === 'symlink' ? ` -> ${child.target}` : '';
    lines.push(`${f.prefix}${last ? '└── ' : '├── '}${name}${suffix}`);
    if (child.kind === 'directory') {
      directories++;
      if (maxDepth === undefined || f.depth < maxDepth) open(child, f.prefix + (last ? '    ' : '│   '), f.depth + 1);
    } else files++;
  }
  if (truncated) lines.push(`[… tree cut at ${LISTING_ANSWER_MAX} characters; pass a deeper path or a depth]`);
  lines.push(
    '',
    `${directories} director${directories === 1 ? 'y' : 'ies'}, ${files} file${files === 1 ? '' : 's'}${truncated ? ' shown' : ''}`,
  );
  return truncated
    ? { text: lines.join('\n') + '\n', directories, files, truncated }
    : { text: lines.join('\n') + '\n', directories, files };
}
