/**
 * Per-file write buffers for the mount. A file opened through the mount is read once from the daemon;
 * reads and writes then work on this buffer, and the whole content goes back to the daemon on
 * flush/fsync/release when it changed (close-to-open consistency, like NFS).
 *
 * All descriptors of one path share one OpenFile, so two processes writing and reading the same file
 * through the mount see each other's writes before either closes it.
 */
import type { ChangeLog } from './change-log.js';
import type { RangedContent } from './ranged.js';

/** A growable byte buffer with copy-on-write, so a view handed to the RPC layer is never mutated. */
export class FileBuffer {
  private buf: Buffer;
  private length: number;
  // True while someone else may hold a view of `buf` (a cache entry or an in-flight write).
  private shared: boolean;

  constructor(initial: Buffer, shared: boolean) {
    this.buf = initial;
    this.length = initial.length;
    this.shared = shared;
  }

  static empty(): FileBuffer {
    return new FileBuffer(Buffer.alloc(0), false);
  }

  get size(): number {
    return this.length;
  }

  /** The current content; the buffer is copied before its next change. */
  view(): Buffer {
    this.shared = true;
    return this.buf.subarray(0, this.length);
  }

  read(dst: Buffer, len: number, pos: number): number {
    if (pos >= this.length) return 0;
    return this.buf.copy(dst, 0, pos, Math.min(this.length, pos + len));
  }

  write(src: Buffer, len: number, pos: number): void {
    const end = pos + len;
    this.reserve(end);
    // Bytes past the old end are garbage in an allocUnsafe buffer: a write after a hole zero-fills it.
    if (pos > this.length) this.buf.fill(0, this.length, pos);
    src.copy(this.buf, pos, 0, len);
    if (end > this.length) this.length = end;
  }

  truncate(size: number): void {
    if (size > this.length) {
      this.reserve(size);
      this.buf.fill(0, this.length, size);
    } else if (this.shared) {
      this.realloc(size, size);
    }
    this.length = size;
  }

  private reserve(needed: number): void {
    if (!this.shared && needed <= this.buf.length) return;
    const grown = Math.max(
      needed,
      this.shared && needed <= this.buf.length ? this.buf.length : this.buf.length * 2,
      4096,
    );
    this.realloc(grown, this.length);
  }

  private realloc(capacity: number, keep: number): void {
    const next = Buffer.allocUnsafe(capacity);
    this.buf.copy(next, 0, 0, Math.min(keep, this.length));
    this.buf = next;
    this.shared = false;
  }
}

/** The content of one path while at least one descriptor has it open. */
export class OpenFile {
  refs = 0;
  dirty = false;
  /** Set when the path was unlinked or replaced by a rename: flushing must not bring it back. */
  orphaned = false;
  /** Content id of what the daemon holds, when known. */
  etag: string | undefined;
  mtimeMs = Date.now();
  /**
   * The daemon's write grants of the descriptors open for writing (one each): the buffer is sent under
   * the access they were opened with, so a file created 0444, or chmodded after open, stays writable.
   */
  readonly grants = new Set<string>();
  /**
   * Set while the file exists only in this mount: its create was answered without the daemon (see
   * MountFs.create) and goes with its first flush, as one exclusive write of its content.
   */
  unsent: UnsentCreate | undefined;
  /** Why that create failed, until a flush, fsync or close reports it. */
  failed: unknown;
  /** The fetch of `data` while it runs (content is fetched on the first read, see MountFs.content). */
  loading: Promise<FileBuffer> | null = null;
  /**
   * A large file opened for reading, while `data` is null: its parts, fetched as the kernel reads
   * them (fuse/ranged.ts). A writer turns it into `data` (MountFs.content).
   */
  stream: RangedContent | null = null;
  /** The fetch of the first part while it runs (MountFs.readable). */
  starting: Promise<void> | null = null;
  private chain: Promise<unknown> = Promise.resolve();

  /** `data` is null while the content is known (by etag) but not fetched yet. */
  constructor(
    public path: string,
    public data: FileBuffer | null,
  ) {}

  /** Runs `fn` after every earlier serialized step of this file (flushes must not overtake each other). */
  serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Counts the changes of the content (see UnsentCreate.times). */
  writes = 0;
  /**
   * How recent the content is, on the mount's clock (tick): when it was last written, sent, or taken
   * from an answer of the daemon asked for at that tick. An answer asked for before it is older.
   */
  version = 0;

  touch(): void {
    this.dirty = true;
    this.mtimeMs = Date.now();
    this.writes++;
    this.version = tick();
  }
}

let clock = 0;

/**
 * The mount's clock: every step that makes an OpenFile's content newer, and every request for the
 * daemon's content, takes the next tick. The daemon handles the calls of one socket in the order they
 * were sent (a write is applied before a later read is answered), so an answer asked for at a tick
 * reflects every send begun before it.
 */
export function tick(): number {
  return ++clock;
}

/** A create answered by the mount and not sent yet (OpenFile.unsent): what it will be sent with. */
export interface UnsentCreate {
  mode: number;
  fd: number;
  handle: Handle & { kind: 'file' };
  /** The provisional inode number it is shown with (InodeNumbers), kept once the daemon has it. */
  ino: number;
  /**
   * Times set (utimens) before the create was sent, in nanoseconds; they go with it unless the content
   * changed after they were set (`writes`: OpenFile.writes then), which makes the mtime that change's.
   */
  times?: { atime: bigint; mtime: bigint; writes: number };
}

export type Handle =
  { kind: 'file'; file: OpenFile; writable: boolean; grant?: string } | { kind: 'snapshot'; data: Buffer }; // a read-only file of .history

/** Open descriptors and the OpenFile of each path. */
export class OpenFiles {
  private readonly byPath = new Map<string, OpenFile>();
  private readonly handles = new Map<number, Handle>();
  private nextFd = 1;

  file(path: string): OpenFile | undefined {
    return this.byPath.get(path);
  }

  /** Registers `file` under its path unless another OpenFile got there first; returns the one in use. */
  adopt(file: OpenFile): OpenFile {
    const existing = this.byPath.get(file.path);
    if (existing) return existing;
    this.byPath.set(file.path, file);
    return file;
  }

  forget(file: OpenFile): void {
    if (this.byPath.get(file.path) === file) this.byPath.delete(file.path);
  }

  open(handle: Handle): number {
    // fd 0 means "no handle" to the binding, and fds travel as uint32.
    while (this.nextFd === 0 || this.handles.has(this.nextFd)) this.nextFd = (this.nextFd + 1) >>> 0;
    const fd = this.nextFd;
    this.nextFd = (this.nextFd + 1) >>> 0;
    if (handle.kind === 'file') {
      handle.file.refs++;
      if (handle.grant !== undefined) handle.file.grants.add(handle.grant);
    }
    this.handles.set(fd, handle);
    return fd;
  }

  handle(fd: number): Handle | undefined {
    return this.handles.get(fd);
  }

  close(fd: number): Handle | undefined {
    const h = this.handles.get(fd);
    this.handles.delete(fd);
    if (h?.kind === 'file') h.file.refs--;
    return h;
  }

  get openCount(): number {
    return this.handles.size;
  }

  allFiles(): OpenFile[] {
    return [...new Set([...this.handles.values()].flatMap((h) => (h.kind === 'file' ? [h.file] : [])))];
  }

  /** Follows a rename: open files at `src` (or below it, for a directory) now live at `dst`. */
  /** `src` moved to `dst`; `isDir`: so did everything below it (else one lookup, not a scan of every open file). */
  rename(src: string, dst: string, isDir = true): void {
    const replaced = this.byPath.get(dst);
    if (replaced) {
      replaced.orphaned = true;
      this.byPath.delete(dst);
    }
    if (!isDir) {
      const f = this.byPath.get(src);
      if (f) {
        this.byPath.delete(src);
        f.path = dst;
        this.byPath.set(dst, f);
      }
      return;
    }
    for (const [p, f] of [...this.byPath]) {
      if (p !== src && !p.startsWith(`${src}/`)) continue;
      this.byPath.delete(p);
      f.path = dst + p.slice(src.length);
      this.byPath.set(f.path, f);
    }
  }

  unlink(path: string): void {
    const f = this.byPath.get(path);
    if (!f) return;
    f.orphaned = true;
    this.byPath.delete(path);
  }
}

/**
 * Recently read or written file contents by path, with their etag. Opening a file asks the daemon for
 * it with `if_none_match`, so an unchanged file costs a permission check and no content transfer; a
 * copy the daemon gave this principal to read, with no change reported since (ChangeLog), is used
 * without asking at all. Large files are remembered by etag only: when unchanged, their bytes are
 * fetched only if the kernel asks for a page it does not already hold.
 */
interface Cached {
  etag: string;
  data: Buffer | undefined;
  /** ChangeLog.now() when the request that last confirmed this etag was sent. */
  since: number;
  /** The daemon confirmed it to this principal by a read (not only accepted it as a write). */
  readable: boolean;
}

export class ContentCache {
  private readonly entries = new Map<string, Cached>();
  private bytes = 0;

  constructor(
    private readonly log: ChangeLog,
    private readonly maxBytes = 128 * 1024 * 1024,
    readonly maxEntry = 8 * 1024 * 1024,
    private readonly maxCount = 100000,
  ) {}

  get(path: string): Cached | undefined {
    const e = this.entries.get(path);
    if (e) {
      // Map order is the LRU order.
      this.entries.delete(path);
      this.entries.set(path, e);
    }
    return e;
  }

  /**
   * The entry if the daemon let this principal read it and nothing that could change the content or
   * the principal's access to it was reported since: then it is what the daemon would answer now.
   */
  fresh(path: string): Cached | undefined {
    const e = this.get(path);
    return e && e.readable && this.log.unchanged(path, e.since) ? e : undefined;
  }

  /** The daemon answered a read with "not modified" for this etag. */
  confirm(path: string, etag: string, since: number): void {
    const e = this.entries.get(path);
    if (!e || e.etag !== etag) return;
    e.since = since;
    e.readable = true;
  }

  /** `data` undefined: the bytes are not kept (a large file), only the etag. */
  set(path: string, etag: string, data: Buffer | undefined, since: number, readable: boolean): void {
    this.delete(path);
    const kept = data === undefined || data.length > this.maxEntry ? undefined : data;
    this.entries.set(path, { etag, data: kept, since, readable });
    this.bytes += kept?.length ?? 0;
    for (const [p, e] of this.entries) {
      if (this.bytes <= this.maxBytes && this.entries.size <= this.maxCount) break;
      this.entries.delete(p);
      this.bytes -= e.data?.length ?? 0;
    }
  }

  delete(path: string): void {
    const e = this.entries.get(path);
    if (!e) return;
    this.entries.delete(path);
    this.bytes -= e.data?.length ?? 0;
  }
}
