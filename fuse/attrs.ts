/** Daemon stat records as FUSE attributes, and the owner mapping between the principal and the local user. */
import { VfsError } from '../daemon/errors.js';
import type { DirEntry, Kind, Stat } from '../daemon/rpc/protocol.js';
import { S_IFDIR, S_IFLNK, S_IFREG, type FuseStat } from './fuse-types.js';

const TYPE_BITS: Record<Kind, number> = { file: S_IFREG, directory: S_IFDIR, symlink: S_IFLNK };

/**
 * Inode numbers shown for files created in the mount until the daemon has them (their first flush):
 * above any the daemon gives, so that two files never show the same number.
 */
const PROVISIONAL_INO = 2 ** 52;

/**
 * The inode numbers the mount shows (st_ino). A file created here is shown with a provisional number
 * until the daemon has it, and keeps that number, not the daemon's, for as long as the kernel holds
 * its node: st_ino must not change under an open file (SQLite takes a database whose st_ino changed
 * for one moved away, and refuses to write to it: SQLITE_READONLY_DBMOVED).
 */
export class InodeNumbers {
  private next = PROVISIONAL_INO;
  /** The daemon's number of a file shown with a provisional one → that one, and back. */
  private readonly aliases = new Map<number, number>();
  private readonly daemonOf = new Map<number, number>();

  /** A new provisional number. */
  provisional(): number {
    return this.next++;
  }

  /** The daemon gave `id` to the file shown as `provisional`: it is still shown so. */
  alias(id: number, provisional: number): void {
    if (id <= 0 || provisional < PROVISIONAL_INO) return;
    this.aliases.set(id, provisional);
    this.daemonOf.set(provisional, id);
  }

  /** The number to show for the daemon's inode `id`. */
  shown(id: number): number {
    return this.aliases.get(id) ?? id;
  }

  /** The kernel forgot the node shown as `ino`: no descriptor holds it, its daemon number may show. */
  forgotten(ino: number): void {
    const id = this.daemonOf.get(ino);
    if (id === undefined) return;
    this.daemonOf.delete(ino);
    this.aliases.delete(id);
  }
}

/**
 * How the daemon's ids show in the mount (uidOut, gidOut) and how chown(2)'s local ids reach it
 * (uidIn, gidIn: undefined for -1, "leave unchanged"); inode numbers as InodeNumbers says.
 */
export interface Owners {
  readonly inodes: InodeNumbers;
  /** The owner and group shown for the mount's synthetic directories (`.history`). */
  readonly localUid: number;
  readonly localGid: number;
  uidOut(uid: number): number;
  gidOut(gid: number): number;
  uidIn(uid: number): number | undefined;
  gidIn(gid: number): number | undefined;
}

/** chown(2)'s "leave unchanged" (-1, as uint32 or not). */
export function unchangedId(id: number): boolean {
  return id === 0xffffffff || id === -1;
}

/**
 * The owner mapping of a mount acting as one principal. Files of the principal appear owned by the
 * local user running the mount (and the principal's primary group by the local group), so editors
 * and `ls -l` see the access the daemon will grant; other ids show as the daemon's numbers.
 */
export class OwnerMap implements Owners {
  readonly inodes = new InodeNumbers();

  constructor(
    readonly principalUid: number,
    readonly principalGid: number,
    readonly localUid: number,
    readonly localGid: number,
  ) {}

  uidOut(uid: number): number {
    return uid === this.principalUid ? this.localUid : uid;
  }

  gidOut(gid: number): number {
    return gid === this.principalGid ? this.localGid : gid;
  }

  /** chown(2) ids back to daemon ids; -1 (as uint32) means "leave unchanged". */
  uidIn(uid: number): number | undefined {
    if (unchangedId(uid)) return undefined;
    return uid === this.localUid ? this.principalUid : uid;
  }

  gidIn(gid: number): number | undefined {
    if (unchangedId(gid)) return undefined;
    return gid === this.localGid ? this.principalGid : gid;
  }
}

export function nsToMs(ns: string | undefined, fallbackSeconds: number): number {
  if (ns === undefined || !/^\d+$/.test(ns)) return fallbackSeconds * 1000;
  return Number(BigInt(ns) / 1000000n);
}

/** A daemon time in nanoseconds (a decimal string), or the whole seconds it also gives. */
function nsOf(ns: string | undefined, fallbackSeconds: number): bigint {
  return ns !== undefined && /^\d+$/.test(ns) ? BigInt(ns) : BigInt(Math.floor(fallbackSeconds)) * 1_000_000_000n;
}

export function permBits(mode: string): number {
  const m = parseInt(mode, 8);
  if (Number.isNaN(m)) throw new VfsError('EIO', 'stat', undefined, `bad mode from daemon: ${mode}`);
  return m & 0o7777;
}

export function toFuseStat(s: Stat, owners: Owners, clearWrite = false): FuseStat {
  const perm = permBits(s.mode) & (clearWrite ? ~0o222 : 0o7777);
  const mtime = nsToMs(s.mtime_ns, s.modified);
  return {
    mode: TYPE_BITS[s.kind] | perm,
    uid: owners.uidOut(s.uid),
    gid: owners.gidOut(s.gid),
    size: s.size,
    nlink: s.nlink > 0 ? s.nlink : 1,
    ino: owners.inodes.shown(s.inode_id),
    blksize: 4096,
    blocks: Math.ceil(s.size / 512),
    atime: nsToMs(s.atime_ns, s.accessed),
    mtime,
    ctime: nsToMs(s.ctime_ns, s.changed),
    atimeNs: nsOf(s.atime_ns, s.accessed),
    mtimeNs: nsOf(s.mtime_ns, s.modified),
    ctimeNs: nsOf(s.ctime_ns, s.changed),
  };
}

/** Attributes for readdir: only the type bits matter to libfuse there (d_type), the rest is best effort. */
export function entryToFuseStat(e: DirEntry, owners: Owners, clearWrite = false): FuseStat {
  const kind: Kind = e.is_dir ? 'directory' : e.is_symlink ? 'symlink' : 'file';
  const mtime = nsToMs(e.mtime_ns, e.modified);
  return {
    mode: TYPE_BITS[kind] | (permBits(e.mode) & (clearWrite ? ~0o222 : 0o7777)),
    uid: owners.uidOut(e.uid),
    gid: owners.gidOut(e.gid),
    size: e.size,
    nlink: 1,
    ino: owners.inodes.shown(e.inode_id),
    blksize: 4096,
    blocks: Math.ceil(e.size / 512),
    atime: e.atime_ns !== undefined ? nsToMs(e.atime_ns, e.modified) : mtime,
    mtime,
    ctime: e.ctime_ns !== undefined ? nsToMs(e.ctime_ns, e.modified) : mtime,
    atimeNs: nsOf(e.atime_ns ?? e.mtime_ns, e.modified),
    mtimeNs: nsOf(e.mtime_ns, e.modified),
    ctimeNs: nsOf(e.ctime_ns ?? e.mtime_ns, e.modified),
  };
}

/** A synthetic directory (the `.history` folder). */
export function syntheticDir(owners: Owners, timeMs: number): FuseStat {
  return {
    mode: S_IFDIR | 0o555,
    uid: owners.localUid,
    gid: owners.localGid,
    size: 0,
    nlink: 2,
    blksize: 4096,
    blocks: 0,
    atime: timeMs,
    mtime: timeMs,
    ctime: timeMs,
  };
}
