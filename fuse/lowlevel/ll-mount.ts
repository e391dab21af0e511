/**
 * The mount on the libfuse3 low-level addon (fuse/native): inode-based requests are mapped to paths
 * (Inodes) and served by MountFs, with the kernel caching entries, attributes and file pages for a long
 * time (no request at all for a warm `grep -r`), and every change event of the daemon invalidating
 * exactly the kernel entries and inodes it concerns.
 *
 * Opens are still answered (MountFs checks access and takes write grants there) but with keep_cache, so
 * re-reading an unchanged file costs no data transfer; directories need no open (no-opendir).
 *
 * `--writeback` (MountFs.writeback) answers the first open and the first flush with ENOSYS:
 * the kernel then sends neither for the whole connection (a warm `grep -r` sends nothing at all).
 * Reads, writes and fsync of such files arrive with no handle (fh 0) and are served by path
 * (MountFs.readLoose/writeLoose/fsyncLoose); O_TRUNC arrives as a setattr of size 0 (atomic O_TRUNC
 * is not asked for: with no open, the kernel would skip the truncation). Creates are still sent, and
 * answered with handle 0 too: once no open is sent, the kernel (6.18 here) sends no release either,
 * not even for created files, so the data goes when the file was not written for a moment
 * (MountFs.adoptLoose), at fsync, before any daemon call about the path, and at unmount.
 */
import { fuseErrno, VfsError } from '../../daemon/errors.js';
import type { ChangeEvent } from '../../daemon/rpc/protocol.js';
import { HISTORY_DIR, splitHistoryPath } from '../history.js';
import { childPath, parentOf, within } from '../paths.js';
import { ChangeLog, mountPaths } from '../change-log.js';
import { O_ACCMODE, O_RDONLY, O_TRUNC, O_WRONLY, S_IFDIR, S_IFMT, S_IFREG, type FuseStat } from '../fuse-types.js';
import type { MountFs, OwnChange, UtimeArg } from '../mount-fs.js';
import type { MountFsSet } from '../mount-set.js';
import { Inodes } from './inodes.js';
import {
  OPEN_FLAGS,
  Op,
  SET_ATTR,
  type Entry,
  type FuseLowLevel,
  type Handler,
  type Name,
  type SetAttr,
} from './native.js';

/** Seconds the kernel keeps entries and attributes: until a change event invalidates them. */
const LONG = 86400;
const NAME_MAX = 255;
const EIO = 5;
const EINVAL = 22;
const EEXIST = 17;
const ENOSYS = 38;
const EILSEQ = 84;
const RENAME_NOREPLACE = 1;
const O_EXCL = 0o200;
/** Requests whose `a` is a file handle (0 or -1: none). */
const HANDLE_OPS: ReadonlySet<number> = new Set([
  Op.GETATTR,
  Op.SETATTR,
  Op.READ,
  Op.WRITE,
  Op.FLUSH,
  Op.RELEASE,
  Op.FSYNC,
]);

/** Whether a rename from `src` to `dst` moves or replaces `path` (or a directory above it). */
function concerns(r: { src: string; dst: string }, path: string): boolean {
  return within(path, r.src) || within(path, r.dst);
}

/** The errno for any rejection: daemon and local errors carry their code; anything else is a bug (EIO). */
function errnoOf(err: unknown): number {
  if (err instanceof VfsError) return -fuseErrno(err.code);
  process.stderr.write(
    `mdvfs mount: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return EIO;
}

/** An errno answered to the kernel as it is (for errors the daemon's error table does not have). */
class KernelError extends Error {
  constructor(readonly errno: number) {
    super(`errno ${errno}`);
  }
}

export interface LowLevelOptions {
  /** The real root of a workspace mount (the daemon reports changes by real path). */
  jail?: string;
}

export class LowLevelMount {
  private readonly nodes = new Inodes();
  /** Change events seen, to resend an invalidation a reply in flight may have overtaken. */
  private readonly log = new ChangeLog();
  private endedResolve!: () => void;
  /** Resolves when the kernel ended the session (unmounted from outside, or after unmount()). */
  readonly ended = new Promise<void>((r) => (this.endedResolve = r));
  private isEnded = false;
  /**
   * Renames sent to the daemon and not answered yet. A request about either path, or below them,
   * waits for the answer (afterRenames): the kernel lets an open or a read of the file run during
   * its rename, and the daemon, which has moved it already, would not find it by its old path.
   */
  private readonly renaming = new Set<{ src: string; dst: string; finished: Promise<void> }>();
  /**
   * Opens sent to the daemon and not answered yet, by path. A rename of that path (or above it) waits
   * for them: an open answered after the move would keep its file under the old path.
   */
  private readonly opening = new Set<{ path: string; done: Promise<unknown> }>();

  /** `mdvfs mount --writeback` (one principal only). */
  private readonly writeback: boolean;

  /** `fss`: the MountFs serving each request (one, or one per local user: `--shared`). */
  constructor(
    private readonly ll: FuseLowLevel,
    private readonly fss: MountFsSet,
    private readonly opts: LowLevelOptions = {},
  ) {
    this.writeback = fss.primary.writeback;
    fss.setUp((fs) => {
      // A create answered without the daemon that the daemon then refused: the kernel forgets the name.
      fs.onLost = (path) => {
        this.invalidate(path);
        this.nodes.removed(path);
      };
      // Written data refused after close (writeback mode): the kernel's pages and size are not the daemon's.
      fs.onDiscarded = (path) => this.invalidate(path);
      // A change made elsewhere, taken for one of the mount's own until that failed: invalidated now.
      fs.onMissed = (paths) => this.onChange({ kind: 'change', paths });
    });
  }

  get sessionEnded(): boolean {
    return this.isEnded;
  }

  mount(mnt: string): void {
    // Pages are dropped only by our invalidations (explicit_inval_data): with auto_inval_data the
    // kernel would also drop them whenever the daemon's mtime moves, as it does at every own flush.
    const args = ['-o', 'fsname=mdvfs,subtype=mdvfs,auto_unmount'];
    // Shared: every local user may use it, and the kernel checks the shown modes before anything
    // reaches the mount (what it caches is then not open to everyone); the daemon checks again.
    if (this.fss.shared) args.push('-o', 'allow_other,default_permissions');
    // Listings come with every entry's attributes (readdirplus, always: `ls -l`, `find`, `grep -r` then
    // send no lookup per file).
    const caps = this.ll.caps;
    // Atomic O_TRUNC lets the open do the truncation; with no open (writeback mode) it must come as a setattr.
    const trunc = this.writeback ? 0 : caps.ATOMIC_O_TRUNC;
    this.ll.create(
      mnt,
      args,
      trunc | caps.EXPLICIT_INVAL_DATA | caps.READDIRPLUS,
      (caps.ATOMIC_O_TRUNC & ~trunc) | caps.AUTO_INVAL_DATA | caps.WRITEBACK_CACHE | caps.READDIRPLUS_AUTO,
      (...request) => this.dispatch(...request),
    );
  }

  unmount(): void {
    this.ll.unmount();
  }

  /**
   * Waits (at most `ms`) for the session to end, after unmount() or an unmount from outside, then
   * joins the addon's thread, so the process exits with none of it running. A session that does
   * not end in time (files still open in a lazily detached mount) is left to the process's exit.
   */
  async close(ms = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.ended, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
    if (this.isEnded) this.ll.destroy();
  }

  /**
   * A daemon change event: the kernel forgets exactly the entries and inodes it concerns. `own`: the
   * event of this mount's own change (MountFs.onChange), which the kernel made itself: only attributes
   * are dropped (OwnChange), never entries or pages.
   */
  onChange(ev: ChangeEvent, own?: OwnChange): void {
    const paths = mountPaths(ev.paths, this.opts.jail);
    if (paths !== null) this.invalidateHistory(paths);
    if (own !== undefined && paths !== null) {
      for (const p of paths) {
        const n = own === 'attrs' ? this.nodes.at(p) : undefined;
        if (n) this.ll.notifyInvalInode(n.ino, -1, 0);
        const parent = p === '/' ? undefined : this.nodes.at(parentOf(p));
        if (parent) this.ll.notifyInvalInode(parent.ino, -1, 0);
      }
      return;
    }
    if (paths === null) {
      this.log.forgetAll();
      for (const n of this.nodes.all()) this.invalidate(n.path!);
      return;
    }
    if (paths.length === 0) return;
    this.log.changed(paths);
    for (const p of paths) this.invalidate(p);
  }

  /**
   * Drops the kernel's pages and attributes of the `.history` copies of changed paths: a commit never
   * changes, but who may read it does (a chmod of the live file closes its past too). With no open
   * sent (`--writeback`), pages the kernel kept would otherwise still be read without asking.
   * Costs a pass over the known inodes, and only once `.history` was looked into.
   */
  private invalidateHistory(paths: readonly string[]): void {
    if (paths.length === 0 || this.nodes.at(HISTORY_DIR) === undefined) return;
    for (const n of this.nodes.under(HISTORY_DIR)) {
      const sub = splitHistoryPath(n.path!);
      if (sub.rev !== null && paths.some((p) => within(sub.path, p))) this.ll.notifyInvalInode(n.ino, 0, 0);
    }
  }

  /**
   * Invalidates `path`'s entry, its directory (whose listing, size and mtime change with it: the kernel
   * caches listings too, with no-opendir), its inode, and (a directory) everything below.
   */
  private invalidate(path: string): void {
    if (path !== '/') {
      const parent = this.nodes.at(parentOf(path));
      if (parent) {
        this.ll.notifyInvalEntry(parent.ino, path.slice(path.lastIndexOf('/') + 1));
        this.ll.notifyInvalInode(parent.ino, 0, 0);
      }
    }
    for (const n of this.nodes.under(path)) {
      this.ll.notifyInvalInode(n.ino, 0, 0);
      if (n.path !== path && n.path !== null) {
        const parent = this.nodes.at(parentOf(n.path));
        if (parent) this.ll.notifyInvalEntry(parent.ino, n.path.slice(n.path.lastIndexOf('/') + 1));
      }
    }
  }

  /** One request from the kernel, as the addon hands it over (Handler: its fields, declared once). */
  private dispatch(...request: Parameters<Handler>): void {
    const [op, req, ino, a] = request;
    if (op === Op.FORGET) {
      const gone = this.nodes.forget(ino, a);
      if (gone?.attr?.ino !== undefined) this.fss.owners.inodes.forgotten(gone.attr.ino);
      if (gone?.orphanFd !== undefined) void this.fss.primary.release(gone.orphanFd).catch(() => undefined);
      return;
    }
    if (op === Op.ENDED) {
      this.isEnded = true;
      this.endedResolve();
      return;
    }
    this.serve(...request).catch((err: unknown) => {
      this.ll.replyErr(req, err instanceof KernelError ? err.errno : errnoOf(err));
    });
  }

  /** Answers one request (a rejection is answered with its errno by dispatch). */
  private async serve(...[op, req, ino, a, b, c, s1, s2, extra, uid]: Parameters<Handler>): Promise<void> {
    const ll = this.ll;
    if (this.renaming.size > 0 && op !== Op.RENAME) await this.afterRenames(ino, s1);
    // A handle names the MountFs that opened it (release comes with no opener's ids); anything else
    // is served for the local user asking.
    const handle = a > 0 && HANDLE_OPS.has(op) ? this.fss.byHandle(a, 'io') : undefined;
    const forUser = handle?.fs ?? this.fss.forUser(uid);
    const fs = forUser instanceof Promise ? await forUser : forUser;
    const fd = handle?.fd ?? (HANDLE_OPS.has(op) ? a : 0);
    switch (op) {
      case Op.LOOKUP: {
        const path = this.childOf(ino, s1, 'lookup');
        // A name the mount knows is free (a new file's lookup before its create): answered at once.
        if (fs.absent(path)) return void ll.replyEntry(req, { ino: 0, entryTimeout: LONG, attrTimeout: 0 });
        const since = this.log.now();
        let st: FuseStat;
        try {
          st = await fs.getattr(path);
        } catch (err) {
          if (!(err instanceof VfsError && err.code === 'ENOENT')) throw err;
          ll.replyEntry(req, { ino: 0, entryTimeout: LONG, attrTimeout: 0 });
          this.recheck(path, since);
          return;
        }
        this.replyEntry(req, path, st);
        this.recheck(path, since);
        return;
      }
      case Op.GETATTR: {
        const node = this.nodes.get(ino);
        if (node?.path === null && node.attr) {
          // Removed while open (fstat of an unlinked file): its last attributes, with no link left.
          const h = fs.files.handle(fd > 0 ? fd : (node.orphanFd ?? -1));
          const size = h?.kind === 'file' && h.file.data ? h.file.data.size : node.attr.size;
          ll.replyAttr(req, ino, { ...node.attr, nlink: 0, size, blocks: Math.ceil(size / 512) }, 1);
          return;
        }
        const path = this.pathOf(ino, 'stat');
        const since = this.log.now();
        const st = await fs.getattr(path);
        const n = this.nodes.get(ino);
        if (n) n.attr = st;
        ll.replyAttr(req, ino, st, LONG);
        this.recheck(path, since);
        return;
      }
      case Op.SETATTR: {
        const path = this.pathOf(ino, 'setattr');
        await this.setattr(fs, path, fd, extra as SetAttr);
        ll.replyAttr(req, ino, await fs.getattr(path), LONG);
        return;
      }
      case Op.READLINK:
        ll.replyReadlink(req, await fs.readlink(this.pathOf(ino, 'readlink')));
        return;
      case Op.MKDIR: {
        const path = this.childOf(ino, s1, 'mkdir');
        await fs.mkdir(path, a);
        this.replyEntry(req, path, await fs.getattr(path));
        return;
      }
      case Op.MKNOD: {
        const path = this.childOf(ino, s1, 'mknod');
        // Regular files only: the store has no devices, fifos or sockets.
        if ((a & S_IFMT) !== S_IFREG && (a & S_IFMT) !== 0) throw new VfsError('EPERM', 'mknod', path);
        await fs.release(await fs.create(path, a));
        this.replyEntry(req, path, await fs.getattr(path));
        return;
      }
      case Op.SYMLINK: {
        const path = this.childOf(ino, s1, 'symlink');
        if (s2 === null || s2 === undefined) throw new KernelError(EILSEQ);
        await fs.symlink(s2, path);
        this.replyEntry(req, path, await fs.getattr(path));
        return;
      }
      case Op.UNLINK:
      case Op.RMDIR: {
        const path = this.childOf(ino, s1, op === Op.UNLINK ? 'unlink' : 'rmdir');
        if (op === Op.UNLINK) await fs.unlink(path);
        else await fs.rmdir(path);
        // Writeback mode: a descriptor opened with no request may still read it (the file's last handle-less one).
        const node = this.nodes.at(path);
        const orphan = this.writeback && node ? fs.detachLoose(path) : undefined;
        if (orphan !== undefined) node!.orphanFd = orphan;
        this.nodes.removed(path);
        ll.replyErr(req, 0);
        return;
      }
      case Op.RENAME: {
        const src = this.childOf(ino, s1, 'rename');
        const dst = this.childOf(a, s2, 'rename');
        if (b & ~RENAME_NOREPLACE) return void ll.replyErr(req, EINVAL); // RENAME_EXCHANGE, RENAME_WHITEOUT
        if (b & RENAME_NOREPLACE && (await this.exists(fs, dst))) return void ll.replyErr(req, EEXIST);
        let finish!: () => void;
        const rename = { src, dst, finished: new Promise<void>((r) => (finish = r)) };
        this.renaming.add(rename);
        try {
          const opens = [...this.opening].filter((o) => concerns(rename, o.path));
          if (opens.length > 0) await Promise.all(opens.map((o) => o.done.catch(() => undefined)));
          await fs.rename(src, dst);
          this.nodes.renamed(src, dst);
        } finally {
          this.renaming.delete(rename);
          finish();
        }
        ll.replyErr(req, 0);
        return;
      }
      case Op.LINK:
        await fs.link(this.pathOf(ino, 'link'), this.childOf(a, s1, 'link'));
        return;
      case Op.OPEN: {
        // Writeback mode: no open is ever sent again (fc->no_open), this one included.
        if (this.writeback) return void ll.replyErr(req, ENOSYS);
        // Removed or renamed over since the kernel found it (a race with mv or rm): a writer opens it
        // as on a local filesystem, its writes going nowhere; a reader, who would get none of its bytes, is refused.
        const removed = this.nodes.get(ino)?.path === null;
        if (removed && (a & O_ACCMODE) === O_WRONLY) {
          const fd = fs.openRemoved();
          if (ll.replyOpen(req, this.fss.handleOf(fs, fd), OPEN_FLAGS.KEEP_CACHE) !== 0) await fs.release(fd);
          return;
        }
        const path = this.pathOf(ino, 'open');
        const open = { path, done: fs.open(path, a) };
        this.opening.add(open);
        let opened: number;
        try {
          opened = await open.done;
        } finally {
          this.opening.delete(open);
        }
        // The kernel keeps this file's pages across opens: a change event drops them (invalidate).
        // Closing a descriptor opened for reading has nothing to send: no flush request for it.
        const readOnly = (a & O_ACCMODE) === O_RDONLY && !(a & O_TRUNC);
        const fh = this.fss.handleOf(fs, opened);
        if (ll.replyOpen(req, fh, OPEN_FLAGS.KEEP_CACHE | (readOnly ? OPEN_FLAGS.NOFLUSH : 0)) !== 0)
          await fs.release(opened); // the opener is gone
        return;
      }
      case Op.CREATE: {
        const path = this.childOf(ino, s1, 'create');
        const created = await fs.create(path, a, (b & O_EXCL) !== 0);
        const st = await fs.getattr(path);
        const node = this.nodes.remember(path, false);
        node.attr = st;
        // Writeback mode: handle 0, and its writes served by path like every other file's (no release
        // would ever close a real handle: the kernel sends none once it sends no opens).
        if (this.writeback) fs.adoptLoose(path, created);
        if (
          ll.replyCreate(
            req,
            { ino: node.ino, attr: st, entryTimeout: LONG, attrTimeout: LONG },
            this.writeback ? 0 : this.fss.handleOf(fs, created),
            OPEN_FLAGS.KEEP_CACHE,
          ) !== 0
        ) {
          this.nodes.forget(node.ino, 1);
          if (!this.writeback) await fs.release(created);
        }
        return;
      }
      // fh 0: a file opened with no open request (writeback mode), served by its path.
      case Op.READ: {
        const from = (fd === 0 ? this.nodes.get(ino)?.orphanFd : undefined) ?? fd;
        const data = from === 0 ? await fs.readLoose(this.pathOf(ino, 'read'), b, c) : await fs.read(from, b, c);
        // At once: a view of a large file's part is valid only in this turn (its buffer is reused).
        ll.replyBuf(req, data, data.length);
        return;
      }
      case Op.WRITE: {
        const data = extra as Buffer;
        const node = fd === 0 ? this.nodes.get(ino) : undefined;
        if (node?.path === null) {
          // Writeback mode, a file removed or renamed over since it was opened: its writes go to the
          // descriptor that still serves it, or nowhere, as on a local filesystem.
          if (node.orphanFd !== undefined) await fs.write(node.orphanFd, data, data.length, c);
          return void ll.replyWrite(req, data.length);
        }
        const path = fd === 0 ? this.pathOf(ino, 'write') : undefined;
        ll.replyWrite(
          req,
          path !== undefined
            ? await fs.writeLoose(path, data, data.length, c)
            : await fs.write(fd, data, data.length, c),
        );
        return;
      }
      case Op.FLUSH:
        // Writeback mode: no flush is ever sent again (fc->no_flush); data goes at idle time (MountFs.withLoose).
        if (this.writeback) return void ll.replyErr(req, ENOSYS);
        await fs.flush(fd, true);
        ll.replyErr(req, 0);
        return;
      case Op.FSYNC:
        if (fd === 0) await fs.fsyncLoose(this.pathOf(ino, 'fsync'));
        else await fs.flush(fd, false);
        ll.replyErr(req, 0);
        return;
      case Op.RELEASE:
        await fs.release(fd); // writeback mode: handle 0, nothing to do
        ll.replyErr(req, 0);
        return;
      case Op.READDIR: {
        const path = this.pathOf(ino, 'readdir');
        const { names, stats } = await fs.readdir(path);
        // Entries from offset c; the smallest entry takes 32 bytes, so no more than b/32 can fit.
        const end = Math.min(names.length, c + Math.floor(b / 32) + 1);
        const inos: number[] = [];
        const modes: number[] = [];
        for (let i = c; i < end; i++) {
          inos.push(stats[i]!.ino || ino);
          modes.push(stats[i]!.mode);
        }
        ll.replyDir(req, b, c, names.slice(c, end), inos, modes);
        return;
      }
      case Op.READDIRPLUS:
        return this.readdirPlus(fs, req, ino, b, c);
      case Op.STATFS:
        ll.replyStatfs(req, await fs.statfs());
        return;
      case Op.ACCESS:
        await fs.access(this.pathOf(ino, 'access'), a);
        ll.replyErr(req, 0);
        return;
      default:
        ll.replyErr(req, ENOSYS);
    }
  }

  /**
   * Entries from offset `off` with their attributes, as a lookup of each would answer them (files and
   * links from the listing's attributes, which the listing put in the attribute cache; directories with
   * attributes not to keep, since a listing does not count their links). Each entry sent is a lookup.
   */
  private async readdirPlus(fs: MountFs, req: number, ino: number, size: number, off: number): Promise<void> {
    const path = this.pathOf(ino, 'readdir');
    const since = this.log.now();
    const { names, stats } = await fs.readdir(path);
    // The smallest entry with attributes takes 144 bytes: no more than size/144 can fit.
    const end = Math.min(names.length, off + Math.floor(size / 144) + 1);
    const sent: string[] = [];
    const entries: Entry[] = [];
    for (let i = off; i < end; i++) {
      const name = names[i]!;
      const st = stats[i]!;
      if (name === '.' || name === '..') {
        entries.push({ ino: 0, attr: { ...st, ino: st.ino || ino }, entryTimeout: 0, attrTimeout: 0 });
        continue;
      }
      const child = childPath(path, name);
      const dir = (st.mode & S_IFMT) === S_IFDIR;
      const attr = dir ? st : await fs.getattr(child).catch(() => st);
      const node = this.nodes.remember(child, dir);
      if (!dir) node.attr = attr;
      sent.push(child);
      entries.push({ ino: node.ino, attr, entryTimeout: LONG, attrTimeout: dir ? 0 : LONG });
    }
    const n = this.ll.replyDirPlus(req, size, off, names.slice(off, end), entries);
    // Entries that did not fit (or a reply nobody took) gave the kernel no lookup.
    entries.forEach((e, k) => {
      if (e.ino !== 0 && (n < 0 || k >= n)) this.nodes.forget(e.ino, 1);
    });
    for (const child of sent) this.recheck(child, since);
  }

  private async setattr(fs: MountFs, path: string, fh: number, s: SetAttr): Promise<void> {
    if (s.valid & SET_ATTR.MODE) await fs.chmod(path, s.mode);
    if (s.valid & (SET_ATTR.UID | SET_ATTR.GID))
      await fs.chown(path, s.valid & SET_ATTR.UID ? s.uid : -1, s.valid & SET_ATTR.GID ? s.gid : -1);
    if (s.valid & SET_ATTR.SIZE) {
      // fh 0: no handle (writeback mode's files opened without a request; O_TRUNC comes with none at all).
      if (fh > 0) await fs.ftruncate(fh, s.size);
      else await fs.truncate(path, s.size);
    }
    if (s.valid & (SET_ATTR.ATIME | SET_ATTR.MTIME)) {
      const time = (set: number, now: number, ns: bigint): UtimeArg =>
        !(s.valid & set) ? 'omit' : s.valid & now ? 'now' : ns;
      await fs.utimens(
        path,
        time(SET_ATTR.ATIME, SET_ATTR.ATIME_NOW, s.atime),
        time(SET_ATTR.MTIME, SET_ATTR.MTIME_NOW, s.mtime),
      );
    }
  }

  private replyEntry(req: number, path: string, st: FuseStat): void {
    const node = this.nodes.remember(path, (st.mode & S_IFMT) === S_IFDIR);
    node.attr = st;
    // Not answered (the request was interrupted): the kernel holds no reference.
    if (this.ll.replyEntry(req, { ino: node.ino, attr: st, entryTimeout: LONG, attrTimeout: LONG }) !== 0)
      this.nodes.forget(node.ino, 1);
  }

  /** Waits until no rename in flight concerns the path of `ino` (or its child `name`): see `renaming`. */
  private async afterRenames(ino: number, name: Name): Promise<void> {
    for (;;) {
      const p = this.nodes.path(ino);
      if (p === undefined) return;
      const child = typeof name === 'string' ? childPath(p, name) : undefined;
      let hit: Promise<void> | undefined;
      for (const r of this.renaming)
        if (concerns(r, p) || (child !== undefined && concerns(r, child))) hit = r.finished;
      if (hit === undefined) return;
      await hit; // then the path again: the rename may have moved it
    }
  }

  /** A change reported while the answer about `path` was being prepared: the kernel may hold it stale. */
  private recheck(path: string, since: number): void {
    if (!this.log.unchanged(path, since)) this.invalidate(path);
  }

  private async exists(fs: MountFs, path: string): Promise<boolean> {
    try {
      await fs.getattr(path);
      return true;
    } catch (err) {
      if (err instanceof VfsError && err.code === 'ENOENT') return false;
      throw err;
    }
  }

  private pathOf(ino: number, op: string): string {
    const p = this.nodes.path(ino);
    if (p === undefined) throw new VfsError('ENOENT', op, undefined, `inode ${ino} is gone`);
    return p;
  }

  private childOf(parent: number, name: Name, op: string): string {
    // Names that are not UTF-8 would collapse to U+FFFD and overwrite each other: refused.
    if (name === null || name === undefined) throw new KernelError(EILSEQ);
    if (Buffer.byteLength(name) > NAME_MAX) throw new VfsError('ENAMETOOLONG', op, name.slice(0, 64));
    const p = this.nodes.child(parent, name);
    if (p === undefined) throw new VfsError('ENOENT', op, name, `directory inode ${parent} is gone`);
    return p;
  }
}
