/**
 * Inodes of the in-memory tree. A node knows its single parent and its name in it (no hard links),
 * which keeps rename O(1) and lets a change mark its ancestors dirty for the VCS in O(depth).
 */

interface BaseNode {
  readonly id: number;
  mode: number; // permission bits incl. setuid/setgid/sticky (12 bits)
  uid: number;
  gid: number;
  atime: bigint; // ns
  mtime: bigint;
  ctime: bigint;
  btime: bigint;
  parent: DirNode | null;
  name: string;
}

export interface FileNode extends BaseNode {
  readonly kind: 'file';
  blob: string; // object id of the content
  size: number;
}

export interface DirNode extends BaseNode {
  readonly kind: 'directory';
  children: Map<string, Node>;
  /** Names in order, rebuilt lazily after a change. */
  sorted: string[] | undefined;
  /**
   * Cached tree object id for the VCS. Invariant: when undefined, every ancestor's is undefined too,
   * so marking dirty can stop at the first ancestor already dirty.
   */
  treeId: string | undefined;
  /**
   * Levels below this directory: 0 when empty, else 1 + the tallest child's (files and links count
   * 0). Kept exact by attach and detach (`raiseHeights`, `lowerHeights`), so the depth limit checks a
   * moved or copied subtree in O(1) instead of walking it.
   */
  height: number;
  /** How many children are directories (its link count is 2 + this, as on a real filesystem). */
  subdirs: number;
}

export interface LinkNode extends BaseNode {
  readonly kind: 'symlink';
  target: string;
}

export type Node = FileNode | DirNode | LinkNode;

/** A node as the store keeps it (without its parent link): what loading rebuilds a node from. */
export interface NodeRow {
  id: number;
  kind: Node['kind'];
  mode: number;
  uid: number;
  gid: number;
  atime: bigint;
  mtime: bigint;
  ctime: bigint;
  btime: bigint;
  name: string;
  blob: string | null;
  size: number;
  target: string | null;
}

export const S_ISUID = 0o4000;
export const S_ISGID = 0o2000;
export const S_ISVTX = 0o1000;

export function nowNs(): bigint {
  return process.hrtime.bigint() - hrBase + wallBaseNs;
}
// Wall-clock nanoseconds that stay monotonic within the process.
const hrBase = process.hrtime.bigint();
const wallBaseNs = BigInt(Date.now()) * 1_000_000n;

export function sortedNames(dir: DirNode): string[] {
  if (dir.sorted === undefined) dir.sorted = [...dir.children.keys()].sort(compareNames);
  return dir.sorted;
}

/**
 * Code-unit order of names: equal to UTF-8 byte order (the C locale's `ls`) except between
 * U+E000-U+FFFF and astral characters; deterministic, which is what tree hashing needs.
 */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The absolute path of a node, from its parent chain. */
export function pathOf(node: Node): string {
  const parts: string[] = [];
  let n: Node | null = node;
  while (n !== null && n.parent !== null) {
    parts.push(n.name);
    n = n.parent;
  }
  return '/' + parts.reverse().join('/');
}

/** Marks a directory and its ancestors as changed since their tree ids were computed. */
export function markDirty(dir: DirNode | null): void {
  let d = dir;
  while (d !== null && d.treeId !== undefined) {
    d.treeId = undefined;
    d = d.parent;
  }
}

export function isAncestorOrSelf(maybeAncestor: Node, node: Node): boolean {
  let n: Node | null = node;
  while (n !== null) {
    if (n === maybeAncestor) return true;
    n = n.parent;
  }
  return false;
}

/** Levels below `/`: `/` is 0, `/a` is 1. O(depth). */
export function depthOf(node: Node): number {
  let d = 0;
  for (let n = node.parent; n !== null; n = n.parent) d++;
  return d;
}

/** Levels below a node: 0 for files and links, a directory's height otherwise. */
export function heightOf(node: Node): number {
  return node.kind === 'directory' ? node.height : 0;
}

/** After `child` was attached to `parent`: raises heights up the chain, stopping at the first ancestor already as high. O(depth). */
export function raiseHeights(parent: DirNode, child: Node): void {
  let h = heightOf(child) + 1;
  for (let d: DirNode | null = parent; d !== null && d.height < h; d = d.parent, h++) d.height = h;
}

/**
 * After `child` was detached from `parent`: lowers heights up the chain while the removed entry was
 * what made an ancestor as high as it was. Each such ancestor scans its children until one still
 * reaches that height, so removing anything but the tallest entry is O(1).
 */
export function lowerHeights(parent: DirNode, child: Node): void {
  let h = heightOf(child) + 1;
  for (let d: DirNode | null = parent; d !== null && d.height === h; d = d.parent) {
    let best = 0;
    for (const c of d.children.values()) {
      best = Math.max(best, heightOf(c) + 1);
      if (best === h) return;
    }
    d.height = best;
    h++;
  }
}
