/**
 * The kernel's inode numbers (FUSE node ids) and the paths they stand for. The daemon is path-based, so
 * a node is a path: one id per path while the kernel holds it (its lookup count, from entry replies,
 * less its forgets). A path unlinked or renamed over loses its node (a file created there next gets a
 * new id), while the old id stays valid for the kernel until it forgets it.
 */
import { childPath } from '../paths.js';
import type { FuseStat } from '../fuse-types.js';

export const ROOT_INO = 1;

export interface Node {
  ino: number;
  /** null once the path was removed or replaced: the kernel may still use the id (an open file). */
  path: string | null;
  nlookup: number;
  dir: boolean;
  /** The attributes last answered for it (what fstat of a removed, still open file shows). */
  attr?: FuseStat;
  /** Writeback mode: the descriptor that still serves a removed file's reads (MountFs.detachLoose). */
  orphanFd?: number;
}

export class Inodes {
  private readonly byIno = new Map<number, Node>();
  private readonly byPath = new Map<string, Node>();
  private next = ROOT_INO + 1;

  constructor() {
    const root: Node = { ino: ROOT_INO, path: '/', nlookup: 1, dir: true };
    this.byIno.set(ROOT_INO, root);
    this.byPath.set('/', root);
  }

  get(ino: number): Node | undefined {
    return this.byIno.get(ino);
  }

  at(path: string): Node | undefined {
    return this.byPath.get(path);
  }

  /** The path of a node the kernel names, or undefined when it was removed. */
  path(ino: number): string | undefined {
    return this.byIno.get(ino)?.path ?? undefined;
  }

  child(parent: number, name: string): string | undefined {
    const p = this.path(parent);
    return p === undefined ? undefined : childPath(p, name);
  }

  /** An entry reply for `path` is being sent: its node, with one more lookup. */
  remember(path: string, dir: boolean): Node {
    let n = this.byPath.get(path);
    if (!n) {
      n = { ino: this.next++, path, nlookup: 0, dir };
      this.byIno.set(n.ino, n);
      this.byPath.set(path, n);
    }
    n.dir = dir;
    n.nlookup++;
    return n;
  }

  /** Returns the node when the kernel no longer holds it. */
  forget(ino: number, nlookup: number): Node | undefined {
    const n = this.byIno.get(ino);
    if (!n || ino === ROOT_INO) return undefined;
    n.nlookup -= nlookup;
    if (n.nlookup > 0) return undefined;
    this.byIno.delete(ino);
    if (n.path !== null && this.byPath.get(n.path) === n) this.byPath.delete(n.path);
    return n;
  }

  /** `path` (and, for a directory, everything below it) no longer exists under that name. */
  removed(path: string): void {
    for (const n of this.under(path)) {
      this.byPath.delete(n.path!);
      n.path = null;
    }
  }

  /** Follows a rename: nodes at `src` and below now stand for the same names under `dst`. */
  renamed(src: string, dst: string): void {
    this.removed(dst);
    const moved = this.under(src);
    for (const n of moved) this.byPath.delete(n.path!);
    for (const n of moved) {
      n.path = dst + n.path!.slice(src.length);
      this.byPath.set(n.path, n);
    }
  }

  /** The nodes at `path` and, when it is a known directory, below it. */
  under(path: string): Node[] {
    const n = this.byPath.get(path);
    if (!n) return [];
    if (!n.dir) return [n];
    const prefix = path === '/' ? '/' : `${path}/`;
    const out = [n];
    for (const [p, m] of this.byPath) if (p.startsWith(prefix) && m !== n) out.push(m);
    return out;
  }

  all(): Node[] {
    return [...this.byPath.values()];
  }
}
