/**
 * The FUSE operation table: one line per operation, each settling its callback through `reply`.
 * Only what is registered here is implemented; the kernel answers ENOSYS for the rest (mknod, xattrs).
 */
import { fuseErrno, VfsError } from '../daemon/errors.js';
import type { FuseOperations } from './fuse-native.js';
import type { MountFs, UtimeArg } from './mount-fs.js';

const EIO = fuseErrno('EIO');

/** The errno for any rejection: daemon and local errors carry their code; anything else is a bug (EIO). */
export function errnoOf(err: unknown): number {
  if (err instanceof VfsError) return fuseErrno(err.code);
  process.stderr.write(
    `mdvfs mount: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return EIO;
}

/**
 * Settles a FUSE callback from a promise: `cb(0, value)` on success, `cb(-errno)` on failure. A handler
 * must never throw synchronously (the binding would leave that request hanging), so every operation is
 * an async method whose throws become rejections.
 */
export function reply<T>(cb: (err: number, value?: T) => void, work: Promise<T>): void {
  work.then(
    (value) => cb(0, value),
    (err: unknown) => cb(errnoOf(err)),
  );
}

/** read/write answer with one number: the byte count, or a negative errno. */
const count = (cb: (n: number) => void) => (err: number, n?: number) => cb(err !== 0 ? err : (n ?? 0));

/**
 * A time as the libfuse2 binding gives it (fixed at install by scripts/patch-fuse-native.mjs): 0 is
 * UTIME_OMIT, 1 is UTIME_NOW, anything else milliseconds since the epoch. An unfixed binding (no
 * node-gyp at install) sends UTIME_NOW/OMIT as ~1073 ms: those are read as now.
 */
function utimeOf(ms: number): UtimeArg {
  if (ms === 0) return 'omit';
  if (ms < 2000) return 'now';
  return BigInt(Math.round(ms * 1000)) * 1000n;
}

export function createOps(fs: MountFs): FuseOperations {
  return {
    init: (cb) => cb(0),
    getattr: (path, cb) => reply(cb, fs.getattr(path)),
    readdir: (path, cb) => reply((err, d) => cb(err, d?.names, d?.stats), fs.readdir(path)),
    access: (path, mode, cb) => reply(cb, fs.access(path, mode)),
    statfs: (_path, cb) => reply(cb, fs.statfs()),
    open: (path, flags, cb) => reply(cb, fs.open(path, flags)),
    create: (path, mode, cb) => reply(cb, fs.create(path, mode)),
    read: (_path, fd, buf, len, pos, cb) => reply(count(cb), fs.read(fd, buf, len, pos)),
    write: (_path, fd, buf, len, pos, cb) => reply(count(cb), fs.write(fd, buf, len, pos)),
    truncate: (path, size, cb) => reply(cb, fs.truncate(path, size)),
    ftruncate: (_path, fd, size, cb) => reply(cb, fs.ftruncate(fd, size)),
    flush: (_path, fd, cb) => reply(cb, fs.flush(fd)),
    fsync: (_path, _dataSync, fd, cb) => reply(cb, fs.flush(fd)),
    release: (_path, fd, cb) => reply(cb, fs.release(fd)),
    unlink: (path, cb) => reply(cb, fs.unlink(path)),
    mkdir: (path, mode, cb) => reply(cb, fs.mkdir(path, mode)),
    rmdir: (path, cb) => reply(cb, fs.rmdir(path)),
    rename: (src, dst, cb) => reply(cb, fs.rename(src, dst)),
    link: (src, dst, cb) => reply(cb, fs.link(src, dst)),
    symlink: (target, path, cb) => reply(cb, fs.symlink(target, path)),
    readlink: (path, cb) => reply(cb, fs.readlink(path)),
    chmod: (path, mode, cb) => reply(cb, fs.chmod(path, mode)),
    chown: (path, uid, gid, cb) => reply(cb, fs.chown(path, uid, gid)),
    utimens: (path, atime, mtime, cb) => reply(cb, fs.utimens(path, utimeOf(atime), utimeOf(mtime))),
  };
}
