/** Attributes as the mount answers them to the kernel (fuse/native turns them into struct stat), and the flag values it reads. */

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
  /** The same times to the nanosecond, where known (answered instead of the milliseconds when present). */
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

// Open flags (Linux values) as the kernel passes them to open and create.
export const O_ACCMODE = 0o3;
export const O_RDONLY = 0o0;
export const O_WRONLY = 0o1;
export const O_RDWR = 0o2;
export const O_TRUNC = 0o1000;

export const S_IFMT = 0o170000;
export const S_IFREG = 0o100000;
export const S_IFDIR = 0o040000;
export const S_IFLNK = 0o120000;
