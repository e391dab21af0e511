/**
 * Which MountFs serves a kernel request, and the file handles the kernel holds. A mount acting as one
 * principal has one MountFs, and a handle is its descriptor. `mdvfs mount --shared` has one per local
 * user (fuse/shared.ts), made at that user's first request: a handle then names its MountFs too,
 * since flush and release come with the closer's ids, which need not be the opener's.
 */
import { VfsError } from '../daemon/errors.js';
import type { ChangeEvent } from '../daemon/rpc/protocol.js';
import type { Owners } from './attrs.js';
import type { MountFs, OwnChange } from './mount-fs.js';

/** Descriptors of one MountFs stay below this; its place in the set is the handle's high part. */
const FD_SPAN = 2 ** 32;

export class MountFsSet {
  private readonly members: MountFs[] = [];
  private readonly slotOf = new Map<MountFs, number>();
  private readonly setUps: ((fs: MountFs) => void)[] = [];

  /**
   * `primary`: the one MountFs of a one-principal mount, or root's in a shared one. `forUser`: the
   * MountFs acting for a local uid (shared mounts; it calls `add` for each it makes).
   */
  constructor(
    readonly primary: MountFs,
    readonly owners: Owners,
    private readonly forUserOf?: (uid: number) => MountFs | Promise<MountFs>,
  ) {
    this.add(primary);
  }

  /** Whether each local user acts as the store's user of the same name (`--shared`). */
  get shared(): boolean {
    return this.forUserOf !== undefined;
  }

  add(fs: MountFs): void {
    if (this.slotOf.has(fs)) return;
    this.slotOf.set(fs, this.members.length);
    this.members.push(fs);
    for (const f of this.setUps) f(fs);
  }

  /** Calls `f` for every MountFs, those there now and those made later. */
  setUp(f: (fs: MountFs) => void): void {
    this.setUps.push(f);
    for (const fs of this.members) f(fs);
  }

  /** The MountFs acting for the request of local user `uid` (rejects with EACCES when none may). */
  forUser(uid: number): MountFs | Promise<MountFs> {
    return this.forUserOf === undefined ? this.primary : this.forUserOf(uid);
  }

  /** The kernel's handle for `fs`'s descriptor `fd`. */
  handleOf(fs: MountFs, fd: number): number {
    const slot = this.slotOf.get(fs);
    if (slot === undefined || fd < 0 || fd >= FD_SPAN)
      throw new VfsError('EIO', 'open', undefined, `bad descriptor ${fd}`);
    return slot * FD_SPAN + fd;
  }

  /** The MountFs and descriptor of a kernel handle (EINVAL for one this mount never gave). */
  byHandle(fh: number, op: string): { fs: MountFs; fd: number } {
    const fs = this.members[Math.floor(fh / FD_SPAN)];
    if (fs === undefined) throw new VfsError('EINVAL', op, undefined, `bad file handle ${fh}`);
    return { fs, fd: fh % FD_SPAN };
  }

  /**
   * A daemon change event, for every MountFs's caches. Returns what the kernel must drop for it when
   * it was one MountFs's own mutation (MountFs.onChange), undefined when it came from elsewhere.
   */
  onChange(ev: ChangeEvent): OwnChange | undefined {
    let own: OwnChange | undefined;
    for (const fs of this.members) {
      const mine = fs.onChange(ev); // every member's caches hear of it
      own ??= mine;
    }
    return own;
  }

  /** Descriptors held by the kernel, in all. */
  get openByKernel(): number {
    let n = 0;
    for (const fs of this.members) n += fs.openByKernel;
    return n;
  }

  async flushAll(): Promise<void> {
    await Promise.all(this.members.map((fs) => fs.flushAll()));
  }
}
