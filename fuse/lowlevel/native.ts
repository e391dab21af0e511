/**
 * The libfuse3 low-level addon (fuse/native/mdvfs_fuse.cc), typed. Requests arrive through one
 * handler as (op, req, ino, a, b, c, s1, s2, extra, uid, gid); what each argument means per operation
 * is listed at `Op`. Every request with a non-zero `req` must be answered exactly once by one reply.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FuseStat, FuseStatfs } from '../fuse-types.js';

/** Operation codes (the enum in mdvfs_fuse.cc). Arguments after (req, ino): */
export const Op = {
  LOOKUP: 1, // s1 name (ino: parent)
  FORGET: 2, // a nlookup (no reply: req is 0)
  GETATTR: 3, // a fh or -1
  SETATTR: 4, // a fh or -1, extra SetAttr
  READLINK: 5,
  MKDIR: 6, // s1 name, a mode
  UNLINK: 7, // s1 name
  RMDIR: 8, // s1 name
  SYMLINK: 9, // s1 name, s2 target
  RENAME: 10, // s1 name, a newparent, s2 newname, b flags
  LINK: 11, // s1 newname, a newparent
  OPEN: 12, // a flags
  READ: 13, // a fh, b size, c offset
  WRITE: 14, // a fh, c offset, extra Buffer
  FLUSH: 15, // a fh
  RELEASE: 16, // a fh
  FSYNC: 17, // a fh, b datasync
  READDIR: 18, // a fh, b size, c offset
  STATFS: 19,
  ACCESS: 20, // a mask
  CREATE: 21, // s1 name, a mode, b flags
  MKNOD: 22, // s1 name, a mode, b rdev
  ENDED: 23, // no more requests will come (req and ino are 0)
  READDIRPLUS: 24, // a fh, b size, c offset
} as const;

/** setattr's new attributes; `valid` is the FUSE_SET_ATTR_* mask. Times in ns since the epoch. */
export interface SetAttr {
  valid: number;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  atime: bigint;
  mtime: bigint;
}

export const SET_ATTR = {
  MODE: 1 << 0,
  UID: 1 << 1,
  GID: 1 << 2,
  SIZE: 1 << 3,
  ATIME: 1 << 4,
  MTIME: 1 << 5,
  ATIME_NOW: 1 << 7,
  MTIME_NOW: 1 << 8,
} as const;

/** Bits of replyOpen/replyCreate's `flags`. */
export const OPEN_FLAGS = { DIRECT_IO: 1, KEEP_CACHE: 2, NOFLUSH: 4, CACHE_READDIR: 8 } as const;

/** A name that is not valid UTF-8 arrives as null. */
export type Name = string | null | undefined;

export type Handler = (
  op: number,
  req: number,
  ino: number,
  a: number,
  b: number,
  c: number,
  s1: Name,
  s2: Name,
  extra: Buffer | SetAttr | undefined,
  uid: number,
  gid: number,
) => void;

export interface Entry {
  /** 0 for a negative entry (the name does not exist, cached for entryTimeout seconds). */
  ino: number;
  generation?: number;
  attr?: FuseStat;
  entryTimeout: number;
  attrTimeout: number;
}

export interface Caps {
  ATOMIC_O_TRUNC: number;
  WRITEBACK_CACHE: number;
  AUTO_INVAL_DATA: number;
  EXPLICIT_INVAL_DATA: number;
  READDIRPLUS: number;
  READDIRPLUS_AUTO: number;
  NO_OPEN_SUPPORT: number;
  NO_OPENDIR_SUPPORT: number;
  CACHE_SYMLINKS: number;
  PARALLEL_DIROPS: number;
}

export interface FuseLowLevel {
  /** Creates the session with libfuse's options (`['-o', 'fsname=...']`), mounts it and reads its requests from the event loop. */
  create(mountpoint: string, args: string[], capsWant: number, capsUnwant: number, handler: Handler): void;
  /** Ends the session (lazy unmount); Op.ENDED follows on a later turn of the event loop. */
  unmount(): void;
  /**
   * After Op.ENDED: joins the addon's thread and frees the session (false, doing nothing, while
   * requests are still read). Replies after it are refused.
   */
  destroy(): boolean;
  replyErr(req: number, errno: number): number;
  replyNone(req: number): void;
  replyEntry(req: number, entry: Entry): number;
  replyCreate(req: number, entry: Entry, fh: number, flags: number): number;
  /** `ino`: st_ino unless `attr.ino` is set. */
  replyAttr(req: number, ino: number, attr: FuseStat, timeout: number): number;
  replyOpen(req: number, fh: number, flags: number): number;
  replyBuf(req: number, buf: Buffer, length: number): number;
  replyWrite(req: number, count: number): number;
  replyReadlink(req: number, target: string): number;
  replyStatfs(req: number, s: FuseStatfs): number;
  /** Directory entries from offset `off` (entry i gets offset off+i+1), as many as fit; returns how many. */
  replyDir(req: number, size: number, off: number, names: string[], inos: number[], modes: number[]): number;
  /**
   * As replyDir, each entry with its attributes and node id (`ino` 0 for `.` and `..`): every entry
   * sent with a node id is one lookup. Returns how many were sent, or -1 when none was (interrupted).
   */
  replyDirPlus(req: number, size: number, off: number, names: string[], entries: Entry[]): number;
  notifyInvalInode(ino: number, off: number, len: number): void;
  notifyInvalEntry(parent: number, name: string): void;
  notifyDelete(parent: number, child: number, name: string): void;
  readonly caps: Caps;
}

const ADDON = path.join('build', 'Release', 'mdvfs_fuse.node');

/** Where the built addon is, from the sources (fuse/lowlevel) and from dist (dist/fuse/lowlevel). */
function addonPath(): string | null {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const root of [path.resolve(here, '..', '..'), path.resolve(here, '..', '..', '..')]) {
    const p = path.join(root, 'fuse', 'native', ADDON);
    if (existsSync(p)) return p;
  }
  return null;
}

/** Loads the addon, or throws one sentence saying how to get it. */
export function loadLowLevel(): FuseLowLevel {
  const p = addonPath();
  const hint =
    'install libfuse3-dev, pkg-config, make and g++ (Debian/Ubuntu), then run npm install again so fuse/native is built';
  if (p === null) throw new Error(`the libfuse3 mount is not built: ${hint}`);
  try {
    return createRequire(import.meta.url)(p) as FuseLowLevel;
  } catch (err) {
    throw new Error(`the libfuse3 mount does not load (${(err as Error).message.split('\n')[0]}): ${hint}`);
  }
}
