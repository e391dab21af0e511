/**
 * What each FUSE operation does, in terms of daemon calls. Paths from the kernel are absolute and are
 * passed to the daemon as they are; the daemon resolves them for the principal and checks permissions
 * (this file never decides who may do what, except that `.history` and read-only mounts refuse writes).
 *
 * Consistency model: close-to-open. `open` fetches the content (or revalidates a cached copy by etag),
 * reads and writes work on a per-file buffer, and `flush` (every close), `fsync` and `release` send the
 * whole content back when it changed.
 */
import { VfsError } from '../daemon/errors.js';
import type { Caller } from '../daemon/rpc/client.js';
import { listAll } from '../daemon/rpc/listing.js';
import type { ChangeEvent, Listing, Stat } from '../daemon/rpc/protocol.js';
import { AttrCache, ListingCache } from './attr-cache.js';
import { childPath, parentOf } from './paths.js';
import { entryToFuseStat, toFuseStat, type Owners } from './attrs.js';
import { ChangeLog, mountPaths } from './change-log.js';
import {
  O_ACCMODE,
  O_RDONLY,
  O_RDWR,
  O_TRUNC,
  O_WRONLY,
  S_IFDIR,
  S_IFMT,
  S_IFREG,
  type FuseStat,
  type FuseStatfs,
} from './fuse-types.js';
import { HISTORY_DIR, HistoryView, isHistoryPath } from './history.js';
import { ContentCache, FileBuffer, OpenFile, OpenFiles, tick } from './open-files.js';
import { PART, PartPool, RangedContent } from './ranged.js';

const R_OK = 4;
const W_OK = 2;

/** The largest file the mount buffers (the framing limit of the socket protocol). */
const MAX_BUFFER = 1024 * 1024 * 1024;

/** EFBIG for a file that would grow past what the mount buffers (a write's end, a truncate's size). */
function fitsBuffer(size: number, op: string, path: string): void {
  if (size > MAX_BUFFER) throw new VfsError('EFBIG', op, path);
}

const S_ISUID = 0o4000;
const S_ISVTX = 0o1000;
/** Unlinks answered here (writeback mode) that may be in flight to the daemon at once. */
const MAX_UNLINKING = 256;
/**
 * Writeback mode: written data is sent once the file's descriptor serving handle-less requests (see
 * withLoose) was not used for this long. Long enough to gather a burst of writes (a script's
 * successive `>>`, a tool writing in pieces) into one send; short enough that the send, one daemon
 * call of a few milliseconds, lands well within the 1-second visibility rule.
 */
const LOOSE_SEND_MS = 200;
/**
 * ... and the descriptor is closed (its write grant released) after this long unused: a file created
 * 0444 (git's objects) stays writable for its creator while it keeps writing, as its descriptor would.
 */
const LOOSE_CLOSE_MS = 2000;

/** The open descriptor of one path's handle-less requests (writeback mode). */
interface Loose {
  fd: number;
  /** ChangeLog.now() when it was opened: a change of the path since makes it open again. */
  since: number;
  /** Date.now() at its last use, and requests using it right now. */
  last: number;
  busy: number;
  timer: NodeJS.Timeout | null;
}

/** One time of utimens: kept, the present, or nanoseconds since the epoch. */
export type UtimeArg = 'omit' | 'now' | bigint;

/**
 * What the kernel must drop when the change event of one of this mount's own mutations arrives:
 * `attrs`, the attributes of the path and of its directory (a write: the daemon set the times and
 * size, the kernel holds the content), or `dir`, its directory's only: an unlink or rmdir the daemon
 * answered before the kernel was. The kernel removes that entry itself when it gets the answer, and
 * drops the removed node's attributes, discarding any reply with older ones still in flight; its
 * directory's it only marks stale, which a reply with older ones could still overwrite, while an
 * invalidation from here discards such a reply too.
 */
export type OwnChange = 'attrs' | 'dir';

export interface MountFsOptions {
  readOnly: boolean;
  owners: Owners;
  /** The real root of a workspace mount (the daemon reports changes by real path). */
  jail?: string;
  /**
   * `mdvfs mount --writeback`: the kernel sends no open and no flush (fuse/lowlevel/ll-mount.ts), so
   * written data goes to the daemon after close(2) returned (see withLoose, settle).
   */
  writeback?: boolean;
}

export class MountFs {
  readonly files = new OpenFiles();
  /** The daemon's change events: cached answers are trusted until one concerns them. */
  private readonly log = new ChangeLog();
  private readonly cache = new ContentCache(this.log);
  /** The buffers of large files' parts, reused from one part to the next (RangedContent). */
  private readonly partPool = new PartPool();
  private readonly attrs = new AttrCache(this.log);
  private readonly listings = new ListingCache(this.log);
  /** This mount's mutations in flight, by the paths of the change event each will cause (see `own`). */
  private readonly expected = new Map<string, { taken: boolean; kernel: OwnChange }[]>();
  private readonly history: HistoryView;
  /** Write grants of closed descriptors, to release with the next batch (see dropGrant). */
  private readonly unusedGrants: string[] = [];
  private releaseTimer: NodeJS.Timeout | null = null;
  private statfsCache: { value: FuseStatfs; since: number } | undefined;
  /**
   * What the daemon answered to this mount's last create in each directory (the owner it gave; the
   * mode is the one asked for, less setuid), and ChangeLog.now() when it was asked: while nothing
   * concerning that directory or a directory above it is reported, the next create there gets the
   * same answer. A directory this mount just made has its entry too (see mkdir).
   */
  private readonly createdIn = new Map<string, { since: number; uid: number; gid: number }>();
  /** Files whose create was answered here and is not sent yet (OpenFile.unsent). */
  private readonly unsent = new Set<OpenFile>();
  /** Writeback mode: unlinks answered here and not yet answered by the daemon, by path (see unlink). */
  private readonly unlinking = new Map<string, Promise<void>>();
  /**
   * Writeback mode: ChangeLog.now() before this mount's last unlink the daemon accepted in each
   * directory without the sticky bit. While nothing concerning that directory or one above it is
   * reported, the daemon would remove any other file or link of it alike.
   */
  private readonly unlinkedIn = new Map<string, number>();
  /** Told when a file this mount answered as created was refused by the daemon: the kernel must forget it. */
  onLost: ((path: string) => void) | undefined;
  /**
   * Told when a change event taken for one of this mount's own mutations (see `own`) was someone
   * else's after all (that mutation failed): the kernel must drop what it holds of `paths`, as for
   * any change made elsewhere.
   */
  onMissed: ((paths: string[]) => void) | undefined;
  /** Writeback mode: the descriptor of each path's handle-less requests (see looseFd). */
  private readonly loose = new Map<string, Promise<Loose>>();
  /** Writeback mode: files written through `loose` descriptors, until seen clean (see settle). */
  private readonly written = new Set<OpenFile>();
  /** Those of `loose` whose open completed. */
  private readonly settledLoose = new WeakMap<Promise<Loose>, Loose>();
  /** Writeback mode: told when written data was refused after close: the kernel's copy of `path` is stale. */
  onDiscarded: ((path: string) => void) | undefined;

  /**
   * The principal owns what it creates, and the daemon checks it alone: not so for an agent acting
   * for a user (`--on-behalf-of`), checked as both. The answers this mount gives for the daemon about
   * its own new files and directories (chmodUnsent, utimensUnsent, mkdir) assume it.
   */
  private get ownsWhatItMakes(): boolean {
    return this.rpc.creds.onBehalfOf === undefined;
  }

  /**
   * Descriptors held by the kernel's opens and creates: writeback mode's handle-less ones (`loose`)
   * are the mount's own, closed by it, and do not keep a detached mount waiting.
   */
  get openByKernel(): number {
    let own = 0;
    for (const p of this.loose.values()) if (this.settledLoose.has(p)) own++;
    return this.files.openCount - own;
  }

  /** `mdvfs mount --writeback` (MountFsOptions.writeback), which the kernel side follows too. */
  get writeback(): boolean {
    return this.opts.writeback === true;
  }

  constructor(
    private readonly rpc: Caller,
    private readonly opts: MountFsOptions,
  ) {
    this.history = new HistoryView(rpc, opts.owners);
  }

  /**
   * A change reported by the daemon (any front end, this mount included): cached answers about those
   * paths and below them are stale. `paths: []` (identities changed, or the connection to the daemon
   * was lost) makes everything stale. When the event was taken for one of this mount's own mutations
   * (see `own`), which left the cached content as it is, returns what the kernel must drop for it.
   */
  onChange(ev: ChangeEvent): OwnChange | undefined {
    const paths = mountPaths(ev.paths, this.opts.jail);
    if (paths === null) {
      this.log.forgetAll();
      this.attrs.clear();
    } else if (paths.length > 0) {
      const mine = this.expected.get(paths.join('\0'))?.find((e) => !e.taken);
      if (mine) {
        mine.taken = true;
        return mine.kernel;
      }
      this.log.changed(paths);
    }
    return undefined;
  }

  // ---------- attributes and directories ----------

  /** The kernel forgot the node shown with inode number `ino` (InodeNumbers.forgotten). */
  forgotten(ino: number): void {
    this.opts.owners.inodes.forgotten(ino);
  }

  /**
   * Whether `path` is known not to exist without asking anyone: a valid listing of its directory lacks
   * it (the lookup of each new name before its create). getattr would say the same with an ENOENT error.
   */
  absent(path: string): boolean {
    return (
      path !== '/' &&
      !isHistoryPath(path) &&
      this.attrs.get(path) === undefined &&
      this.listings.has(parentOf(path), basename(path)) === false
    );
  }

  async getattr(path: string): Promise<FuseStat> {
    if (isHistoryPath(path)) return this.history.getattr(path);
    let st = this.attrs.get(path);
    if (!st) {
      // A name missing from a listing still valid does not exist (the lookup before every create).
      if (path !== '/' && this.listings.has(parentOf(path), basename(path)) === false)
        throw new VfsError('ENOENT', 'stat', path);
      await this.settle(path, 'entries');
      const since = this.log.now();
      st = toFuseStat(await this.rpc.call('fs.stat', { path, nofollow: true }), this.opts.owners);
      this.attrs.set(path, { ...st }, since);
    }
    // An open file's buffer is the truth for size (the kernel caps reads at the size we report). In
    // writeback mode only while it holds unsent writes: a clean buffer may be one a handle-less
    // descriptor keeps after a change made elsewhere (it is fetched again at its next use, see withLoose).
    const open = this.files.file(path);
    if (open?.stream && !open.data && !open.orphaned && !this.opts.writeback) st.size = open.stream.size;
    if (open?.data && !open.orphaned && (open.dirty || !this.opts.writeback)) {
      st.size = open.data.size;
      st.blocks = Math.ceil(st.size / 512);
      // Unless times were set since the last write (they go with the create, see utimensUnsent).
      const set = open.unsent?.times;
      if (open.dirty && set?.writes !== open.writes) {
        st.mtime = open.mtimeMs;
        st.mtimeNs = BigInt(open.mtimeMs) * 1_000_000n;
      }
    }
    return st;
  }

  async readdir(path: string): Promise<{ names: string[]; stats: FuseStat[] }> {
    if (isHistoryPath(path)) return this.history.readdir(path);
    const cached = this.listings.get(path);
    if (cached) return cached;
    await this.settle(path, true);
    const since = this.log.now();
    return this.remember(path, await listAll(this.rpc, path), since);
  }

  /** Caches a daemon listing (and the attributes of its non-directory entries), as readdir answers it. */
  private remember(path: string, listing: Listing, since: number): { names: string[]; stats: FuseStat[] } {
    const dot = entryToFuseStat(
      {
        name: '.',
        is_dir: true,
        is_symlink: false,
        mode: '0755',
        uid: 0,
        gid: 0,
        size: 0,
        modified: 0,
        inode_id: 0,
        mtime_ns: '0',
      },
      this.opts.owners,
    );
    // Only the type of `.` and `..` matters here (readdir attributes give d_type); stat asks getattr.
    const names = ['.', '..'];
    const stats = [dot, dot];
    for (const e of listing.entries) {
      // `.history` is reachable by name but never listed, so `ls`, `find` and `grep -r` skip it.
      if (path === '/' && `/${e.name}` === HISTORY_DIR) continue;
      names.push(e.name);
      const st = entryToFuseStat(e, this.opts.owners);
      stats.push(st);
      // The lookups that follow a listing (ls -l, grep -r, find) are answered from it. Directories are
      // left out: their link count and size come only from a full stat.
      if (!e.is_dir) this.attrs.set(childPath(path, e.name), { ...st }, since);
    }
    this.listings.set(path, { names, stats }, since);
    return { names, stats };
  }

  async access(path: string, mode: number): Promise<void> {
    if (isHistoryPath(path)) return this.history.access(path, mode);
    if (this.opts.readOnly && mode & W_OK) throw new VfsError('EROFS', 'access', path);
    await this.settle(path);
    await this.rpc.call('fs.access', { path, mode });
  }

  /**
   * The daemon's statfs, kept until any change is reported or made here: `find` and `grep -r` ask it
   * of every directory with a real link count (fts's leaf optimisation checks the filesystem type).
   */
  async statfs(): Promise<FuseStatfs> {
    const c = this.statfsCache;
    if (c && c.since === this.log.now()) return { ...c.value };
    const since = this.log.now();
    const s = await this.rpc.call('fs.statfs', {});
    const value = { ...s, frsize: s.bsize, favail: s.ffree, fsid: 0, flag: 0 };
    this.statfsCache = { value, since };
    return { ...value };
  }

  async readlink(path: string): Promise<string> {
    if (isHistoryPath(path)) return this.history.readlink(path);
    return (await this.rpc.call('fs.readlink', { path })).target;
  }

  // ---------- files ----------

  async open(path: string, flags: number): Promise<number> {
    const writable = (flags & O_ACCMODE) !== O_RDONLY;
    const truncate = (flags & O_TRUNC) !== 0;
    if (isHistoryPath(path)) {
      if (writable || truncate) throw new VfsError('EROFS', 'open', path);
      return this.files.open({ kind: 'snapshot', data: await this.history.read(path) });
    }
    if (this.opts.readOnly && (writable || truncate)) throw new VfsError('EROFS', 'open', path);
    await this.settle(path);
    const { file, grant } = await this.load(path, flags, truncate);
    const fd = this.files.open({ kind: 'file', file, writable, ...(grant !== undefined ? { grant } : {}) });
    // Empty content the daemon may not have yet (an old non-empty one, or a file never sent) is a change.
    if (truncate && (!file.data || file.data.size > 0 || file.etag === undefined)) {
      file.data = FileBuffer.empty();
      file.touch();
    }
    return fd;
  }

  /**
   * A descriptor, for writing only, of a file removed or renamed over after the kernel found it and
   * before its open got here (a race with `mv` or `rm`). As with such a file on a local filesystem,
   * what is written to it goes nowhere: nobody can open it any more. Nothing of it is sent.
   */
  openRemoved(): number {
    if (this.opts.readOnly) throw new VfsError('EROFS', 'open');
    const file = new OpenFile('', FileBuffer.empty());
    file.orphaned = true;
    return this.files.open({ kind: 'file', file, writable: true });
  }

  /**
   * Creates a file and opens it for writing. `exclusive` (O_EXCL: lock files) asks the daemon, but in
   * writeback mode. Otherwise, when the daemon's answer is known (createdIn: this mount's last create
   * in the same directory succeeded, or it made the directory, nothing concerning the directory or
   * above was reported since, and its listing says the name is free) the create is answered here and
   * sent with the file's first flush, as one exclusive write of its content: a new file costs one
   * daemon call, not two. Should the daemon refuse it after all (a change made elsewhere whose event
   * had not arrived), that flush (close, fsync) returns the error and the name goes away; in
   * writeback mode, where close(2) returned before, the refusal is logged (see refused).
   */
  async create(path: string, mode: number, exclusive = true): Promise<number> {
    this.writable(path, 'create');
    const dir = parentOf(path);
    const known = this.createdIn.get(dir);
    if (
      (!exclusive || this.opts.writeback === true) &&
      known !== undefined &&
      this.log.unchanged(dir, known.since) &&
      this.listings.has(dir, basename(path)) === false &&
      this.files.file(path) === undefined
    )
      return this.createHere(path, mode & 0o7777, known);
    await this.settle(path);
    this.attrs.invalidate(path);
    // The kernel asks for the new file's attributes right after creating it: the write answers them too.
    const since = this.log.now();
    // The grant keeps this descriptor writable whatever the mode (open(O_CREAT|O_WRONLY, 0444) as git does).
    const r = await this.own([path], () =>
      this.rpc.call(
        'fs.write',
        { path, mode: mode & 0o7777, parents: false, exclusive: true, stat: true, want_grant: true },
        { data: Buffer.alloc(0) },
      ),
    );
    this.attrs.invalidate(path); // the directory's mtime and size changed
    if (r.created && r.path === path && r.stat) {
      const st = toFuseStat(r.stat, this.opts.owners);
      this.attrs.set(path, st, since);
      this.listings.add(dir, basename(path), st);
      this.createdIn.set(dir, { since, uid: st.uid, gid: st.gid });
    } else this.changed(path);
    // The daemon just created the file: anything still recorded under that name is an old, gone file.
    this.files.unlink(path);
    this.cache.delete(path);
    const file = this.files.adopt(new OpenFile(path, FileBuffer.empty()));
    file.etag = r.etag;
    return this.files.open({
      kind: 'file',
      file,
      writable: true,
      ...(r.grant !== undefined ? { grant: r.grant } : {}),
    });
  }

  /** A create answered from what the daemon answered last time (see create): nothing is sent yet. */
  private createHere(path: string, mode: number, known: { uid: number; gid: number }): number {
    const now = Date.now();
    const ns = BigInt(now) * 1_000_000n;
    const ino = this.opts.owners.inodes.provisional();
    const st: FuseStat = {
      mode: S_IFREG | (mode & ~S_ISUID),
      uid: known.uid,
      gid: known.gid,
      size: 0,
      nlink: 1,
      ino,
      blksize: 4096,
      blocks: 0,
      atime: now,
      mtime: now,
      ctime: now,
      atimeNs: ns,
      mtimeNs: ns,
      ctimeNs: ns,
    };
    this.statfsCache = undefined;
    this.attrs.invalidate(path);
    this.attrs.set(path, { ...st }, this.log.now());
    this.listings.add(parentOf(path), basename(path), st);
    this.cache.delete(path);
    const file = this.files.adopt(new OpenFile(path, FileBuffer.empty()));
    file.touch();
    const handle = { kind: 'file' as const, file, writable: true };
    const fd = this.files.open(handle);
    file.unsent = { mode, fd, handle, ino };
    this.unsent.add(file);
    return fd;
  }

  /**
   * Sends the creates, unlinks and (writeback mode) writes answered here that a daemon call about
   * `path` must find done: those of `path`, and with `below` those of anything under it, or with
   * 'entries' those of its entries (a directory's mtime and size: rsync sets a directory's times
   * after writing its files only if they differ). A refusal is kept for the file's next flush to
   * report (see send).
   */
  private async settle(path: string, below: boolean | 'entries' = false): Promise<void> {
    const prefix = path === '/' ? '/' : `${path}/`;
    const concerns = (p: string): boolean =>
      p === path || (below === 'entries' ? parentOf(p) === path : below && p.startsWith(prefix));
    if (this.unlinking.size > 0) {
      const pending = [...this.unlinking].filter(([p]) => concerns(p));
      await Promise.all(pending.map(([, done]) => done));
    }
    if (this.unsent.size === 0 && this.written.size === 0) return;
    const at = (f: OpenFile): boolean => concerns(f.path);
    const due = [...this.unsent].filter(at);
    // Writeback mode: what was written there goes first too (its close(2) may have returned already).
    const dirty: OpenFile[] = [];
    for (const f of this.written) {
      if (!f.dirty || f.orphaned) this.written.delete(f);
      else if (f.unsent === undefined && at(f)) dirty.push(f);
    }
    await Promise.all([
      ...due.map((f) => f.serialize(() => this.send(f))),
      ...dirty.map((f) => f.serialize(() => this.send(f)).catch((err: unknown) => this.refused(f, err))),
    ]);
  }

  /**
   * Up to `len` bytes at `pos`: a copy, or a view of a large file's part (fetched as read, see
   * RangedContent), valid until the end of the event-loop turn it is returned in: copy it out at once.
   */
  async read(fd: number, len: number, pos: number): Promise<Buffer> {
    const h = this.handle(fd, 'read');
    if (h.kind === 'snapshot') return copyOut(h.data, len, pos);
    const from = await this.readable(h.file);
    if (from instanceof RangedContent) return from.read(pos, len);
    const buf = Buffer.allocUnsafe(Math.max(0, Math.min(len, from.size - pos)));
    return buf.subarray(0, from.read(buf, len, pos));
  }

  async write(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
    const h = this.handle(fd, 'write');
    if (h.kind !== 'file' || !h.writable) throw new VfsError('EROFS', 'write', HISTORY_DIR);
    fitsBuffer(pos + len, 'write', h.file.path);
    (await this.content(h.file)).write(buf, len, pos);
    h.file.touch();
    return len;
  }

  async truncate(path: string, size: number): Promise<void> {
    this.writable(path, 'truncate');
    await this.settle(path);
    this.changed(path);
    const open = this.files.file(path);
    if (!open) {
      await this.rpc.call('fs.truncate', { path, size });
      return;
    }
    // Another descriptor holds the file: change its buffer, and publish at once as truncate(2) would.
    fitsBuffer(size, 'truncate', path);
    await this.rpc.call('fs.access', { path, mode: W_OK });
    (await this.content(open)).truncate(size);
    open.touch();
    await this.flushFile(open);
  }

  async ftruncate(fd: number, size: number): Promise<void> {
    const h = this.handle(fd, 'ftruncate');
    if (h.kind !== 'file') throw new VfsError('EROFS', 'ftruncate', HISTORY_DIR);
    if (!h.writable) await this.rpc.call('fs.access', { path: h.file.path, mode: W_OK });
    fitsBuffer(size, 'ftruncate', h.file.path);
    (await this.content(h.file)).truncate(size);
    h.file.touch();
  }

  /**
   * Sends the descriptor's file (fsync; `closing`: a close, FUSE flush). A file created here and
   * still empty waits at a close for its content or its last release: a shell's `> file` opens, dups
   * and closes the descriptor before writing, which would otherwise cost the create a call of its own.
   */
  async flush(fd: number, closing = false): Promise<void> {
    const h = this.files.handle(fd);
    if (h?.kind !== 'file') return;
    if (closing && h.file.unsent !== undefined && h.file.data?.size === 0) return;
    await this.flushFile(h.file);
  }

  async release(fd: number): Promise<void> {
    const h = this.files.close(fd);
    if (h?.kind !== 'file') return;
    const file = h.file;
    try {
      if (file.refs === 0) await this.flushFile(file);
    } finally {
      if (file.refs === 0) {
        this.files.forget(file);
        file.stream?.stop();
      }
      if (h.grant !== undefined) await this.releaseGrant(file, h.grant);
    }
  }

  /** Ends a descriptor's write grant, after any flush that may still be using it. */
  private releaseGrant(file: OpenFile, grant: string): Promise<void> {
    return file.serialize(async () => {
      file.grants.delete(grant);
      this.dropGrant(grant);
    });
  }

  /**
   * Grants no descriptor uses any more go back to the daemon in batches, off the close path: one call
   * per 100 ms at most instead of one per file. Not using one is what matters; releasing it only
   * frees the daemon's memory (and it drops them anyway when this connection closes).
   */
  private dropGrant(grant: string): void {
    this.unusedGrants.push(grant);
    this.releaseTimer ??= setTimeout(() => {
      this.releaseTimer = null;
      while (this.unusedGrants.length > 0) {
        const grants = this.unusedGrants.splice(0, 10000);
        void this.rpc.call('fs.releaseGrant', { grants }).catch(() => undefined);
      }
    }, 100);
    this.releaseTimer.unref();
  }

  // ---------- writeback mode: requests without a handle ----------

  /** read(2) of a file opened with no request to the mount (writeback mode: fh 0). */
  readLoose(path: string, len: number, pos: number): Promise<Buffer> {
    return this.withLoose(path, false, (fd) => this.read(fd, len, pos));
  }

  /** write(2) to a file opened with no request to the mount (writeback mode: fh 0). */
  writeLoose(path: string, buf: Buffer, len: number, pos: number): Promise<number> {
    return this.withLoose(path, true, (fd) => this.write(fd, buf, len, pos));
  }

  /** fsync(2) of a file opened with no request to the mount: what was written is durable when it returns. */
  async fsyncLoose(path: string): Promise<void> {
    const file = this.files.file(path);
    if (file) await this.flushFile(file);
  }

  /**
   * Writeback mode: a release, after close(2) returned. A send the daemon refuses cannot be returned
   * to anyone any more: it is logged, and the file shows what the daemon holds (see refused).
   */
  private async releaseLate(fd: number): Promise<void> {
    const h = this.files.handle(fd);
    try {
      await this.release(fd);
    } catch (err) {
      if (h?.kind === 'file') this.refused(h.file, err);
    }
    if (h?.kind === 'file' && !h.file.dirty) this.written.delete(h.file);
  }

  /**
   * Runs `fn` with the descriptor serving `path`'s requests that carry no handle: in writeback mode
   * the kernel sends no open (fuse/lowlevel/ll-mount.ts), so this one is opened here on the first
   * read or write, as open(2) would open it: a read checks read access with the daemon (or finds it
   * confirmed, as open does), a write takes a write grant (`fs.grantWrite`), so a refusal is EACCES at
   * read(2)/write(2) instead of open(2). It is shared by every such descriptor of the file (they share
   * one buffer anyway), opened again after any change concerning the path was reported (a chmod
   * through REST is enforced on the next read or write that reaches the mount); what was written is
   * sent LOOSE_SEND_MS after its last use, and it is closed LOOSE_CLOSE_MS after it (idleLoose).
   */
  private async withLoose<T>(path: string, write: boolean, fn: (fd: number) => Promise<T>): Promise<T> {
    for (;;) {
      let p = this.loose.get(path);
      if (p === undefined) {
        const since = this.log.now();
        const opening: Promise<Loose> = this.open(path, write ? O_RDWR : O_RDONLY).then((fd) => {
          const l: Loose = { fd, since, last: Date.now(), busy: 0, timer: null };
          this.settledLoose.set(opening, l);
          return l;
        });
        p = opening;
        this.loose.set(path, opening);
        opening.catch(() => {
          if (this.loose.get(path) === opening) this.loose.delete(path);
        });
      }
      const l = await p;
      if (this.loose.get(path) !== p) continue; // closed meanwhile
      if (!this.log.unchanged(path, l.since)) {
        this.closeLoose(path, p, l);
        continue;
      }
      l.busy++;
      try {
        const h = this.files.handle(l.fd);
        if (write && h?.kind === 'file' && !h.writable) {
          // A descriptor a read opened: a read-only mount (or .history) refuses the write here, as its open would.
          this.writable(path, 'write');
          const { grant } = await this.checkOpen(path, W_OK);
          h.writable = true;
          if (grant !== undefined) {
            h.grant = grant;
            h.file.grants.add(grant);
          }
        }
        const r = await fn(l.fd);
        if (write && h?.kind === 'file') this.written.add(h.file);
        return r;
      } finally {
        l.busy--;
        l.last = Date.now();
        this.idleLoose(path, p, l);
      }
    }
  }

  /**
   * Writeback mode: a file just created (CREATE is still sent, answered with handle 0: the kernel
   * sends no release once opens are not sent, even for created files) is written through the path's
   * handle-less descriptor, which is the creating one: writable under the create's grant whatever
   * the mode (open(O_CREAT|O_WRONLY, 0444)).
   */
  adoptLoose(path: string, fd: number): void {
    const old = this.loose.get(path);
    if (old !== undefined) void old.then((l) => this.closeLoose(path, old, l)).catch(() => undefined);
    const l: Loose = { fd, since: this.log.now(), last: Date.now(), busy: 0, timer: null };
    const p = Promise.resolve(l);
    this.loose.set(path, p);
    this.settledLoose.set(p, l);
    this.idleLoose(path, p, l);
  }

  /**
   * Writeback mode: `path` was removed; its handle-less descriptor, if one is open, is handed over to
   * serve the reads of descriptors still open on the removed file (the caller releases it when the
   * kernel forgets the inode). Without one, such reads get only what the kernel holds.
   */
  detachLoose(path: string): number | undefined {
    const p = this.loose.get(path);
    if (p === undefined) return undefined;
    this.loose.delete(path);
    let fd: number | undefined;
    // Settled entries only (an open still in flight is left to fail or close on its own).
    void p.then((l) => {
      if (l.timer !== null) clearTimeout(l.timer);
      l.timer = null;
      if (fd === undefined) void this.releaseLate(l.fd);
    });
    const settled = this.settledLoose.get(p);
    if (settled !== undefined) {
      fd = settled.fd;
      if (settled.timer !== null) clearTimeout(settled.timer);
      settled.timer = null;
    }
    return fd;
  }

  /**
   * The idle timer of a handle-less descriptor: LOOSE_SEND_MS after its last use, what was written is
   * sent; LOOSE_CLOSE_MS after it, the descriptor is closed.
   */
  private idleLoose(path: string, p: Promise<Loose>, l: Loose): void {
    if (l.timer !== null) clearTimeout(l.timer);
    const h = this.files.handle(l.fd);
    const dirty = h?.kind === 'file' && h.file.dirty;
    l.timer = setTimeout(
      () => {
        l.timer = null;
        if (this.loose.get(path) !== p) return;
        const idle = Date.now() - l.last;
        if (l.busy > 0 || idle < LOOSE_SEND_MS) return this.idleLoose(path, p, l);
        if (idle >= LOOSE_CLOSE_MS) return this.closeLoose(path, p, l);
        const h = this.files.handle(l.fd);
        if (h?.kind !== 'file' || !h.file.dirty) return this.idleLoose(path, p, l);
        const file = h.file;
        void this.flushFile(file)
          .catch((err: unknown) => this.refused(file, err))
          .finally(() => {
            if (!file.dirty) this.written.delete(file);
            if (this.loose.get(path) === p && l.timer === null) this.idleLoose(path, p, l);
          });
      },
      Math.max(1, l.last + (dirty ? LOOSE_SEND_MS : LOOSE_CLOSE_MS) - Date.now()),
    );
    l.timer.unref();
  }

  private closeLoose(path: string, p: Promise<Loose>, l: Loose): void {
    if (this.loose.get(path) === p) this.loose.delete(path);
    if (l.timer !== null) clearTimeout(l.timer);
    l.timer = null;
    void this.releaseLate(l.fd);
  }

  /**
   * Writeback mode: the daemon refused data whose close(2) had returned (a size limit, a grant gone
   * with a reconnection, a create that lost a race). Nobody can be told but the log: one line naming
   * the path and the error. The buffer is dropped, so the file shows what the daemon holds, and the
   * kernel's copy with it (onDiscarded).
   */
  private refused(file: OpenFile, err: unknown): void {
    const why = err instanceof Error ? err.message : String(err);
    process.stderr.write(`mdvfs mount: ${file.path}: written data not saved, the daemon refused it: ${why}\n`);
    file.dirty = false;
    file.data = null;
    file.etag = undefined;
    this.cache.delete(file.path);
    this.attrs.invalidate(file.path);
    this.changed(file.path);
    this.onDiscarded?.(file.path);
  }

  /** Sends every changed buffer to the daemon (before unmounting). */
  async flushAll(): Promise<void> {
    await Promise.allSettled([
      ...this.files.allFiles().map((f) =>
        this.flushFile(f).catch((err: unknown) => {
          // Writeback mode: every close(2) returned already, so the log is the only one to tell.
          if (this.opts.writeback) this.refused(f, err);
        }),
      ),
      ...this.unlinking.values(),
    ]);
  }

  // ---------- namespace ----------

  async mkdir(path: string, mode: number): Promise<void> {
    this.writable(path, 'mkdir');
    await this.settle(path);
    this.attrs.invalidate(path);
    // The new directory's listing comes in the same round trip (the daemon answers in order): the
    // lookups of the files created in it next are answered from it.
    const since = this.log.now();
    const [r, listing] = await this.own([path], () =>
      Promise.all([
        this.rpc.call('fs.mkdir', { path, mode: mode & 0o7777, parents: false, stat: true }),
        this.rpc.call('fs.list', { path }).catch(() => null),
      ]),
    );
    this.attrs.invalidate(path);
    if (!r.created || listing === null || r.stat === undefined) {
      this.changed(path);
      return;
    }
    this.remember(path, listing, since);
    const st = toFuseStat(r.stat, this.opts.owners);
    this.attrs.set(path, { ...st }, since);
    this.listings.add(parentOf(path), basename(path), st);
    // Files its maker creates in it belong to the maker and to the directory's group (the maker's own
    // group, or the setgid group it was given): the daemon's answer to a create there is known, when the
    // maker may create in it (write and search for its owner).
    if ((st.mode & 0o300) === 0o300 && this.ownsWhatItMakes)
      this.createdIn.set(path, { since, uid: st.uid, gid: st.gid });
  }

  async rmdir(path: string): Promise<void> {
    this.writable(path, 'rmdir');
    await this.settle(path, true);
    this.changed(path);
    // As for unlink: the kernel removes the entry itself when the answer comes.
    await this.own([path], () => this.rpc.call('fs.rmdir', { path }), 'dir');
    this.changed(path);
  }

  async unlink(path: string): Promise<void> {
    this.writable(path, 'unlink');
    if (this.opts.writeback && this.unlinkHere(path)) return;
    await this.settle(path);
    const since = this.log.now();
    this.changed(path);
    // The kernel removes the entry itself when this unlink is answered: its change event drops the
    // directory's attributes only (one write to the kernel instead of three per file of `rm -rf`, one
    // of which waited for the directory's lock that `rm` holds; OwnChange).
    await this.own([path], () => this.rpc.call('fs.unlink', { path }), 'dir');
    this.changed(path);
    this.files.unlink(path);
    this.cache.delete(path);
    const dir = parentOf(path);
    const known = this.unlinkedIn.get(dir);
    if (this.opts.writeback && (known === undefined || !this.log.unchanged(dir, known))) {
      const st = await this.getattr(dir).catch(() => undefined);
      if (st !== undefined && !(st.mode & S_ISVTX)) this.unlinkedIn.set(dir, since);
    }
  }

  /**
   * Writeback mode (`rm -rf` at the speed of the kernel's requests): an unlink the daemon is known to
   * accept (see unlinkedIn: its last unlink in the same directory was accepted, nothing concerning the
   * directory was reported since, and the entry is a file or link no descriptor of this mount holds) is
   * answered at once and sent behind the answer. Every later daemon call about the path or a directory
   * above it waits for it (settle). Should the daemon refuse it after all (a change made elsewhere
   * whose event had not arrived), the refusal is logged and the file shows again. Returns whether the
   * unlink was answered here.
   */
  private unlinkHere(path: string): boolean {
    const dir = parentOf(path);
    const since = this.unlinkedIn.get(dir);
    if (since === undefined || !this.log.unchanged(dir, since) || this.unlinking.size >= MAX_UNLINKING) return false;
    const st = this.attrs.get(path);
    if (st === undefined || (st.mode & S_IFMT) === S_IFDIR || this.files.file(path) !== undefined) return false;
    this.attrs.invalidate(path);
    this.listings.removed(dir, basename(path));
    this.cache.delete(path);
    const done = this.own([path], () => this.rpc.call('fs.unlink', { path })).then(
      () => undefined,
      (err: unknown) => {
        if (err instanceof VfsError && err.code === 'ENOENT') return; // gone already: as asked
        process.stderr.write(
          `mdvfs mount: unlink of ${path} refused after it was answered: ${err instanceof Error ? err.message : String(err)}\n`,
        );
        this.unlinkedIn.delete(dir);
        this.changed(path);
        this.onLost?.(path);
      },
    );
    this.unlinking.set(path, done);
    void done.finally(() => {
      if (this.unlinking.get(path) === done) this.unlinking.delete(path);
    });
    return true;
  }

  async rename(src: string, dst: string): Promise<void> {
    this.writable(src, 'rename');
    this.writable(dst, 'rename');
    if (this.renameUnsent(src, dst)) return;
    await Promise.all([this.settle(src, true), this.settle(dst, true)]);
    const st = this.attrs.get(src);
    if (st === undefined || (st.mode & S_IFMT) === S_IFDIR || this.files.file(dst) !== undefined) {
      // A directory (everything below it moves), or what the mount knows too little about: drop it all.
      this.changed(src);
      this.changed(dst);
      await this.rpc.call('fs.move', { src, dst, overwrite: true });
      this.changed(src);
      this.changed(dst);
      this.files.rename(src, dst);
      this.cache.delete(src);
      this.cache.delete(dst);
      return;
    }
    // A file or link (rsync, git and editors rename every file they write): the move's own event is
    // expected, and the cached listings of both directories follow the move instead of being dropped,
    // so the lookups of the next names in them still cost no daemon call.
    this.attrs.invalidate(src);
    this.attrs.invalidate(dst);
    this.cache.delete(src);
    this.cache.delete(dst);
    const r = await this.own([src, dst], () => this.rpc.call('fs.move', { src, dst, overwrite: true, stat: true }));
    this.attrs.invalidate(src);
    this.attrs.invalidate(dst);
    this.files.rename(src, dst, r.stat === undefined || r.stat.kind === 'directory');
    this.cache.delete(src);
    this.cache.delete(dst);
    if (r.src !== src || r.dst !== dst || !r.stat) {
      this.changed(src);
      this.changed(dst);
      return;
    }
    const moved = toFuseStat(r.stat, this.opts.owners);
    const since = this.log.now();
    this.attrs.set(dst, { ...moved }, since);
    this.listings.moved(parentOf(src), basename(src), parentOf(dst), basename(dst), moved);
  }

  /**
   * A rename, within its directory and to a free name, of a file whose create was answered here and is
   * not sent yet (rsync's and git's temporary files): the create is sent under the new name instead,
   * which comes to the same for everyone else (nobody saw the old one). Returns whether it was answered here.
   */
  private renameUnsent(src: string, dst: string): boolean {
    const file = this.files.file(src);
    const dir = parentOf(src);
    const st = this.attrs.get(src);
    if (
      file?.unsent === undefined ||
      file.orphaned ||
      st === undefined ||
      parentOf(dst) !== dir ||
      this.listings.has(dir, basename(dst)) !== false ||
      this.files.file(dst) !== undefined ||
      this.unlinking.has(dst)
    )
      return false;
    // Writeback mode: the path's handle-less descriptor (the creating one) follows the file.
    const loose = this.loose.get(src);
    const l = loose && this.settledLoose.get(loose);
    if (loose !== undefined && l === undefined) return false; // still opening: not this file's
    this.files.rename(src, dst, false);
    this.attrs.invalidate(src);
    this.attrs.set(dst, { ...st }, this.log.now());
    this.listings.moved(dir, basename(src), dir, basename(dst), st);
    this.cache.delete(src);
    this.cache.delete(dst);
    if (loose !== undefined && l !== undefined) {
      this.loose.delete(src);
      this.loose.set(dst, loose);
      this.idleLoose(dst, loose, l);
    }
    return true;
  }

  async symlink(target: string, path: string): Promise<void> {
    this.writable(path, 'symlink');
    await this.settle(path);
    this.changed(path);
    await this.rpc.call('fs.symlink', { target, path });
    this.changed(path);
  }

  async link(src: string, dst: string): Promise<void> {
    this.writable(dst, 'link');
    // The store has no hard links (one name per inode), so link(2) is refused like on filesystems without them.
    throw new VfsError('EPERM', 'link', src);
  }

  // ---------- metadata ----------

  async chmod(path: string, mode: number): Promise<void> {
    this.writable(path, 'chmod');
    if (this.chmodUnsent(path, mode)) return;
    await this.settle(path, true); // a directory: the creates below it first (their mtime, their access)
    await this.setAttrs(path, () => this.rpc.call('fs.chmod', { path, mode: mode & 0o7777, stat: true }));
  }

  /**
   * A chmod of a file whose create was answered here and is not sent yet (rsync's fchmod right after
   * mkstemp): the create is sent with that mode instead, which comes to the same, as its creator owns
   * it. Only plain permission bits: the daemon may drop a setgid bit a create would keep. Returns
   * whether it was answered here.
   */
  private chmodUnsent(path: string, mode: number): boolean {
    const file = this.files.file(path);
    const create = file?.unsent;
    const st = this.attrs.get(path);
    const perm = mode & 0o7777;
    if (create === undefined || file!.orphaned || perm & ~0o777 || st === undefined || !this.ownsWhatItMakes)
      return false;
    create.mode = perm;
    const now = Date.now();
    const changed = { ...st, mode: (st.mode & S_IFMT) | perm, ctime: now, ctimeNs: BigInt(now) * 1_000_000n };
    this.attrs.set(path, changed, this.log.now());
    this.listings.add(parentOf(path), basename(path), { ...changed });
    return true;
  }

  /**
   * Times set on a file whose create was answered here and is not sent yet (`cp -p`, rsync): they go
   * with the create (fs.write's atime and mtime), as its creator may set them. Returns whether it was
   * answered here.
   */
  private utimensUnsent(path: string, atime: UtimeArg, mtime: UtimeArg): boolean {
    const file = this.files.file(path);
    const create = file?.unsent;
    const st = this.attrs.get(path);
    if (create === undefined || file!.orphaned || st?.atimeNs === undefined || st.mtimeNs === undefined) return false;
    if (!this.ownsWhatItMakes) return false;
    const now = BigInt(Date.now()) * 1_000_000n;
    const set = create.times?.writes === file!.writes ? create.times : undefined;
    // The times now: those set before, else the last write's (the file is not sent yet) or the create's.
    const cur = {
      atime: set?.atime ?? st.atimeNs,
      mtime: set?.mtime ?? (file!.dirty ? BigInt(file!.mtimeMs) * 1_000_000n : st.mtimeNs),
    };
    const pick = (t: UtimeArg, kept: bigint): bigint => (t === 'omit' ? kept : t === 'now' ? now : t);
    const times = { atime: pick(atime, cur.atime), mtime: pick(mtime, cur.mtime), writes: file!.writes };
    create.times = times;
    const ms = (ns: bigint): number => Number(ns / 1_000_000n);
    const changed: FuseStat = {
      ...st,
      atime: ms(times.atime),
      mtime: ms(times.mtime),
      ctime: ms(now),
      atimeNs: times.atime,
      mtimeNs: times.mtime,
      ctimeNs: now,
    };
    this.attrs.set(path, changed, this.log.now());
    this.listings.add(parentOf(path), basename(path), { ...changed });
    return true;
  }

  async chown(path: string, uid: number, gid: number): Promise<void> {
    this.writable(path, 'chown');
    await this.settle(path, true);
    const owner = this.opts.owners.uidIn(uid);
    const group = this.opts.owners.gidIn(gid);
    if (owner === undefined && group === undefined) return;
    // The kernel resolved symlinks already: the path names the inode to change.
    await this.setAttrs(path, () => this.rpc.call('fs.chown', { path, owner, group, nofollow: true, stat: true }));
  }

  /**
   * Sets the times of `path` itself (a symlink's own: the kernel resolved any links before), each
   * kept ('omit'), the present ('now') or nanoseconds since the epoch (to the nanosecond).
   */
  async utimens(path: string, atime: UtimeArg, mtime: UtimeArg): Promise<void> {
    this.writable(path, 'utimens');
    if (this.utimensUnsent(path, atime, mtime)) return;
    await this.settle(path, true);
    // A pending write would otherwise overwrite the times when it is flushed (cp -p sets times before close).
    const open = this.files.file(path);
    if (open) await this.flushFile(open);
    let times: { atime?: number | string; mtime?: number | string } = {};
    if (atime !== 'now' || mtime !== 'now') {
      // An omitted time is sent as its current value (to the nanosecond), so that it stays as it was.
      const cur =
        atime === 'omit' || mtime === 'omit' ? await this.rpc.call('fs.stat', { path, nofollow: true }) : undefined;
      const pick = (t: UtimeArg, kept: string | undefined): number | string =>
        t === 'omit' ? (kept ?? Date.now()) : t === 'now' ? Date.now() : t.toString();
      times = { atime: pick(atime, cur?.atime_ns), mtime: pick(mtime, cur?.mtime_ns) };
    }
    await this.setAttrs(
      path,
      async () => {
        try {
          return await this.rpc.call('fs.utimens', { path, ...times, nofollow: true, stat: true });
        } catch (err) {
          // `touch -m` / `touch -a` by a writer who does not own the file: utimensat(2) allows them "now" only,
          // which the daemon grants when no time is named (both become now). Explicit times stay refused.
          if (
            !(err instanceof VfsError && err.code === 'EPERM') ||
            typeof atime === 'bigint' ||
            typeof mtime === 'bigint'
          )
            throw err;
          return this.rpc.call('fs.utimens', { path, nofollow: true, stat: true });
        }
      },
      true,
    );
  }

  /**
   * Runs `send`, a change of the attributes of `path` alone (chmod, chown, utimens), and keeps the
   * attributes it answered (the kernel asks for them right after a setattr), taken after the reply:
   * every event of a change made before it has arrived by then, and later ones drop them. For a file
   * or link the mount knows, the change's own event is expected (own) and its directory's cached
   * listing takes the new attributes instead of being dropped (rsync and `cp -p` set the mode and
   * times of every file they write). A directory's chmod or chown concerns everything below it (what
   * the principal may reach there): dropped. Its times (`onlyTimes`) concern nothing below it: its
   * cached listing stays valid (rsync sets the times of each directory after creating an entry in it).
   */
  private async setAttrs(
    path: string,
    send: () => Promise<{ stat?: Stat | undefined }>,
    onlyTimes = false,
  ): Promise<void> {
    const known = this.attrs.get(path);
    if (known === undefined || ((known.mode & S_IFMT) === S_IFDIR && !onlyTimes)) {
      this.changed(path);
      let r: { stat?: Stat | undefined };
      try {
        r = await send();
      } finally {
        this.changed(path);
      }
      const since = this.log.now();
      if (r.stat) this.attrs.set(path, toFuseStat(r.stat, this.opts.owners), since);
      // A directory's listing is fetched again under the access it gives now (one call; a listing of
      // more than one page is not kept), so that the lookups that follow are still answered from it:
      // rsync sets the mode and times of each directory it creates, and every file's lookups in it
      // (three) then went to the daemon one by one.
      if (r.stat?.kind === 'directory') {
        const listing = await this.rpc.call('fs.list', { path }).catch(() => null);
        if (listing !== null && listing.truncated !== true) this.remember(path, listing, since);
      }
      return;
    }
    // The access it gives may change: what was read under the old one is dropped.
    this.attrs.invalidate(path);
    this.cache.delete(path);
    let r: { stat?: Stat | undefined };
    try {
      r = await this.own([path], send);
    } finally {
      this.attrs.invalidate(path);
      this.cache.delete(path);
    }
    if (!r.stat) return this.changed(path);
    const st = toFuseStat(r.stat, this.opts.owners);
    this.attrs.set(path, { ...st }, this.log.now());
    this.listings.add(parentOf(path), basename(path), st);
  }

  // ---------- helpers ----------

  /**
   * Runs a mutation of this mount whose change event (exactly `paths`) the daemon sends before its
   * reply. That event is not recorded as a change: the caller updates its caches from the reply. If an
   * event with the same paths comes from someone else first, it is taken for ours and ours is recorded
   * when it comes; if the mutation fails (no event of ours), a taken event is recorded at the reply.
   * Either way no change made by someone else goes unrecorded (nor kept by the kernel: onMissed).
   * `kernel`: what the kernel must drop when the event comes (OwnChange).
   */
  private async own<T>(paths: string[], send: () => Promise<T>, kernel: OwnChange = 'attrs'): Promise<T> {
    this.statfsCache = undefined; // the usage changes
    const key = paths.join('\0');
    const mine = { taken: false, kernel };
    const list = this.expected.get(key);
    if (list) list.push(mine);
    else this.expected.set(key, [mine]);
    try {
      return await send();
    } catch (err) {
      if (mine.taken) {
        this.log.changed(paths);
        this.onMissed?.(paths);
      }
      throw err;
    } finally {
      const l = this.expected.get(key)!;
      l.splice(l.indexOf(mine), 1);
      if (l.length === 0) this.expected.delete(key);
    }
  }

  /** This mount changes `path`: cached answers about it, below it and about its directory are stale. */
  private changed(path: string): void {
    this.log.changed([path]);
  }

  private writable(path: string, op: string): void {
    if (this.opts.readOnly || isHistoryPath(path)) throw new VfsError('EROFS', op, path);
  }

  private handle(fd: number, op: string) {
    const h = this.files.handle(fd);
    if (!h) throw new VfsError('EINVAL', op, undefined, `bad file handle ${fd}`);
    return h;
  }

  /**
   * The OpenFile for a new descriptor. A file nobody has open is fetched (or revalidated by etag);
   * an open one with unsent writes is shared as it is, after checking the new opener's access.
   */
  private async load(path: string, flags: number, truncate: boolean): Promise<{ file: OpenFile; grant?: string }> {
    const acc = flags & O_ACCMODE;
    const mode = (acc === O_WRONLY ? 0 : R_OK) | (acc !== O_RDONLY || truncate ? W_OK : 0);
    const open = this.files.file(path);
    if (open && (open.dirty || truncate)) return { file: open, ...(await this.checkOpen(path, mode)) };
    if (truncate) {
      // The old content is about to be discarded: check access without transferring it.
      const checked = await this.checkOpen(path, mode);
      return { file: this.files.adopt(new OpenFile(path, FileBuffer.empty())), ...checked };
    }
    const since = this.log.now();
    if (!open && !(mode & W_OK)) {
      // Re-reading what the daemon let this principal read, with no change reported since that could
      // alter the content or the access to it (grep -r, builds, editors re-opening): no round trip.
      const c = this.cache.fresh(path);
      if (c) {
        const file = new OpenFile(path, c.data ? new FileBuffer(c.data, true) : null);
        file.etag = c.etag;
        return { file: this.files.adopt(file) };
      }
    }
    // Reading checks read access; a writer also needs write access (write-only files are not supported).
    // A reader gets the first part only: a larger file's other parts are fetched as the kernel reads them.
    const known = open?.etag !== undefined ? { etag: open.etag, data: undefined } : this.cache.get(path);
    // When the answer was asked for: a buffer made newer since keeps what it holds (below).
    const asked = tick();
    const [read, checked] = await Promise.allSettled([
      this.rpc.request('fs.read', {
        path,
        ...(known ? { if_none_match: known.etag } : {}),
        ...(mode & W_OK ? {} : { offset: 0, length: PART }),
      }),
      mode & W_OK ? this.checkOpen(path, W_OK) : Promise.resolve<{ grant?: string }>({}),
    ]);
    if (read.status === 'rejected' || checked.status === 'rejected') {
      if (checked.status === 'fulfilled' && checked.value.grant !== undefined) this.dropGrant(checked.value.grant);
      throw read.status === 'rejected' ? read.reason : (checked as PromiseRejectedResult).reason;
    }
    const granted = checked.value;
    const { result, data } = read.value;
    const current = this.files.file(path);
    if (current?.dirty) return { file: current, ...granted };
    // Written or sent by a descriptor of this mount since the answer was asked for (another process
    // appending, whose close sent it): the answer may predate those bytes. Taking it would drop them
    // from the buffer while the kernel's size still counts them: the next append would leave a hole
    // of zeros. (An answer asked for later than the buffer's content is taken: it is as new or newer.)
    if (current && current.version > asked) return { file: current, ...granted };
    let content: FileBuffer | null = null;
    /** The first part of a file larger than it (a reader's open): the rest is fetched as it is read. */
    let first: Buffer | undefined;
    if (result.not_modified) {
      this.cache.confirm(path, result.etag, since);
      if (current && current.etag === result.etag) return { file: current, ...granted };
      // Unchanged since we last saw it: reuse the bytes we kept, or fetch them on the first read. The
      // descriptor whose etag was asked about may have closed meanwhile (a shell's `echo > f; exec 3< f`
      // races the release of the writer): the bytes it sent are still kept under that etag.
      const cached = this.cache.get(path);
      const bytes = known?.data ?? (cached?.etag === result.etag ? cached.data : undefined);
      content = bytes ? new FileBuffer(bytes, true) : null;
    } else if (data.length >= result.size) {
      content = new FileBuffer(data, true);
      this.cache.set(path, result.etag, data, since, true);
    } else first = data;
    // Open but clean, and changed outside the mount since: it takes the new content.
    const file = current ?? new OpenFile(path, null);
    file.stream?.stop();
    file.data = content;
    file.stream = first ? this.ranged(file, result, first, since) : null;
    file.etag = result.etag;
    file.version = asked;
    return { file: current ?? this.files.adopt(file), ...granted };
  }

  /**
   * Checks the access of an open: for writing, the daemon answers a write grant, under which this
   * descriptor's writes are sent (POSIX checks access at open, not at each write).
   */
  private async checkOpen(path: string, mode: number): Promise<{ grant?: string }> {
    if (!(mode & W_OK)) {
      await this.rpc.call('fs.access', { path, mode });
      return {};
    }
    const { grant } = await this.rpc.call('fs.grantWrite', { path, mode: mode & R_OK ? 6 : 2 });
    return { grant };
  }

  /**
   * The parts of a large file's version `result.etag`, part 0 (`first`) in hand, the others fetched
   * as they are read (RangedContent); once all are in, the cache keeps them (or, large, their etag).
   */
  private ranged(file: OpenFile, result: { etag: string; size: number }, first: Buffer, since: number): RangedContent {
    const path = file.path;
    return new RangedContent(
      result.size,
      result.etag,
      first,
      async (offset, length, etag, into) =>
        (await this.rpc.request('fs.read', { path: file.path, if_match: etag, offset, length }, into && { into })).data,
      (done) => {
        if (file.path !== path) return;
        const small = done.size <= this.cache.maxEntry;
        void (small ? done.whole() : Promise.resolve(undefined)).then((bytes) =>
          this.cache.set(path, done.etag, bytes, since, true),
        );
      },
      // A file the cache keeps only the etag of: its parts' buffers are reused as it is read.
      result.size > this.cache.maxEntry ? this.partPool : undefined,
    );
  }

  /** What reads of `file` are served from: its buffer, or a large file's parts (fetched on first use). */
  private async readable(file: OpenFile): Promise<FileBuffer | RangedContent> {
    if (!file.data && !file.stream) {
      const since = this.log.now();
      file.starting ??= this.rpc
        .request('fs.read', { path: file.path, offset: 0, length: PART })
        .then(({ result, data }) => {
          if (file.data || file.stream) return;
          if (data.length >= result.size) {
            file.data = new FileBuffer(data, true);
            this.cache.set(file.path, result.etag, data, since, true);
          } else file.stream = this.ranged(file, result, data, since);
          file.etag = result.etag;
        })
        .finally(() => {
          file.starting = null;
        });
      await file.starting;
    }
    return file.data ?? file.stream!;
  }

  /**
   * A file's bytes, fetched on first use. Opening an unchanged large file costs no transfer: the
   * kernel often serves its reads from the page cache (keep_cache) and never asks.
   */
  private async content(file: OpenFile): Promise<FileBuffer> {
    const stream = file.stream;
    if (!file.data && stream) {
      // A writer of a file read in parts: the buffer is that version, whole.
      const whole = await stream.whole();
      if (!file.data && file.stream === stream) {
        file.data = new FileBuffer(whole, true);
        file.stream = null;
      }
    }
    return this.fetchWhole(file);
  }

  private fetchWhole(file: OpenFile): Promise<FileBuffer> {
    if (file.data) return Promise.resolve(file.data);
    // Removed or renamed over while open, before its bytes were needed: its path names another file
    // now, or none. What is written to it is never sent (OpenFile.orphaned): writes need no old bytes.
    if (file.orphaned) return Promise.resolve((file.data = FileBuffer.empty()));
    const since = this.log.now();
    file.loading ??= this.rpc
      .request('fs.read', { path: file.path })
      .then(({ result, data }) => {
        if (!file.data) {
          file.data = new FileBuffer(data, true);
          file.etag = result.etag;
        }
        this.cache.set(file.path, result.etag, data, since, true);
        return file.data;
      })
      .finally(() => {
        file.loading = null;
      });
    return file.loading;
  }

  /** Sends a changed buffer (flush, fsync, close), and reports a create the daemon refused. */
  private flushFile(file: OpenFile): Promise<void> {
    return file.serialize(async () => {
      await this.send(file);
      if (file.failed !== undefined) {
        const err = file.failed;
        file.failed = undefined;
        throw err;
      }
    });
  }

  /** Sends the buffer when it changed; a create answered here goes with it (OpenFile.unsent). */
  private async send(file: OpenFile): Promise<void> {
    if (!file.dirty || file.orphaned || !file.data) return;
    const path = file.path;
    const data = file.data.view();
    const since = this.log.now();
    const create = file.unsent;
    if (create) await this.unlinking.get(path);
    file.dirty = false;
    file.version = tick(); // an answer asked for before this send may not hold what it sends
    this.attrs.invalidate(path);
    try {
      // The kernel asks for the attributes after a close: the write answers them too.
      // Under the access a descriptor was opened with, if one open for writing holds a grant.
      const grant = file.grants.values().next().value;
      const r = await this.own([path], () =>
        this.rpc.call(
          'fs.write',
          create
            ? {
                path,
                mode: create.mode,
                parents: false,
                exclusive: true,
                stat: true,
                want_grant: true,
                ...(create.times?.writes === file.writes
                  ? { atime: create.times.atime.toString(), mtime: create.times.mtime.toString() }
                  : {}),
              }
            : { path, parents: false, stat: true, ...(grant !== undefined ? { grant } : {}) },
          { data },
        ),
      );
      this.attrs.invalidate(path);
      if (r.created === (create !== undefined) && r.path === path && r.stat) {
        if (create) this.opts.owners.inodes.alias(r.stat.inode_id, create.ino);
        const st = toFuseStat(r.stat, this.opts.owners);
        this.attrs.set(path, st, since);
        if (create) {
          this.listings.add(parentOf(path), basename(path), st);
          this.createdIn.set(parentOf(path), { since, uid: st.uid, gid: st.gid });
        }
      } else this.changed(path); // created again, or written elsewhere (a symlink put there meanwhile)
      if (create) {
        file.unsent = undefined;
        this.unsent.delete(file);
        // The creating descriptor writes under this grant from now on, as if the daemon had created the file at open.
        if (r.grant !== undefined) {
          if (this.files.handle(create.fd) === create.handle) {
            create.handle.grant = r.grant;
            file.grants.add(r.grant);
          } else this.dropGrant(r.grant);
        }
      }
      file.etag = r.etag;
      // Readable as the daemon says: re-reading what was just written then costs no daemon call.
      if (file.path === path) this.cache.set(path, r.etag, data, since, r.readable === true);
    } catch (err) {
      if (!create) {
        file.dirty = true;
        throw err;
      }
      // The create the kernel was told of did not happen: the file never existed for anyone else.
      file.unsent = undefined;
      this.unsent.delete(file);
      file.failed = err;
      this.createdIn.delete(parentOf(path));
      this.files.unlink(path);
      this.changed(path);
      this.onLost?.(path);
    }
  }
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function copyOut(src: Buffer, len: number, pos: number): Buffer {
  return Buffer.from(src.subarray(pos, pos + len));
}
