/**
 * A typed wrapper around @cocalc/fuse-native (a CommonJS module whose bundled d.ts does not type-check
 * as an ESM default import under NodeNext, and is wrong about several callbacks).
 *
 * The signatures below are what the binding really does (checked against its index.js / fuse-native.c):
 * - read/write answer `cb(bytes)`, or `cb(-errno)`;
 * - times arrive and leave as milliseconds since the epoch (the binding drops sub-millisecond parts);
 * - utimens receives (atime, mtime) with 0 for UTIME_OMIT and 1 for UTIME_NOW, as the binding is fixed at
 *   install (scripts/patch-fuse-native.mjs; 2.4.3 as published passes the access time twice and libfuse
 *   drops a change of one time alone);
 * - fgetattr is served by `getattr` inside the binding, so it is not declared here.
 */
import { createRequire } from 'node:module';

export type Errno = number; // 0 or a negative errno

export interface FuseStat {
  mode: number;
  uid: number;
  gid: number;
  size: number;
  nlink: number;
  ino?: number;
  dev?: number;
  rdev?: number;
  blksize: number;
  blocks: number;
  atime: number; // ms since the epoch
  mtime: number;
  ctime: number;
  /** The same times to the nanosecond, where known (the libfuse3 mount answers these when present). */
  atimeNs?: bigint;
  mtimeNs?: bigint;
  ctimeNs?: bigint;
}

export interface FuseStatfs {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  favail: number;
  fsid: number;
  flag: number;
  namemax: number;
}

type Done = (err: Errno) => void;

export interface FuseOperations {
  init?: (cb: Done) => void;
  access?: (path: string, mode: number, cb: Done) => void;
  statfs?: (path: string, cb: (err: Errno, stats?: FuseStatfs) => void) => void;
  getattr?: (path: string, cb: (err: Errno, stat?: FuseStat) => void) => void;
  flush?: (path: string, fd: number, cb: Done) => void;
  fsync?: (path: string, dataSync: boolean, fd: number, cb: Done) => void;
  fsyncdir?: (path: string, dataSync: boolean, fd: number, cb: Done) => void;
  readdir?: (path: string, cb: (err: Errno, names?: string[], stats?: FuseStat[]) => void) => void;
  truncate?: (path: string, size: number, cb: Done) => void;
  ftruncate?: (path: string, fd: number, size: number, cb: Done) => void;
  utimens?: (path: string, atime: number, mtime: number, cb: Done) => void;
  readlink?: (path: string, cb: (err: Errno, target?: string) => void) => void;
  chown?: (path: string, uid: number, gid: number, cb: Done) => void;
  chmod?: (path: string, mode: number, cb: Done) => void;
  mknod?: (path: string, mode: number, dev: number, cb: Done) => void;
  open?: (path: string, flags: number, cb: (err: Errno, fd?: number) => void) => void;
  opendir?: (path: string, flags: number, cb: (err: Errno, fd?: number) => void) => void;
  read?: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (bytesOrErrno: number) => void) => void;
  write?: (path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (bytesOrErrno: number) => void) => void;
  release?: (path: string, fd: number, cb: Done) => void;
  releasedir?: (path: string, fd: number, cb: Done) => void;
  create?: (path: string, mode: number, cb: (err: Errno, fd?: number) => void) => void;
  unlink?: (path: string, cb: Done) => void;
  rename?: (src: string, dst: string, cb: Done) => void;
  link?: (src: string, dst: string, cb: Done) => void;
  symlink?: (target: string, path: string, cb: Done) => void;
  mkdir?: (path: string, mode: number, cb: Done) => void;
  rmdir?: (path: string, cb: Done) => void;
}

/**
 * Mount options. Numeric timeouts of 0 are silently dropped by the binding, so timeouts are strings.
 * Options the binding does not expose (big_writes, auto_cache, ...) are appended to `fsname`, which the
 * binding copies verbatim into the `-o` string.
 */
export interface FuseOptions {
  fsname?: string;
  subtype?: string;
  autoUnmount?: boolean;
  force?: boolean;
  mkdir?: boolean;
  allowOther?: boolean;
  entryTimeout?: string;
  attrTimeout?: string;
  timeout?: number | false;
  debug?: boolean;
}

export interface FuseInstance {
  readonly mnt: string;
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: Error | null) => void): void;
}

export interface FuseClass {
  new (mnt: string, ops: FuseOperations, opts?: FuseOptions): FuseInstance;
  unmount(mnt: string, cb: (err: Error | null) => void): void;
}

const require = createRequire(import.meta.url);

/** Loads the binding lazily, so that `mdvfs umount` and type imports never need libfuse. */
export function loadFuse(): FuseClass {
  try {
    return require('@cocalc/fuse-native') as FuseClass;
  } catch (err) {
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new Error(
      `FUSE support is not available (${why}). Install libfuse2, libfuse-dev, pkg-config and fuse3 (Debian/Ubuntu), then run npm install again so @cocalc/fuse-native is built.`,
    );
  }
}

// Open flags (Linux values) as the binding passes them to `open`.
export const O_ACCMODE = 0o3;
export const O_RDONLY = 0o0;
export const O_WRONLY = 0o1;
export const O_TRUNC = 0o1000;

export const S_IFMT = 0o170000;
export const S_IFREG = 0o100000;
export const S_IFDIR = 0o040000;
export const S_IFLNK = 0o120000;
