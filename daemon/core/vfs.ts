/**
 * The in-memory filesystem. Synchronous, so every operation is atomic on the event loop.
 * Every method takes the caller's credential first and an absolute path (already resolved by
 * `resolveFor`), walks with permission checks, and throws VfsError codes from the one table.
 */
import { VfsError } from '../errors.js';
import { InodeTable } from './inode-table.js';
import { confine, MAX_SYMLINKS, walk } from './walk.js';
import { BlobStore, type Journal } from './blobs.js';
import { WriteGrants, type GrantHolder } from './grants.js';
import {
  compareNames,
  depthOf,
  heightOf,
  isAncestorOrSelf,
  lowerHeights,
  markDirty,
  nowNs,
  pathOf,
  raiseHeights,
  sortedNames,
  S_ISGID,
  S_ISUID,
  type DirNode,
  type FileNode,
  type LinkNode,
  type Node,
  type NodeRow,
} from './inode.js';
import { components, MAX_DEPTH, normalize, splitParent, validateName } from './paths.js';
import {
  actor,
  createMode,
  isRoot,
  may,
  R,
  requireAccess,
  requireChmod,
  requireChown,
  requireFollow,
  requireUnlink,
  W,
  X,
  type Cred,
  type Principal,
} from './perms.js';

export interface VfsOptions {
  maxFileSize: number;
  journal: Journal;
}

/** What a creating call will place at its path: the levels below it, and for a move its depth now. */
interface Placing {
  height: number;
  oldDepth?: number;
}

export interface WriteOptions {
  mode?: number;
  parents?: boolean;
  ifMatch?: string;
  ifNoneMatch?: string;
  exclusive?: boolean;
  append?: boolean;
  /** Who sends this write (credential and connection), for `grant` and `wantGrant`. */
  holder?: GrantHolder;
  /** A write grant of `holder` (see grants.ts): the file's w-bit check is skipped for its inode. */
  grant?: string;
  /** Answer with a new write grant for the file written (the mount's create and open for writing). */
  wantGrant?: boolean;
  /**
   * With `exclusive`: the new file's times (nanoseconds since the epoch), as a utimens right after the
   * create would set them (its creator must be allowed to: see `ownsForTimes`). One call for the mount's
   * file that was created, written and given its times before it was sent (`rsync`, `cp -p`).
   */
  times?: { atime: bigint; mtime: bigint };
}

/** Whether `cred` may set explicit times on a node owned by `uid` (utimensat(2)): owners and root only. */
function ownsForTimes(cred: Cred, uid: number): boolean {
  return [cred.user, cred.delegate].every((p) => p === undefined || isRoot(p) || p.uid === uid);
}

/**
 * Told of every change: the paths, who made it (none for a change of identities, see `notifyAll`),
 * and whether it reached everything below the paths too (a removal, move or copy of a directory).
 */
type Listener = (paths: string[], by?: Cred, subtree?: boolean) => void;

export class Vfs {
  root: DirNode;
  readonly nodes = new InodeTable();
  readonly blobs: BlobStore;
  /** Write access checked at open/create, for the writes that follow (the mount's descriptors). */
  readonly grants = new WriteGrants();
  nextId = 1;
  readonly maxFileSize: number;
  private readonly journal: Journal;
  private readonly listeners = new Set<Listener>();
  /**
   * Bumped by every change that can alter what a check-then-apply operation checked (entries,
   * modes, owners, identities): sliced operations compare it before they apply (see docs/architecture.md).
   */
  generation = 0;
  /** Per directory: bumped when its entries change, so a listing sorted off the clock knows it is still current. */
  private readonly dirGen = new WeakMap<DirNode, number>();

  constructor(opts: VfsOptions) {
    this.journal = opts.journal;
    this.maxFileSize = opts.maxFileSize;
    this.blobs = new BlobStore(opts.journal);
    this.root = this.makeDir(0, 0, 0o755, null, '');
  }

  // ---------- construction and loading ----------

  /** A fresh filesystem: `/`, `/home` and a sticky `/tmp`. */
  initFresh(): void {
    this.journal.inode(this.root);
    const home = this.makeDir(0, 0, 0o755, this.root, 'home');
    this.attach(this.root, home);
    const tmp = this.makeDir(0, 0, 0o1777, this.root, 'tmp');
    this.attach(this.root, tmp);
  }

  /** What every new node starts with: its ids, mode and place, all four times now. */
  private fresh(id: number, mode: number, uid: number, gid: number, parent: DirNode | null, name: string) {
    const t = nowNs();
    return { id, mode, uid, gid, atime: t, mtime: t, ctime: t, btime: t, parent, name };
  }

  private makeDir(
    uid: number,
    gid: number,
    mode: number,
    parent: DirNode | null,
    name: string,
    id = this.nextId++,
  ): DirNode {
    const d: DirNode = { ...this.fresh(id, mode, uid, gid, parent, name), ...emptyDir() };
    this.nodes.set(id, d);
    return d;
  }

  /** A new file holding `blob` (the caller holds its reference). */
  private makeFile(
    uid: number,
    gid: number,
    mode: number,
    parent: DirNode,
    name: string,
    blob: string,
    size: number,
    id = this.nextId++,
  ): FileNode {
    const f: FileNode = { ...this.fresh(id, mode, uid, gid, parent, name), kind: 'file', blob, size };
    this.nodes.set(id, f);
    return f;
  }

  private makeLink(uid: number, gid: number, parent: DirNode, name: string, target: string): LinkNode {
    const l: LinkNode = { ...this.fresh(this.nextId++, 0o777, uid, gid, parent, name), kind: 'symlink', target };
    this.nodes.set(l.id, l);
    return l;
  }

  /** Loading: rebuilds a node from its stored row. Parents are linked by `linkLoaded`. */
  loadNode(row: NodeRow): Node {
    const base = {
      id: row.id,
      mode: row.mode,
      uid: row.uid,
      gid: row.gid,
      atime: row.atime,
      mtime: row.mtime,
      ctime: row.ctime,
      btime: row.btime,
      parent: null,
      name: row.name,
    };
    let node: Node;
    if (row.kind === 'directory') node = { ...base, ...emptyDir() };
    else if (row.kind === 'file') {
      node = { ...base, kind: 'file', blob: row.blob ?? '', size: row.size };
      this.blobs.loadRef(node.blob);
    } else node = { ...base, kind: 'symlink', target: row.target ?? '' };
    this.nodes.set(node.id, node);
    if (node.id >= this.nextId) this.nextId = node.id + 1;
    return node;
  }

  linkLoaded(child: Node, parentId: number | null): void {
    if (parentId === null) {
      if (child.kind !== 'directory') throw new VfsError('EIO', 'load', undefined, 'the root inode is not a directory');
      this.root = child;
      return;
    }
    const parent = this.nodes.get(parentId);
    if (parent === undefined || parent.kind !== 'directory')
      throw new VfsError('EIO', 'load', undefined, `inode ${child.id} has a missing parent ${parentId}`);
    if (parent.children.has(child.name))
      throw new VfsError('EIO', 'load', undefined, `two entries named '${child.name}' in directory inode ${parentId}`);
    child.parent = parent;
    parent.children.set(child.name, child);
    parent.sorted = undefined;
    if (child.kind === 'directory') parent.subdirs++;
  }

  /**
   * Following (a standby's warm state, daemon/warm.ts): takes a stored row's attributes into a loaded
   * node in place (its children stay), moving its working-tree blob reference if the content changed.
   * Its place (parent, name) is the caller's: `unlinkLoaded`, then `linkLoaded`.
   */
  reloadNode(node: Node, row: NodeRow): void {
    node.mode = row.mode;
    node.uid = row.uid;
    node.gid = row.gid;
    node.atime = row.atime;
    node.mtime = row.mtime;
    node.ctime = row.ctime;
    node.btime = row.btime;
    if (node.kind === 'file') {
      const blob = row.blob ?? '';
      if (blob !== node.blob) {
        this.blobs.loadRef(blob);
        this.blobs.unloadRef(node.blob);
        node.blob = blob;
      }
      node.size = row.size;
    } else if (node.kind === 'symlink') node.target = row.target ?? '';
    if (node.id >= this.nextId) this.nextId = node.id + 1;
  }

  /** Following: takes a loaded node out of its directory (to be linked again, or forgotten by `unloadNode`). */
  unlinkLoaded(node: Node): void {
    const parent = node.parent;
    if (parent === null) return;
    if (parent.children.get(node.name) === node) {
      parent.children.delete(node.name);
      parent.sorted = undefined;
      if (node.kind === 'directory') parent.subdirs--;
    }
    node.parent = null;
  }

  /** Following: forgets a node the store no longer holds (unlinked first), and its working-tree blob reference. */
  unloadNode(node: Node): void {
    this.unlinkLoaded(node);
    if (node.kind === 'file') this.blobs.unloadRef(node.blob);
    this.nodes.delete(node.id);
  }

  /**
   * After loading: sets every directory's height and returns how many inodes hang off `/` (fewer
   * than loaded means a cycle or a lost subtree). Iterative, so no stored tree can stop a start.
   */
  loaded(): number {
    return this.measure(this.root).nodes;
  }

  /**
   * Sets the height of `top` and of every directory below it (one iterative pass, O(subtree));
   * returns top's height and the number of inodes in the subtree.
   */
  private measure(top: DirNode): { height: number; nodes: number } {
    const order: DirNode[] = [];
    const stack: DirNode[] = [top];
    let nodes = 1;
    while (stack.length > 0) {
      const d = stack.pop()!;
      order.push(d);
      d.height = 0;
      nodes += d.children.size;
      for (const c of d.children.values()) {
        if (c.kind === 'directory') stack.push(c);
        else d.height = 1;
      }
    }
    // Reverse pre-order visits every directory after all of its descendants.
    for (let i = order.length - 1; i > 0; i--) {
      const d = order[i]!;
      const p = d.parent!;
      if (p.height <= d.height) p.height = d.height + 1;
    }
    return { height: top.height, nodes };
  }

  onChange(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Tells listeners that anything may have changed for anyone (`paths: []`): identities, groups,
   * tokens or workspaces changed, which alters access without touching any path.
   */
  notifyAll(): void {
    this.generation++;
    this.emit(undefined);
  }

  private emit(by: Cred | undefined, ...paths: string[]): void {
    if (this.listeners.size === 0) return;
    for (const l of this.listeners) l(paths, by);
  }

  /** Like `emit`, for a change of everything below the paths (a removed, moved or copied subtree). */
  private emitTree(by: Cred | undefined, ...paths: string[]): void {
    if (this.listeners.size === 0) return;
    for (const l of this.listeners) l(paths, by, true);
  }

  // ---------- walking ----------

  /**
   * Resolves an absolute path to a node: search (x) on every directory walked, symlinks followed
   * (the final one only if `follow`), at most 40 of them. Security: a workspace caller's result must
   * lie inside the workspace, whatever symlinks were crossed.
   */
  resolve(cred: Cred, abs: string, op: string, follow = true): Node {
    const node = this.lookup(cred, abs, op, follow);
    if (node === undefined) throw new VfsError('ENOENT', op, abs);
    return node;
  }

  /**
   * As resolve, but a missing entry on the way is an answer (undefined), not an error: for callers
   * that ask whether something exists. Every other refusal (EACCES, ENOTDIR, ELOOP) still throws.
   */
  lookup(cred: Cred, abs: string, op: string, follow = true): Node | undefined {
    const node = walk(this.root, cred, abs, op, follow);
    if (node !== undefined) confine(cred, node, op, abs);
    return node;
  }

  /** The directory that holds `abs`'s last component, and that component (validated). */
  private walkParent(cred: Cred, abs: string, op: string): { dir: DirNode; name: string } {
    if (abs === '/') throw new VfsError('EBUSY', op, abs, 'the root directory cannot be replaced');
    if (cred.workspace !== undefined && abs === cred.workspace.root)
      throw new VfsError('EBUSY', op, abs, 'the workspace root cannot be replaced, removed or moved');
    const { dir: dirPath, name } = splitParent(abs);
    validateName(name, op, abs);
    const dir = this.resolve(cred, dirPath, op, true);
    if (dir.kind !== 'directory') throw new VfsError('ENOTDIR', op, abs);
    return { dir, name };
  }

  /**
   * Like walkParent, creating missing parent directories (mkdir -p) when `parents`. `fresh` says
   * the returned directory was created by this very call: creating in it needs no further check.
   * Why: with delegation it belongs to the delegate, and the caller (who passed the w+x check on
   * its parent, as did the delegate) would otherwise be locked out of a directory it just made.
   * `placing` is what will be put at `abs`: its depth is checked before any directory is made.
   */
  private walkParentCreating(
    cred: Cred,
    abs: string,
    op: string,
    parents: boolean,
    placing: Placing = { height: 0 },
  ): { dir: DirNode; name: string; fresh: boolean } {
    if (!parents) {
      const r = this.walkParent(cred, abs, op);
      this.checkDepth(r.dir, 0, placing, op, abs, r.dir.children.has(r.name));
      return { ...r, fresh: false };
    }
    if (cred.workspace !== undefined && abs === cred.workspace.root)
      throw new VfsError('EBUSY', op, abs, 'the workspace root cannot be replaced, removed or moved');
    const { dir: dirPath, name } = splitParent(abs);
    validateName(name, op, abs);
    // The deepest directory that exists on the way (the directories below it are made after the depth check).
    let dir: DirNode;
    let have = 0; // how many leading components of dirPath exist
    const parts = components(dirPath);
    const prefix = (k: number): string => '/' + parts.slice(0, k).join('/');
    const found = this.lookup(cred, dirPath, op, true);
    if (found !== undefined) {
      if (found.kind !== 'directory') throw new VfsError('ENOTDIR', op, dirPath);
      dir = found;
      have = parts.length;
    } else {
      // The walk met a missing entry: every shorter prefix up to it resolves, every longer one is
      // missing, so a binary search finds it in O(log n) walks instead of one walk per level. The
      // prefixes are walked, not looked up: for a workspace caller they include the directories
      // leading down to its workspace, which it may pass through but not be confined to.
      let lo = 0;
      let hi = parts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (walk(this.root, cred, prefix(mid), op, true) === undefined) hi = mid - 1;
        else lo = mid;
      }
      have = lo;
      dir = this.resolveDir(cred, prefix(have), op);
    }
    // the directories to make, top-down, each with its path
    const missing: { name: string; path: string }[] = [];
    for (let k = have, p = prefix(have); k < parts.length; k++) {
      p = p === '/' ? `/${parts[k]!}` : `${p}/${parts[k]!}`;
      missing.push({ name: parts[k]!, path: p });
    }
    for (let i = missing.length - 1; i >= 0; i--) validateName(missing[i]!.name, op, missing[i]!.path);
    this.checkDepth(dir, missing.length, placing, op, abs, missing.length === 0 && dir.children.has(name));
    let fresh = false;
    for (const m of missing) {
      if (dir.children.has(m.name)) {
        // a dangling symlink: resolving through it reports why
        const n = this.resolve(cred, m.path, op, true);
        if (n.kind !== 'directory') throw new VfsError('ENOTDIR', op, m.path);
        dir = n;
        fresh = false;
        continue;
      }
      if (!fresh) requireAccess(cred, dir, W | X, op, m.path);
      dir = this.createDir(cred, dir, m.name, 0o755);
      fresh = true;
      // A directory made on the way is a change of its own: listings of its parent are stale now.
      this.emit(cred, m.path);
    }
    return { dir, name, fresh };
  }

  private resolveDir(cred: Cred, abs: string, op: string): DirNode {
    const n = this.resolve(cred, abs, op, true);
    if (n.kind !== 'directory') throw new VfsError('ENOTDIR', op, abs);
    return n;
  }

  /**
   * Security: ENAMETOOLONG unless what `placing` describes, put `missing` levels below `parent`,
   * stays within MAX_DEPTH. Trees stored before the limit are served but never deepened: writing
   * over an existing entry (`replacing`, with nothing below the new one) and a move that does not
   * take its entry deeper than it is always pass.
   */
  private checkDepth(
    parent: DirNode,
    missing: number,
    placing: Placing,
    op: string,
    abs: string,
    replacing = false,
  ): void {
    if (replacing && placing.height === 0) return;
    const depth = depthOf(parent) + missing + 1;
    if (placing.oldDepth !== undefined && depth <= placing.oldDepth) return;
    const height = placing.height;
    if (depth + height > MAX_DEPTH)
      throw new VfsError(
        'ENAMETOOLONG',
        op,
        abs,
        `the tree may be at most ${MAX_DEPTH} levels deep, and this would reach level ${depth + height}`,
      );
  }

  // ---------- node creation and removal ----------

  /** New entries belong to the acting user; a setgid parent passes on its group (and dirs its bit). */
  private ownership(cred: Cred, parent: DirNode): { uid: number; gid: number; inheritSgid: boolean } {
    const who = actor(cred);
    const sgid = (parent.mode & S_ISGID) !== 0;
    return { uid: who.uid, gid: sgid ? parent.gid : who.gid, inheritSgid: sgid };
  }

  private createDir(cred: Cred, parent: DirNode, name: string, mode: number): DirNode {
    const own = this.ownership(cred, parent);
    const m = createMode(cred, mode & 0o7777) | (own.inheritSgid ? S_ISGID : 0);
    const d = this.makeDir(own.uid, own.gid, m, parent, name);
    this.attach(parent, d);
    return d;
  }

  private attach(parent: DirNode, child: Node): void {
    child.parent = parent;
    parent.children.set(child.name, child);
    parent.sorted = undefined;
    if (child.kind === 'directory') parent.subdirs++;
    raiseHeights(parent, child);
    this.entriesChanged(parent);
    this.journal.inode(child);
  }

  private detach(child: Node): void {
    const parent = child.parent;
    if (parent === null) return;
    parent.children.delete(child.name);
    if (child.kind === 'directory') parent.subdirs--;
    lowerHeights(parent, child);
    this.entriesChanged(parent);
    child.parent = null;
  }

  /** A directory gained or lost an entry: new times, listing and tree id recomputed, row rewritten. */
  private entriesChanged(dir: DirNode): void {
    dir.sorted = undefined;
    this.generation++;
    this.dirGen.set(dir, (this.dirGen.get(dir) ?? 0) + 1);
    const t = nowNs();
    dir.mtime = t;
    dir.ctime = t;
    markDirty(dir);
    this.journal.inode(dir);
  }

  /** Frees a detached subtree: its inodes and its blob references. */
  private destroy(node: Node): number {
    let n = 0;
    const stack: Node[] = [node];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      n++;
      if (cur.kind === 'directory') for (const c of cur.children.values()) stack.push(c);
      if (cur.kind === 'file') this.blobs.release(cur.blob);
      this.nodes.delete(cur.id);
      this.journal.inodeRemoved(cur.id);
    }
    return n;
  }

  private touchNode(node: Node, content: boolean): void {
    this.generation++;
    const t = nowNs();
    node.ctime = t;
    if (content) node.mtime = t;
    markDirty(node.parent);
    this.journal.inode(node);
  }

  private checkSize(size: number, op: string, abs: string): void {
    if (size > this.maxFileSize)
      throw new VfsError(
        'EFBIG',
        op,
        abs,
        `file too large: the limit is ${this.maxFileSize} bytes (SERVICE_MAX_FILE_SIZE)`,
      );
  }

  // ---------- reading ----------

  /** stat/lstat. Throws ENOENT, ENOTDIR, EACCES (x on a parent), ELOOP. */
  stat(cred: Cred, abs: string, nofollow = false): Node {
    return this.resolve(cred, abs, 'stat', !nofollow);
  }

  /** A directory's entries in name order. Needs r on the directory. */
  list(cred: Cred, abs: string): { dir: DirNode; entries: Node[] } {
    const dir = this.resolve(cred, abs, 'scandir', true);
    if (dir.kind !== 'directory') throw new VfsError('ENOTDIR', 'scandir', abs);
    requireAccess(cred, dir, R, 'scandir', abs);
    return { dir, entries: sortedNames(dir).map((n) => dir.children.get(n)!) };
  }

  /**
   * One page of a directory's entries in name order: at most `limit` names after `after` (a name,
   * not necessarily still present). Needs r on the directory. A directory too big to sort within
   * one slice of the event loop is sorted in slices (`sortSliced`); the access check is repeated
   * after that, so the page reflects the directory and permissions as they are when it is cut.
   * Entries that exist during the whole paging are returned exactly once; entries created or
   * removed meanwhile may or may not be (as readdir(3) says).
   */
  async listPage(
    cred: Cred,
    abs: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ entries: Node[]; more: boolean }> {
    let stale: string[] | undefined; // an order sorted by an earlier attempt
    for (let attempt = 0; ; attempt++) {
      const dir = this.listable(cred, abs);
      let names = dir.sorted;
      if (names === undefined && dir.children.size <= SORT_SLICE) names = sortedNames(dir);
      // A directory that keeps changing while we sort: page from our copy (readdir(3) allows missing what is created meanwhile).
      if (names === undefined && attempt >= 2) names = stale;
      if (names === undefined) {
        const gen = this.dirGen.get(dir) ?? 0;
        stale = await sortSliced(dir.children.keys());
        // Still the same entries: keep the order for the next pages and for everyone else.
        if ((this.dirGen.get(dir) ?? 0) === gen && dir.children.size === stale.length) dir.sorted = stale;
        continue; // check access again: the directory or its modes may have changed while we sorted
      }
      const entries: Node[] = [];
      let i = after === undefined ? 0 : upperBound(names, after);
      for (; i < names.length && entries.length < limit; i++) {
        const child = dir.children.get(names[i]!);
        if (child !== undefined) entries.push(child);
      }
      while (i < names.length && !dir.children.has(names[i]!)) i++;
      return { entries, more: i < names.length };
    }
  }

  private listable(cred: Cred, abs: string): DirNode {
    const dir = this.resolve(cred, abs, 'scandir', true);
    if (dir.kind !== 'directory') throw new VfsError('ENOTDIR', 'scandir', abs);
    requireAccess(cred, dir, R, 'scandir', abs);
    return dir;
  }

  /** A file's bytes. Needs r on the file. Throws EISDIR for directories. */
  read(cred: Cred, abs: string): { node: FileNode; data: Buffer } {
    const node = this.resolve(cred, abs, 'open', true);
    if (node.kind === 'directory') throw new VfsError('EISDIR', 'read', abs);
    if (node.kind !== 'file') throw new VfsError('EINVAL', 'read', abs);
    requireAccess(cred, node, R, 'open', abs);
    return { node, data: this.blobs.get(node.blob) };
  }

  readlink(cred: Cred, abs: string): string {
    const node = this.resolve(cred, abs, 'readlink', false);
    if (node.kind !== 'symlink') throw new VfsError('EINVAL', 'readlink', abs, 'not a symbolic link');
    return node.target;
  }

  /** access(2): existence (0) or r/w/x bits for the caller. */
  access(cred: Cred, abs: string, bits: number): Node {
    const node = this.resolve(cred, abs, 'access', true);
    if (bits !== 0) requireAccess(cred, node, bits, 'access', abs);
    return node;
  }

  /** Whether `cred` may read `node` now (a writer learns whether it may keep what it wrote as readable). */
  mayRead(cred: Cred, node: Node): boolean {
    return may(cred, node, R);
  }

  /**
   * open(2) for writing, as the mount does it: checks write access (and `bits`, R for O_RDWR) to the
   * file now and returns a write grant for it (see grants.ts).
   */
  openForWrite(cred: Cred, abs: string, bits: number, holder: GrantHolder): { node: FileNode; grant: string } {
    const node = this.resolve(cred, abs, 'open', true);
    if (node.kind === 'directory') throw new VfsError('EISDIR', 'open', abs);
    if (node.kind !== 'file') throw new VfsError('EINVAL', 'open', abs);
    requireAccess(cred, node, bits | W, 'open', abs);
    return { node, grant: this.grants.issue(holder, node.id, 'open', abs) };
  }

  // ---------- writing ----------

  /**
   * Creates or replaces a file's content (following a final symlink, like open(2) with O_CREAT).
   * New files need w+x on the parent; existing ones need w on the file. Throws EISDIR, EFBIG,
   * EPRECOND (if_match / if_none_match), EEXIST (exclusive).
   */
  write(
    cred: Cred,
    abs: string,
    data: Buffer,
    opts: WriteOptions = {},
    depth = 0,
  ): { node: FileNode; created: boolean; path: string; grant?: string } {
    const op = 'write';
    if (!opts.append) this.checkSize(data.length, op, abs);
    if (opts.wantGrant) {
      if (opts.holder === undefined)
        throw new VfsError('EINVAL', op, abs, 'a write grant needs a connection to hold it');
      this.grants.checkRoom(opts.holder, op, abs);
    }
    const { dir, name, fresh } = this.walkParentCreating(cred, abs, op, opts.parents !== false);
    const existing = dir.children.get(name);
    if (existing?.kind === 'symlink') {
      // O_CREAT|O_EXCL never follows a final symlink (POSIX): else a planted dangling link turns a
      // "create a new file" into a write wherever the link points.
      if (opts.exclusive) throw new VfsError('EEXIST', op, abs);
      requireFollow(cred, dir, existing, op, abs);
      if (depth >= MAX_SYMLINKS) throw new VfsError('ELOOP', op, abs);
      return this.write(cred, normalize(existing.target, pathOf(dir)), data, opts, depth + 1);
    }
    if (existing?.kind === 'directory') throw new VfsError('EISDIR', op, abs);
    if (
      opts.ifNoneMatch !== undefined &&
      existing !== undefined &&
      (opts.ifNoneMatch === '*' || opts.ifNoneMatch === existing.blob)
    )
      throw new VfsError('EPRECOND', op, abs, 'the file exists (If-None-Match)');
    if (opts.ifMatch !== undefined && opts.ifMatch !== '*' && existing?.blob !== opts.ifMatch)
      throw new VfsError('EPRECOND', op, abs, 'the file changed since it was read (If-Match)');
    if (opts.ifMatch === '*' && existing === undefined)
      throw new VfsError('EPRECOND', op, abs, 'the file does not exist (If-Match)');
    if (opts.exclusive && existing !== undefined) throw new VfsError('EEXIST', op, abs);
    if (existing !== undefined) {
      // Write access was checked when the grant was issued (open/create); everything else still is.
      if (!this.grants.allows(opts.grant, opts.holder, existing.id)) requireAccess(cred, existing, W, 'open', abs);
      const content = opts.append ? Buffer.concat([this.blobs.get(existing.blob), data]) : data;
      this.checkSize(content.length, op, abs);
      const grant = opts.wantGrant ? this.grants.issue(opts.holder!, existing.id, op, abs) : undefined;
      this.setContent(existing, content);
      this.emit(cred, pathOf(existing));
      return { node: existing, created: false, path: pathOf(existing), ...(grant !== undefined ? { grant } : {}) };
    }
    if (!fresh) requireAccess(cred, dir, W | X, 'open', abs);
    const own = this.ownership(cred, dir);
    if (opts.times && !ownsForTimes(cred, own.uid)) throw new VfsError('EPERM', 'utime', abs);
    const id = this.nextId++;
    // Issued before anything changes: it can fail (too many grants).
    const grant = opts.wantGrant ? this.grants.issue(opts.holder!, id, op, abs) : undefined;
    const mode = createMode(cred, (opts.mode ?? 0o644) & 0o7777 & ~S_ISUID);
    const node = this.makeFile(own.uid, own.gid, mode, dir, name, this.blobs.put(data), data.length, id);
    if (opts.times) {
      node.atime = opts.times.atime;
      node.mtime = opts.times.mtime;
    }
    this.attach(dir, node);
    const p = pathOf(node);
    this.emit(cred, p);
    return { node, created: true, path: p, ...(grant !== undefined ? { grant } : {}) };
  }

  private setContent(node: FileNode, content: Buffer): void {
    const old = node.blob;
    node.blob = this.blobs.put(content);
    node.size = content.length;
    this.blobs.release(old);
    this.touchNode(node, true);
  }

  /** truncate(2); with a write grant of `holder` for this file, ftruncate(2) (see grants.ts). */
  truncate(cred: Cred, abs: string, size: number, grant?: { id: string; holder: GrantHolder }): FileNode {
    const node = this.resolve(cred, abs, 'truncate', true);
    if (node.kind === 'directory') throw new VfsError('EISDIR', 'truncate', abs);
    if (node.kind !== 'file') throw new VfsError('EINVAL', 'truncate', abs);
    if (!this.grants.allows(grant?.id, grant?.holder, node.id)) requireAccess(cred, node, W, 'truncate', abs);
    this.checkSize(size, 'truncate', abs);
    const cur = this.blobs.get(node.blob);
    if (size === cur.length) return node;
    const next = size < cur.length ? cur.subarray(0, size) : Buffer.concat([cur, Buffer.alloc(size - cur.length)]);
    this.setContent(node, next);
    this.emit(cred, pathOf(node));
    return node;
  }

  /** mkdir; with `parents`, mkdir -p (an existing directory is not an error). */
  mkdir(cred: Cred, abs: string, opts: { parents?: boolean; mode?: number } = {}): { node: DirNode; created: boolean } {
    const op = 'mkdir';
    if (opts.parents) {
      const n = this.lookup(cred, abs, op, true);
      if (n !== undefined && n.kind !== 'directory') throw new VfsError('EEXIST', op, abs);
      if (n !== undefined) return { node: n, created: false };
    }
    const { dir, name, fresh } = this.walkParentCreating(cred, abs, op, opts.parents === true);
    if (dir.children.has(name)) throw new VfsError('EEXIST', op, abs);
    if (!fresh) requireAccess(cred, dir, W | X, op, abs);
    const node = this.createDir(cred, dir, name, opts.mode ?? 0o755);
    this.emit(cred, pathOf(node));
    return { node, created: true };
  }

  symlink(cred: Cred, target: string, abs: string): LinkNode {
    const op = 'symlink';
    if (target === '' || target.includes('\0')) throw new VfsError('EINVAL', op, abs, 'invalid symlink target');
    if (Buffer.byteLength(target) > 4096) throw new VfsError('ENAMETOOLONG', op, abs);
    const { dir, name } = this.walkParent(cred, abs, op);
    if (dir.children.has(name)) throw new VfsError('EEXIST', op, abs);
    requireAccess(cred, dir, W | X, op, abs);
    this.checkDepth(dir, 0, { height: 0 }, op, abs);
    const own = this.ownership(cred, dir);
    const node = this.makeLink(own.uid, own.gid, dir, name, target);
    this.attach(dir, node);
    this.emit(cred, pathOf(node));
    return node;
  }

  /** Removes a file or symlink. Throws EISDIR for a directory, EACCES per the sticky rules. */
  unlink(cred: Cred, abs: string): void {
    const { dir, name } = this.walkParent(cred, abs, 'unlink');
    const node = dir.children.get(name);
    if (node === undefined) throw new VfsError('ENOENT', 'unlink', abs);
    if (node.kind === 'directory') throw new VfsError('EISDIR', 'unlink', abs);
    requireUnlink(cred, dir, node, 'unlink', abs);
    const p = pathOf(node);
    this.detach(node);
    this.destroy(node);
    this.emit(cred, p);
  }

  /** Removes an empty directory. */
  rmdir(cred: Cred, abs: string): void {
    const { dir, name } = this.walkParent(cred, abs, 'rmdir');
    const node = dir.children.get(name);
    if (node === undefined) throw new VfsError('ENOENT', 'rmdir', abs);
    if (node.kind !== 'directory') throw new VfsError('ENOTDIR', 'rmdir', abs);
    this.checkNotJailRoot(cred, node, 'rmdir', abs);
    // As on Linux, permission is checked before emptiness: no probing of unwritable directories.
    requireUnlink(cred, dir, node, 'rmdir', abs);
    if (node.children.size > 0) throw new VfsError('ENOTEMPTY', 'rmdir', abs);
    const p = pathOf(node);
    this.detach(node);
    this.destroy(node);
    this.emitTree(cred, p);
  }

  private checkNotJailRoot(cred: Cred, node: Node, op: string, abs: string): void {
    if (cred.workspace !== undefined && pathOf(node) === cred.workspace.root)
      throw new VfsError('EBUSY', op, abs, 'the workspace root cannot be removed or moved');
  }

  /**
   * REST-style delete: a file, symlink or empty directory; with `recursive` a whole subtree,
   * checked entry by entry first and then removed at once (all-or-nothing).
   */
  remove(cred: Cred, abs: string, recursive: boolean): number {
    const op = recursive ? 'rm -r' : 'rm';
    const { dir, name } = this.walkParent(cred, abs, op);
    const node = dir.children.get(name);
    if (node === undefined) throw new VfsError('ENOENT', op, abs);
    if (node.kind === 'directory') {
      this.checkNotJailRoot(cred, node, op, abs);
      if (!recursive && node.children.size > 0) throw new VfsError('ENOTEMPTY', op, abs);
      this.checkRemovable(cred, node, abs, op);
    }
    requireUnlink(cred, dir, node, op, abs);
    const p = pathOf(node);
    this.detach(node);
    const n = this.destroy(node);
    this.emitTree(cred, p);
    return n;
  }

  /**
   * `remove` for subtrees of any size without holding the event loop (see docs/architecture.md):
   * the permission check walks the subtree in slices; if anything that could change its outcome
   * changed meanwhile (`generation`), it runs again (the third retry runs in one go). Then the
   * subtree is detached at once, so every later request sees it gone, and its inodes are freed and
   * journaled in slices, leaves first: the store holds a connected tree after every batch.
   */
  async removeSliced(cred: Cred, abs: string, recursive: boolean): Promise<number> {
    const op = recursive ? 'rm -r' : 'rm';
    for (let attempt = 0; ; attempt++) {
      const gen = this.generation;
      const { dir, name } = this.walkParent(cred, abs, op);
      const node = dir.children.get(name);
      if (node === undefined) throw new VfsError('ENOENT', op, abs);
      if (node.kind !== 'directory' || node.children.size === 0 || !recursive) return this.remove(cred, abs, recursive);
      this.checkNotJailRoot(cred, node, op, abs);
      requireUnlink(cred, dir, node, op, abs);
      const order = await this.checkRemovableSliced(cred, node, abs, op, attempt < 3);
      if (this.generation !== gen) continue; // something changed while we checked: check again
      const p = pathOf(node);
      this.detach(node);
      this.emitTree(cred, p);
      // At most a chunk (DESTROY_BATCH inodes) per turn, fewer when the turn's time is used up:
      // the store's group commit writes each batch in the yield, so no one transaction (they run on
      // the event loop too) grows with the subtree. The time check matters when the inode table's
      // shards all shrink within a few hundred deletes (ids spread evenly over them).
      const pause = slicer();
      let count = 0;
      for (let c = order.length - 1; c >= 0; c--) {
        const chunk = order[c]!;
        for (let i = chunk.length - 1; i >= 0; i--) {
          const n = chunk[i]!;
          if (n.kind === 'file') this.blobs.release(n.blob);
          this.nodes.delete(n.id);
          this.journal.inodeRemoved(n.id);
          if ((++count & 63) === 0 && i > 0) await pause();
        }
        order[c] = []; // garbage as it goes, not all at the end
        if (c > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
      return count;
    }
  }

  /**
   * `checkRemovable`, iterative and sliced; returns the subtree in pre-order (parents before
   * children) in chunks of DESTROY_BATCH: one array of a million nodes is copied whole each time it
   * grows (tens of ms at that size), and is held until the last inode is freed.
   */
  private async checkRemovableSliced(
    cred: Cred,
    top: DirNode,
    abs: string,
    op: string,
    sliced: boolean,
  ): Promise<Node[][]> {
    const pause = sliced ? slicer() : () => undefined;
    let chunk: Node[] = [top];
    const order: Node[][] = [chunk];
    const stack: { dir: DirNode; path: string }[] = [{ dir: top, path: abs }];
    for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
      const { dir, path } = item;
      if (dir.children.size === 0) continue;
      requireAccess(cred, dir, R | W | X, op, path);
      for (const [name, child] of dir.children) {
        const childPath = path === '/' ? `/${name}` : `${path}/${name}`;
        requireUnlink(cred, dir, child, op, childPath);
        if (chunk.length === DESTROY_BATCH) {
          order.push((chunk = []));
          await pause();
        }
        chunk.push(child);
        if (child.kind === 'directory') stack.push({ dir: child, path: childPath });
      }
    }
    return order;
  }

  /** Every directory in the subtree must be listable and writable, and every entry removable. */
  private checkRemovable(cred: Cred, top: DirNode, topPath: string, op: string): void {
    const stack: { dir: DirNode; abs: string }[] = [{ dir: top, abs: topPath }];
    while (stack.length > 0) {
      const { dir, abs } = stack.pop()!;
      if (dir.children.size === 0) continue;
      requireAccess(cred, dir, R | W | X, op, abs);
      const below: { dir: DirNode; abs: string }[] = [];
      for (const [name, child] of dir.children) {
        const childPath = abs === '/' ? `/${name}` : `${abs}/${name}`;
        requireUnlink(cred, dir, child, op, childPath);
        if (child.kind === 'directory') below.push({ dir: child, abs: childPath });
      }
      // reversed onto the stack: directories are checked in the order a recursive walk would take
      for (let i = below.length - 1; i >= 0; i--) stack.push(below[i]!);
    }
  }

  /**
   * Copies `src` to exactly `dst` (missing parents are created). Directories need `recursive`.
   * Everything is checked before anything is written (all-or-nothing).
   */
  copy(cred: Cred, srcAbs: string, dstAbs: string, opts: { recursive?: boolean; overwrite?: boolean } = {}): number {
    const op = 'copy';
    const src = this.resolve(cred, srcAbs, op, true);
    if (src.kind === 'directory' && !opts.recursive)
      throw new VfsError('EISDIR', op, srcAbs, 'copying a directory needs recursive');
    this.checkReadable(cred, src, srcAbs, op);
    if (src.kind === 'directory') this.refuseInsideSelf(cred, src, dstAbs, op, dstAbs);
    const { dir, name, fresh } = this.walkParentCreating(cred, dstAbs, op, true, { height: heightOf(src) });
    if (src.kind === 'directory' && isAncestorOrSelf(src, dir))
      throw new VfsError('EINVAL', op, dstAbs, 'cannot copy a directory into itself');
    const existing = dir.children.get(name);
    if (existing !== undefined) {
      if (opts.overwrite === false) throw new VfsError('EEXIST', op, dstAbs);
      if (existing.kind === 'directory' || src.kind === 'directory')
        throw new VfsError(existing.kind === 'directory' ? 'EISDIR' : 'EEXIST', op, dstAbs);
      if (existing.kind === 'symlink') throw new VfsError('EEXIST', op, dstAbs);
      requireAccess(cred, existing, W, op, dstAbs);
      if (src.kind === 'file') {
        this.setContent(existing, this.blobs.get(src.blob));
        this.emitTree(cred, pathOf(existing));
        return 1;
      }
    }
    if (!fresh) requireAccess(cred, dir, W | X, op, dstAbs);
    const copy = this.cloneInto(cred, src, dir, name);
    this.emitTree(cred, pathOf(copy));
    let n = 0;
    this.forEachNode(copy, () => n++);
    return n;
  }

  /**
   * EINVAL when `from` (or its deepest existing ancestor) lies inside the directory `src`: checked
   * before missing parents of the destination are created, so a refused copy/move changes nothing.
   */
  private refuseInsideSelf(cred: Cred, src: DirNode, from: string, op: string, dstAbs: string): void {
    for (let p = from; ; p = splitParent(p).dir) {
      let n: Node | undefined;
      try {
        n = this.lookup(cred, p, op, true);
      } catch {
        return; // the regular walk reports other errors
      }
      if (n === undefined) {
        if (p !== '/') continue;
        return;
      }
      if (isAncestorOrSelf(src, n))
        throw new VfsError('EINVAL', op, dstAbs, `cannot ${op === 'copy' ? 'copy' : 'move'} a directory into itself`);
      return;
    }
  }

  private checkReadable(cred: Cred, top: Node, topPath: string, op: string): void {
    const stack: { node: Node; abs: string }[] = [{ node: top, abs: topPath }];
    while (stack.length > 0) {
      const { node, abs } = stack.pop()!;
      if (node.kind === 'file') requireAccess(cred, node, R, op, abs);
      if (node.kind === 'directory') {
        requireAccess(cred, node, R | X, op, abs);
        const children = [...node.children];
        for (let i = children.length - 1; i >= 0; i--)
          stack.push({ node: children[i]![1], abs: `${abs}/${children[i]![0]}` });
      }
    }
  }

  /** Copies `top` as `name` in `parent`, in pre-order and name order (so new inode ids follow paths). */
  private cloneInto(cred: Cred, top: Node, parent: DirNode, name: string): Node {
    let first: Node | undefined;
    const stack: { src: Node; parent: DirNode; name: string }[] = [{ src: top, parent, name }];
    while (stack.length > 0) {
      const { src, parent: into, name: as } = stack.pop()!;
      const own = this.ownership(cred, into);
      const mode = createMode(cred, src.mode & 0o777 & ~S_ISUID);
      let node: Node;
      if (src.kind === 'file') {
        this.blobs.ref(src.blob);
        node = this.makeFile(own.uid, own.gid, mode, into, as, src.blob, src.size);
      } else if (src.kind === 'symlink') {
        node = this.makeLink(own.uid, own.gid, into, as, src.target);
      } else {
        const d = this.makeDir(own.uid, own.gid, mode | (own.inheritSgid ? S_ISGID : 0), into, as);
        // taking the source's height now keeps raiseHeights from climbing once per entry
        d.height = src.height;
        const names = sortedNames(src);
        for (let i = names.length - 1; i >= 0; i--)
          stack.push({ src: src.children.get(names[i]!)!, parent: d, name: names[i]! });
        node = d;
      }
      this.attach(into, node);
      first ??= node;
    }
    return first!;
  }

  /**
   * rename(2): moves `src` to exactly `dst`, replacing a file, or an empty directory with a
   * directory. Missing parents of `dst` are created. Throws EINVAL for a move into itself.
   */
  move(cred: Cred, srcAbs: string, dstAbs: string, opts: { overwrite?: boolean } = {}): { from: string; to: string } {
    const op = 'rename';
    const { dir: sdir, name: sname } = this.walkParent(cred, srcAbs, op);
    const src = sdir.children.get(sname);
    if (src === undefined) throw new VfsError('ENOENT', op, srcAbs);
    this.checkNotJailRoot(cred, src, op, srcAbs);
    if (src.kind === 'directory') this.refuseInsideSelf(cred, src, splitParent(dstAbs).dir, op, dstAbs);
    const placing: Placing = { height: heightOf(src), oldDepth: depthOf(src) };
    if (walk(this.root, cred, splitParent(dstAbs).dir, op, true) === undefined) {
      // Missing parents of dst will be created: check the source side first, so a refused move changes nothing.
      requireUnlink(cred, sdir, src, op, srcAbs);
      if (src.kind === 'directory') requireAccess(cred, src, W, op, srcAbs);
    }
    const { dir: ddir, name: dname, fresh } = this.walkParentCreating(cred, dstAbs, op, true, placing);
    if (src.kind === 'directory' && isAncestorOrSelf(src, ddir))
      throw new VfsError('EINVAL', op, dstAbs, 'cannot move a directory into itself');
    const existing = ddir.children.get(dname);
    if (existing === src) return { from: pathOf(src), to: pathOf(src) };
    requireUnlink(cred, sdir, src, op, srcAbs);
    if (!fresh) requireAccess(cred, ddir, W | X, op, dstAbs);
    // moving a directory to a new parent rewrites its '..': POSIX asks for write on it
    if (src.kind === 'directory' && sdir !== ddir) requireAccess(cred, src, W, op, srcAbs);
    if (existing !== undefined) {
      if (opts.overwrite === false) throw new VfsError('EEXIST', op, dstAbs);
      if (existing.kind === 'directory') {
        if (src.kind !== 'directory') throw new VfsError('EISDIR', op, dstAbs);
        if (existing.children.size > 0) throw new VfsError('ENOTEMPTY', op, dstAbs);
      } else if (src.kind === 'directory') throw new VfsError('ENOTDIR', op, dstAbs);
      requireUnlink(cred, ddir, existing, op, dstAbs);
    }
    const from = pathOf(src);
    if (existing !== undefined) {
      this.detach(existing);
      this.destroy(existing);
    }
    this.detach(src);
    src.name = dname;
    src.ctime = nowNs();
    if (src.kind === 'directory') src.treeId = undefined;
    this.attach(ddir, src);
    const to = pathOf(src);
    this.emitTree(cred, from, to);
    return { from, to };
  }

  chmod(cred: Cred, abs: string, mode: number): Node {
    const node = this.resolve(cred, abs, 'chmod', true);
    let m = mode & 0o7777;
    // Taking only the setuid and setgid bits off a file is what a write or truncate by anyone but the
    // owner does on Linux; through the mount the kernel asks for it, as the writer, before such a
    // write: whoever may write the file may. Any other change of mode is the owner's.
    const dropped = node.mode & ~m;
    const dropsPrivsOnly =
      node.kind === 'file' && dropped !== 0 && (m & ~node.mode) === 0 && (dropped & ~(S_ISUID | S_ISGID)) === 0;
    try {
      requireChmod(cred, node, 'chmod', abs);
    } catch (err) {
      if (!dropsPrivsOnly) throw err;
      try {
        requireAccess(cred, node, W, 'chmod', abs);
      } catch {
        throw err; // not a writer either: the chmod's own refusal
      }
    }
    // POSIX: setgid on a file is dropped when the caller is not in the file's group
    const who = actor(cred);
    if (node.kind !== 'directory' && !isRoot(who) && !who.groups.has(node.gid)) m &= ~S_ISGID;
    node.mode = m;
    this.touchNode(node, false);
    this.emit(cred, pathOf(node));
    return node;
  }

  chown(cred: Cred, abs: string, uid: number | undefined, gid: number | undefined, nofollow = false): Node {
    const node = this.resolve(cred, abs, 'chown', !nofollow);
    const nu = uid ?? node.uid;
    const ng = gid ?? node.gid;
    requireChown(cred, node, nu, ng, 'chown', abs);
    node.uid = nu;
    node.gid = ng;
    if (node.kind === 'file' && !isRoot(actor(cred))) node.mode &= ~(S_ISUID | S_ISGID);
    this.touchNode(node, false);
    this.emit(cred, pathOf(node));
    return node;
  }

  /**
   * utimens: setting explicit times needs ownership (or root); "now" also allows w on the file.
   * `nofollow` sets a symlink's own times (`touch -h`), never its target's.
   */
  utimens(cred: Cred, abs: string, atime: bigint | undefined, mtime: bigint | undefined, nofollow = false): Node {
    const node = this.resolve(cred, abs, 'utime', !nofollow);
    const explicit = atime !== undefined || mtime !== undefined;
    const owner = ownsForTimes(cred, node.uid);
    if (!owner && (explicit || !may(cred, node, W))) throw new VfsError(explicit ? 'EPERM' : 'EACCES', 'utime', abs);
    const now = nowNs();
    node.atime = atime ?? now;
    node.mtime = mtime ?? now;
    node.ctime = now;
    this.journal.inode(node);
    this.emit(cred, pathOf(node));
    return node;
  }

  // ---------- unchecked primitives (for a caller that checked permissions itself: vcs/revert.ts) ----------

  /** Removes a subtree. */
  removeUnchecked(node: Node, by?: Cred): void {
    const p = pathOf(node);
    this.detach(node);
    this.destroy(node);
    this.emitTree(by, p);
  }

  /** Records that a node's attributes (and with `content`, its content) were set directly. */
  changedUnchecked(node: Node, content: boolean, by?: Cred): void {
    this.touchNode(node, content);
    this.emit(by, pathOf(node));
  }

  /** Points a file at content already in the blob store (a snapshot's). */
  setBlobUnchecked(node: FileNode, blob: string, size: number, by?: Cred): void {
    const old = node.blob;
    this.blobs.ref(blob);
    node.blob = blob;
    node.size = size;
    this.blobs.release(old);
    this.touchNode(node, true);
    this.emit(by, pathOf(node));
  }

  /** Creates an entry with exactly these attributes (a directory empty, `height` levels to come below it). */
  createUnchecked(
    parent: DirNode,
    e: {
      name: string;
      kind: Node['kind'];
      mode: number;
      uid: number;
      gid: number;
      blob?: string;
      size?: number;
      target?: string;
      height?: number;
    },
    by?: Cred,
  ): Node {
    let node: Node;
    if (e.kind === 'directory') {
      node = this.makeDir(e.uid, e.gid, e.mode, parent, e.name);
      node.height = e.height ?? 0;
    } else if (e.kind === 'file') {
      const blob = e.blob ?? '';
      this.blobs.ref(blob);
      node = this.makeFile(e.uid, e.gid, e.mode, parent, e.name, blob, e.size ?? 0);
    } else node = this.makeLink(e.uid, e.gid, parent, e.name, e.target ?? '');
    this.attach(parent, node);
    this.emit(by, pathOf(node));
    return node;
  }

  // ---------- users' homes ----------

  /** Creates /home/<name> (0700, owned by the user) or reclaims an existing one. */
  ensureHome(user: Principal): void {
    let home = this.root.children.get('home');
    if (home === undefined || home.kind !== 'directory') {
      home = this.makeDir(0, 0, 0o755, this.root, 'home');
      this.attach(this.root, home);
    }
    const existing = home.children.get(user.name);
    if (existing !== undefined && existing.kind === 'directory') {
      existing.uid = user.uid;
      existing.gid = user.gid;
      existing.mode = 0o700;
      this.touchNode(existing, false);
      return;
    }
    if (existing !== undefined) {
      this.detach(existing);
      this.destroy(existing);
    }
    const d = this.makeDir(user.uid, user.gid, 0o700, home, user.name);
    this.attach(home, d);
  }

  // ---------- traversal helpers for search and VCS ----------

  /** Calls `fn` on `top` and everything below it (pre-order; iterative, whatever the depth). */
  forEachNode(top: Node, fn: (n: Node) => void): void {
    const stack: Node[] = [top];
    while (stack.length > 0) {
      const node = stack.pop()!;
      fn(node);
      if (node.kind === 'directory') for (const c of node.children.values()) stack.push(c);
    }
  }

  /**
   * Visits what the credential may see below `dir` in name order: directories it may list and
   * search, files it may read. Never yields anything from an unreadable place.
   */
  *visible(
    cred: Cred,
    dir: DirNode,
    dirPath: string,
    recursive: boolean,
  ): Generator<{ node: Node; path: string; depth: number }> {
    if (!may(cred, dir, R | X)) return;
    // An explicit stack (pre-order, name order): nested generators would overflow on deep trees.
    const stack: { dir: DirNode; path: string; depth: number; names: string[]; i: number }[] = [
      { dir, path: dirPath, depth: 1, names: sortedNames(dir), i: 0 },
    ];
    while (stack.length > 0) {
      const f = stack[stack.length - 1]!;
      if (f.i >= f.names.length) {
        stack.pop();
        continue;
      }
      const name = f.names[f.i++]!;
      const child = f.dir.children.get(name);
      if (child === undefined) continue;
      const p = f.path === '/' ? `/${name}` : `${f.path}/${name}`;
      yield { node: child, path: p, depth: f.depth };
      if (recursive && child.kind === 'directory' && may(cred, child, R | X))
        stack.push({ dir: child, path: p, depth: f.depth + 1, names: sortedNames(child), i: 0 });
    }
  }

  counts(): { inodes: number; files: number; dirs: number } {
    let files = 0;
    let dirs = 0;
    for (const n of this.nodes.values()) {
      if (n.kind === 'file') files++;
      else if (n.kind === 'directory') dirs++;
    }
    return { inodes: this.nodes.size, files, dirs };
  }
}

/** Directories up to this many entries are sorted in one go (a few ms); bigger ones in slices. */
const SORT_SLICE = 16384;
/** Inodes freed per turn of the event loop by a sliced delete (about 1,000 row deletes per store batch). */
const DESTROY_BATCH = 1024;
/** Work done between two yields of the event loop in sliced operations. */
export const SLICE_MS = 15;

/** A directory's own fields when it is made or loaded: no entries yet, nothing cached. */
function emptyDir(): Pick<DirNode, 'kind' | 'children' | 'sorted' | 'treeId' | 'height' | 'subdirs'> {
  return { kind: 'directory', children: new Map(), sorted: undefined, treeId: undefined, height: 0, subdirs: 0 };
}

/** Yields to the event loop once `SLICE_MS` have passed since the last yield. */
export function slicer(): () => Promise<void> | undefined {
  let deadline = performance.now() + SLICE_MS;
  return () => {
    if (performance.now() < deadline) return undefined;
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        deadline = performance.now() + SLICE_MS;
        resolve();
      }),
    );
  };
}

/**
 * Names in `compareNames` order, sorted without holding the event loop: runs of SORT_SLICE names
 * are sorted natively, then merged pairwise, yielding whenever a slice's time is used up.
 */
export async function sortSliced(keys: Iterable<string>): Promise<string[]> {
  const pause = slicer();
  let runs: string[][] = [];
  let run: string[] = [];
  for (const k of keys) {
    run.push(k);
    if (run.length === SORT_SLICE) {
      // the default order of sort() is code-unit order, the same as compareNames, and faster
      runs.push(run.sort());
      run = [];
      await pause();
    }
  }
  if (run.length > 0) runs.push(run.sort());
  while (runs.length > 1) {
    const next: string[][] = [];
    for (let k = 0; k < runs.length; k += 2) {
      const a = runs[k]!;
      const b = runs[k + 1];
      if (b === undefined) {
        next.push(a);
        continue;
      }
      const out = new Array<string>(a.length + b.length);
      let i = 0;
      let j = 0;
      let o = 0;
      while (o < out.length) {
        const end = Math.min(out.length, o + 8192);
        while (o < end) out[o++] = j >= b.length || (i < a.length && a[i]! < b[j]!) ? a[i++]! : b[j++]!;
        await pause();
      }
      next.push(out);
    }
    runs = next;
  }
  return runs[0] ?? [];
}

/** The index of the first name greater than `name` in a sorted array. */
function upperBound(names: string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareNames(names[mid]!, name) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export { compareNames };
