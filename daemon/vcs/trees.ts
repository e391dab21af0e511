/**
 * The object side of version control: tree and commit objects in memory, the tree ids of the
 * working tree (directories cache their tree id and changes clear the cache up the parent chain,
 * so a commit hashes only the directories that changed), writing trees to the store, and the walk
 * that compares two trees. The operations on top of it live beside it: history.ts (commit, log,
 * commit names), status.ts (status, what a caller may see), diff.ts, revert.ts, snapshot.ts (the
 * `.history` views) and gc.ts; vcs.ts is the facade the daemon holds.
 */
import { VfsError } from '../errors.js';
import { compareNames, markDirty, sortedNames, type DirNode, type Node } from '../core/inode.js';
import { components, isWithin } from '../core/paths.js';
import { slicer, type Vfs } from '../core/vfs.js';
import type { Cred } from '../core/perms.js';
import type { Journal } from '../core/blobs.js';
import {
  decodeCommit,
  decodeTree,
  encodeTree,
  objectId,
  shortId,
  type CommitObject,
  type TreeEntry,
} from '../core/objects.js';
import { IGNORE_FILE, Ignores, type Layer } from './ignore.js';

export interface Scope {
  id: string; // '' or a workspace id
  root: string; // absolute path of the scope's root directory
}

export interface Change {
  path: string; // relative to the scope root, with a leading '/'
  kind: 'added' | 'modified' | 'deleted';
  before?: TreeEntry;
  after?: TreeEntry;
}

/** A path a commit changed (scope-relative), and whether the commit deleted it. */
export interface ChangedPath {
  path: string;
  gone: boolean;
}

/** Who changed a path: the acting user, and the user it acted for (an agent's delegation). */
export interface Attribution {
  by: string;
  on_behalf_of?: string;
}

/** A path's last change since its last commit (see `Trees.marks`, `Marks`). */
interface Mark extends Attribution {
  seq: number;
  /** The change reached everything below the path too (a removal, move or copy of a directory). */
  subtree: boolean;
}

/** The marks by path, with how many each committer has, so that "anyone else?" of the whole tree is O(1). */
class Marks {
  private readonly byPath = new Map<string, Mark>();
  private readonly byWho = new Map<string, number>();

  private static who(m: Attribution): string {
    return m.on_behalf_of === undefined ? m.by : `${m.by}\0${m.on_behalf_of}`;
  }

  private count(m: Attribution, by: number): void {
    const k = Marks.who(m);
    const n = (this.byWho.get(k) ?? 0) + by;
    if (n === 0) this.byWho.delete(k);
    else this.byWho.set(k, n);
  }

  get(path: string): Mark | undefined {
    return this.byPath.get(path);
  }

  set(path: string, m: Mark): void {
    const old = this.byPath.get(path);
    if (old !== undefined) this.count(old, -1);
    this.byPath.set(path, m);
    this.count(m, 1);
  }

  delete(path: string): boolean {
    const old = this.byPath.get(path);
    if (old === undefined) return false;
    this.count(old, -1);
    return this.byPath.delete(path);
  }

  /** Drops the marks at and below `root`. */
  forget(root: string): void {
    if (root === '/') {
      this.byPath.clear();
      this.byWho.clear();
    } else for (const p of this.byPath.keys()) if (isWithin(p, root)) this.delete(p);
  }

  /** Whether a mark at or below `root` is not `me`'s. */
  anyByOthers(root: string, me: Attribution): boolean {
    if (root === '/') return this.byPath.size > (this.byWho.get(Marks.who(me)) ?? 0);
    for (const [p, m] of this.byPath)
      if ((m.by !== me.by || m.on_behalf_of !== me.on_behalf_of) && isWithin(p, root)) return true;
    return false;
  }
}

/** A directory of a tree being rebuilt by `graft`: its entries by name, and the subdirectories edited below it. */
interface Draft {
  entries: Map<string, TreeEntry>;
  subs: Map<string, Draft>;
  /** scope-relative path of this directory ('' for the root) */
  path: string;
}

export const EMPTY_TREE_ENTRIES: TreeEntry[] = [];

/** What the VCS writes through (the daemon's store): objects, and each scope's head. */
interface VcsJournal extends Journal {
  setRef(scope: string, commitId: string): void;
  /** A path's pending attribution (null: committed, forgotten). */
  mark(path: string, row: { by: string; on_behalf_of: string | null; seq: number; subtree: boolean } | null): void;
  /** Every mark at or below the path committed, in one step. */
  forgetMarks(root: string): void;
  /** Resolves when everything recorded so far is written. */
  durable(): Promise<void>;
}

export class Trees {
  readonly trees = new Map<string, TreeEntry[]>();
  readonly commits = new Map<string, CommitObject>();
  /** trees written to the store */
  readonly persisted = new Set<string>();
  /** How many `prepersist` runs are under way (gc keeps the trees they write). */
  prepersisting = 0;
  /** How many walks over trees that yield the event loop are under way (`pruneTrees` keeps the trees they walk). */
  reading = 0;
  /** payloads of trees hashed but not yet written, so a commit does not serialise them twice */
  readonly encoded = new Map<string, Buffer>();
  readonly refs = new Map<string, string>();
  /** levels below each tree measured so far (trees never change, so neither does this) */
  readonly heights = new Map<string, number>();
  /** per tree: the changes adding or deleting it as a whole counts (what `pushAll` lists); memoised like heights */
  readonly leaves = new Map<string, number>();
  readonly emptyTree: string;
  /**
   * Who last changed each absolute path since it was last committed, taken from the core's change
   * events, for the per-path attribution a commit records. Written through the store (`mark`), so a
   * restart keeps it; change it only through `setMark` and `unmark`.
   */
  private readonly marks = new Marks();
  /** Per commit id: the paths it changed, and whether it deleted each (see history.ts `changedPaths`). */
  readonly changedPaths = new Map<string, readonly ChangedPath[]>();
  /** The `.mdvfsignore` rules: ignored entries are left out of the working tree's trees (`hashDir`). */
  readonly ignores: Ignores;
  private seq = 0;

  /**
   * Counts the changes that may change a directory's ignore layers: an ignore file changed, a
   * subtree moved, copied or removed, or everything reloaded. A walk that yields keeps the layers it
   * passed down only while this stays the same.
   */
  private layout = 0;

  constructor(
    readonly vfs: Vfs,
    readonly store: VcsJournal,
  ) {
    this.emptyTree = objectId('tree', encodeTree([]));
    this.trees.set(this.emptyTree, []);
    this.ignores = new Ignores((blob) => vfs.blobs.get(blob));
    vfs.onChange((paths, by, subtree) => {
      if (subtree === true || paths.length === 0 || paths.some((p) => p.endsWith(`/${IGNORE_FILE}`))) this.layout++;
      this.rulesMayHaveChanged(paths, subtree === true);
      if (by === undefined) return;
      const who = attributionOf(by);
      for (const p of paths) this.setMark(p, { ...who, seq: ++this.seq, subtree: subtree === true });
    });
  }

  private setMark(path: string, m: Mark): void {
    this.marks.set(path, m);
    this.store.mark(path, { by: m.by, on_behalf_of: m.on_behalf_of ?? null, seq: m.seq, subtree: m.subtree });
  }

  /** Forgets a path's mark (its change is committed). */
  unmark(path: string): void {
    if (this.marks.delete(path)) this.store.mark(path, null);
  }

  /** The marks a store kept (at start), with the change counter going on after them. */
  loadMarks(
    rows: ReadonlyMap<string, { by: string; on_behalf_of: string | null; seq: number; subtree: boolean }>,
  ): void {
    for (const [path, r] of rows) {
      const m: Mark = { by: r.by, seq: r.seq, subtree: r.subtree };
      if (r.on_behalf_of !== null) m.on_behalf_of = r.on_behalf_of;
      this.marks.set(path, m);
      if (r.seq > this.seq) this.seq = r.seq;
    }
  }

  /**
   * Keeps the cached tree ids true to the ignore rules: an ignore file changed (written, created,
   * removed, moved) may change what every directory below it holds, and a directory moved or
   * copied where an ignore file above it applies (or applied) may hold other entries there. Their
   * cached ids are cleared (O(directories below), only on such events); the default rules depend on
   * names alone, so a move where no ignore file applies keeps its ids.
   */
  private rulesMayHaveChanged(paths: readonly string[], subtree: boolean): void {
    for (const p of paths) {
      if (p.slice(p.lastIndexOf('/') + 1) !== IGNORE_FILE) continue;
      const dir = this.dirAt(p.slice(0, p.lastIndexOf('/')) || '/');
      if (dir !== null) this.clearBelow(dir);
    }
    if (!subtree) return;
    let governed = false;
    for (const p of paths) if (this.ignores.governed(this.nearestDir(p))) governed = true;
    if (!governed) return;
    for (const p of paths) {
      const d = this.dirAt(p);
      if (d !== null) this.clearBelow(d);
    }
  }

  /** Clears the cached tree ids of `top`, every directory below it and its ancestors (iterative). */
  private clearBelow(top: DirNode): void {
    const stack: DirNode[] = [top];
    while (stack.length > 0) {
      const d = stack.pop()!;
      d.treeId = undefined;
      for (const c of d.children.values()) if (c.kind === 'directory') stack.push(c);
    }
    markDirty(top.parent);
  }

  /** The directory at an absolute path, if there is one (no permission checks: bookkeeping). */
  private dirAt(abs: string): DirNode | null {
    let cur: Node = this.vfs.root;
    for (const name of components(abs)) {
      const next: Node | undefined = cur.kind === 'directory' ? cur.children.get(name) : undefined;
      if (next === undefined) return null;
      cur = next;
    }
    return cur.kind === 'directory' ? cur : null;
  }

  /** The parent directory of an absolute path, or its nearest existing ancestor. */
  private nearestDir(abs: string): DirNode | null {
    for (let p = abs; p !== '/';) {
      p = p.slice(0, p.lastIndexOf('/')) || '/';
      const d = this.dirAt(p);
      if (d !== null) return d;
    }
    return null;
  }

  /** Whether a change below `root` not yet committed was made by someone other than `me`. */
  markedByOthers(root: string, me: Attribution): boolean {
    return this.marks.anyByOthers(root, me);
  }

  /**
   * Forgets the marks at and below `root` (all its changes are committed): in the store as one range,
   * so that a commit after a million changes does not write a million row deletions in its atomic step.
   */
  forgetMarks(root: string): void {
    this.marks.forget(root);
    this.store.forgetMarks(root);
  }

  /** Who last changed `abs`: its own mark, or a newer one of an ancestor whose whole subtree changed. */
  attributed(abs: string): Attribution | undefined {
    let best = this.marks.get(abs);
    for (let p = abs; p !== '/';) {
      p = p.slice(0, p.lastIndexOf('/')) || '/';
      const m = this.marks.get(p);
      if (m !== undefined && m.subtree && (best === undefined || m.seq > best.seq)) best = m;
    }
    return best === undefined
      ? undefined
      : best.on_behalf_of === undefined
        ? { by: best.by }
        : { by: best.by, on_behalf_of: best.on_behalf_of };
  }

  // ---------- loading ----------

  loadObject(id: string, type: 'tree' | 'commit', data: Buffer): void {
    if (type === 'tree') {
      const entries = decodeTree(data);
      this.trees.set(id, entries);
      this.persisted.add(id);
      for (const e of entries) if (e.kind === 'f') this.vfs.blobs.inHistory.add(e.ref);
    } else this.commits.set(id, decodeCommit(data));
  }

  /** Object ids a stored object refers to (for fsck). */
  static refsOf(type: 'blob' | 'tree' | 'commit', data: Buffer): string[] {
    if (type === 'tree')
      return decodeTree(data)
        .filter((e) => e.kind !== 'l')
        .map((e) => e.ref);
    if (type === 'commit') {
      const c = decodeCommit(data);
      return c.parent === null ? [c.tree] : [c.tree, c.parent];
    }
    return [];
  }

  // ---------- trees of the working tree ----------

  /**
   * The tree id of a directory, hashing only directories changed since last time. `topLayers`: the
   * ignore layers of `top` when the caller has them (else they are looked up, O(depth)).
   */
  treeOf(top: DirNode, topLayers?: Layer[]): string {
    if (this.cached(top)) return top.treeId!;
    // Post-order with an explicit stack (a deep tree would overflow recursion): a directory is
    // hashed once every changed subdirectory below it has its id. The ignore layers go down with it.
    const stack: DirNode[] = [top];
    const layers = new Map<DirNode, Layer[]>([[top, topLayers ?? this.ignores.layersOf(top)]]);
    const opened = new Set<DirNode>();
    while (stack.length > 0) {
      const dir = stack[stack.length - 1]!;
      const own = layers.get(dir)!;
      if (!opened.has(dir)) {
        opened.add(dir);
        for (const c of this.subdirsToHash(dir, own)) {
          layers.set(c, this.ignores.childLayers(own, c));
          stack.push(c);
        }
        continue;
      }
      stack.pop();
      this.hashDir(dir, own);
    }
    return top.treeId!;
  }

  /**
   * A test of whether the entry at an absolute path (a directory when `isDir`) is ignored, or lies
   * in an ignored directory, by the rules in force now (the ignore files of the directories that
   * exist on its way); for reverts, which restore from trees that may hold paths ignored since.
   * The test keeps the way of the last path it was asked about with each directory's ignore layers,
   * handed down (`childLayers`) rather than looked up to `/`: paths asked in path order (a diff's)
   * cost O(directories on their ways) together, not O(depth²) each. Valid while the tree does not
   * change (one synchronous step).
   */
  ignoredNow(): (abs: string, isDir: boolean) => boolean {
    type Step = { name: string; dir: DirNode | null; layers: Layer[]; ignored: boolean };
    const top: Step = { name: '', dir: this.vfs.root, layers: this.ignores.layersOf(this.vfs.root), ignored: false };
    const way: Step[] = []; // way[i]: the directory at the path's (i+1)th component, existing or not
    return (abs, isDir) => {
      const parts = components(abs);
      if (parts.length === 0) return false;
      const dirs = parts.length - 1;
      let k = 0;
      while (k < way.length && k < dirs && way[k]!.name === parts[k]) k++;
      way.length = k;
      for (let i = k; i < dirs; i++) {
        const up = i === 0 ? top : way[i - 1]!;
        const name = parts[i]!;
        if (up.ignored || this.ignores.ignored(up.layers, name, true)) {
          way.push({ name, dir: null, layers: [], ignored: true });
          continue;
        }
        const next: Node | undefined = up.dir?.children.get(name);
        way.push(
          next !== undefined && next.kind === 'directory'
            ? { name, dir: next, layers: this.ignores.childLayers(up.layers, next), ignored: false }
            : // below the last directory that exists, its rules go on with the path's names
              {
                name,
                dir: null,
                layers: up.layers.map((l) => ({ m: l.m, prefix: l.prefix + name + '/' })),
                ignored: false,
              },
        );
      }
      const up = dirs === 0 ? top : way[dirs - 1]!;
      return up.ignored || this.ignores.ignored(up.layers, parts[dirs]!, isDir);
    };
  }

  /** The subdirectories of `dir` whose tree ids are not cached and that are not ignored (an ignored one is never hashed). */
  private subdirsToHash(dir: DirNode, layers: readonly Layer[]): DirNode[] {
    const out: DirNode[] = [];
    for (const c of dir.children.values()) {
      if (c.kind !== 'directory' || this.cached(c)) continue;
      if (!this.ignores.ignored(layers, c.name, true)) out.push(c);
    }
    return out;
  }

  cached(dir: DirNode): boolean {
    return dir.treeId !== undefined && this.trees.has(dir.treeId);
  }

  /** Hashes one directory whose subdirectories all have their tree ids; `layers`: its ignore layers. */
  private hashDir(dir: DirNode, layers: readonly Layer[]): string {
    const names = sortedNames(dir);
    const entries: TreeEntry[] = [];
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      const c = dir.children.get(name)!;
      // ignored entries are not part of the snapshot (docs/vcs.md, "Ignored paths")
      if (this.ignores.ignored(layers, name, c.kind === 'directory')) continue;
      // one object shape for every entry (no spreads): this loop runs over whole directories
      if (c.kind === 'file')
        entries.push({ name, kind: 'f', mode: c.mode, uid: c.uid, gid: c.gid, ref: c.blob, size: c.size });
      else if (c.kind === 'symlink')
        entries.push({
          name,
          kind: 'l',
          mode: c.mode,
          uid: c.uid,
          gid: c.gid,
          ref: c.target,
          size: Buffer.byteLength(c.target),
        });
      else entries.push({ name, kind: 'd', mode: c.mode, uid: c.uid, gid: c.gid, ref: c.treeId!, size: 0 });
    }
    const payload = encodeTree(entries);
    const id = objectId('tree', payload);
    if (!this.trees.has(id)) {
      this.trees.set(id, entries);
      if (!this.persisted.has(id)) this.encoded.set(id, payload);
    }
    dir.treeId = id;
    return id;
  }

  /**
   * Hashes the scope's changed directories ahead of a commit, status or diff, in slices that yield
   * the event loop, bottom-up (iteratively), so that the synchronous `treeOf` the operation then
   * runs, in the same turn as the rest of it (that is what keeps it atomic), finds every unchanged
   * subtree cached and costs little. Only an optimisation: a directory changed meanwhile has its id
   * cleared again by `markDirty` and is hashed by that `treeOf`, so the result is always current.
   * (One directory is hashed in one go: its cost is its number of entries.)
   */
  async prehash(scope: Scope): Promise<void> {
    let top: DirNode;
    try {
      top = this.scopeDir(scope);
    } catch {
      return; // the operation itself reports it
    }
    const pause = slicer();
    // The ignore layers go down with the walk (O(1) per directory where no ignore file applies);
    // if an ignore file or a subtree moved while it yielded, each directory's are looked up again.
    type Item = { dir: DirNode; expanded: boolean; layers: Layer[]; layout: number };
    const layersNow = (item: Item): Layer[] => {
      if (item.layout !== this.layout) {
        item.layers = this.ignores.layersOf(item.dir);
        item.layout = this.layout;
      }
      return item.layers;
    };
    const stack: Item[] = [{ dir: top, expanded: false, layers: this.ignores.layersOf(top), layout: this.layout }];
    while (stack.length > 0) {
      const item = stack[stack.length - 1]!;
      if (this.cached(item.dir)) {
        stack.pop();
        continue;
      }
      if (!item.expanded) {
        item.expanded = true;
        const own = layersNow(item);
        for (const c of this.subdirsToHash(item.dir, own))
          stack.push({ dir: c, expanded: false, layers: this.ignores.childLayers(own, c), layout: this.layout });
        continue;
      }
      stack.pop();
      this.treeOf(item.dir, layersNow(item));
      const p = pause();
      if (p !== undefined) await p;
    }
  }

  /**
   * Writes the scope's new trees to the store ahead of a commit, in slices that yield the event
   * loop (after `prehash`), so that the commit's atomic step finds them written and only adds the
   * commit. Bottom-up: a tree is written only once all its subtrees are (the invariant `persistTree`
   * relies on when it stops at a written tree). Only an optimisation, like `prehash`: any change in
   * the scope meanwhile (its root's tree id is cleared) stops it, since a tree no longer current
   * may name contents already freed; the commit then writes what is left. Returns whether it wrote
   * everything. A tree written here that no commit ends up using keeps its blobs (see `reachableBlobs`)
   * until the next gc drops it (`dropOrphanTrees`).
   */
  async prepersist(scope: Scope, pauser: () => () => Promise<void> | undefined = slicer): Promise<boolean> {
    this.prepersisting++;
    try {
      return await this.writeAhead(scope, pauser);
    } finally {
      this.prepersisting--;
    }
  }

  async writeAhead(scope: Scope, pauser: () => () => Promise<void> | undefined): Promise<boolean> {
    let top: DirNode;
    try {
      top = this.scopeDir(scope);
    } catch {
      return false; // the commit itself reports it
    }
    if (!this.cached(top)) return false; // changed since prehash: the commit hashes and writes it
    const rootId = top.treeId!;
    // The store writes the rows a slice queued in a turn of its own (SQLite: its batch is an
    // immediate queued before the slice's own), and would take the next slice into that turn: the
    // next slice waits until they are written, then for a turn of its own. A turn is one slice of
    // trees or one batch of their rows, never both.
    const slice = pauser();
    const pause = (): Promise<void> | undefined => {
      const p = slice();
      return p === undefined ? undefined : p.then(() => this.store.durable()).then(nextTurn);
    };
    const stack: { id: string; expanded: boolean }[] = [{ id: rootId, expanded: false }];
    while (stack.length > 0) {
      if (top.treeId !== rootId || this.scopeDirOrNull(scope) !== top) return false; // the scope changed (or went) meanwhile
      const item = stack[stack.length - 1]!;
      if (this.persisted.has(item.id)) {
        stack.pop();
        continue;
      }
      const entries = this.trees.get(item.id);
      if (entries === undefined) return false; // dropped by a gc meanwhile: the commit hashes it again
      if (!item.expanded) {
        item.expanded = true;
        for (const e of entries)
          if (e.kind === 'd' && !this.persisted.has(e.ref)) stack.push({ id: e.ref, expanded: false });
        continue;
      }
      stack.pop();
      for (const e of entries) if (e.kind === 'd' && !this.persisted.has(e.ref)) return false; // a subtree went missing: leave it to the commit
      this.writeTree(item.id, entries);
      this.leafCount(item.id);
      const p = pause();
      if (p !== undefined) await p;
    }
    return true;
  }

  /** Writes one tree whose subtrees are all written; marks its blobs as history. */
  writeTree(id: string, entries: TreeEntry[]): void {
    for (const e of entries) if (e.kind === 'f') this.vfs.blobs.inHistory.add(e.ref);
    this.store.object(id, 'tree', this.encoded.get(id) ?? encodeTree(entries));
    this.encoded.delete(id);
    this.persisted.add(id);
  }

  /** Writes a tree and its not-yet-written subtrees to the store; marks their blobs as history. */
  persistTree(top: string): void {
    // First find every tree to write (all present, or nothing is written), then write them.
    const todo: string[] = [];
    const seen = new Set<string>();
    const stack = [top];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (this.persisted.has(id) || seen.has(id)) continue;
      seen.add(id);
      const entries = this.trees.get(id);
      if (entries === undefined) throw new VfsError('EIO', 'commit', undefined, `tree ${shortId(id)} is missing`);
      todo.push(id);
      for (const e of entries) if (e.kind === 'd') stack.push(e.ref);
    }
    for (const id of todo) this.writeTree(id, this.trees.get(id)!);
  }

  /** What `pushAll` would list for a whole tree: its files, links and empty directories (memoised, iterative). */
  leafCount(top: string): number {
    const stack = [top];
    while (stack.length > 0) {
      const id = stack[stack.length - 1]!;
      if (this.leaves.has(id)) {
        stack.pop();
        continue;
      }
      const entries = this.trees.get(id) ?? EMPTY_TREE_ENTRIES;
      let n = entries.length === 0 ? 1 : 0;
      let ready = true;
      for (const e of entries) {
        if (e.kind !== 'd') n++;
        else {
          const below = this.leaves.get(e.ref);
          if (below === undefined) {
            ready = false;
            stack.push(e.ref);
          } else n += below;
        }
      }
      if (ready) {
        this.leaves.set(id, n);
        stack.pop();
      }
    }
    return this.leaves.get(top)!;
  }

  /** Levels below a tree's root (0 for an empty tree), as `DirNode.height` counts them; memoised. */
  treeHeight(top: string): number {
    const stack = [top];
    while (stack.length > 0) {
      const id = stack[stack.length - 1]!;
      if (this.heights.has(id)) {
        stack.pop();
        continue;
      }
      let h = 0;
      let ready = true;
      for (const e of this.trees.get(id) ?? EMPTY_TREE_ENTRIES) {
        if (e.kind !== 'd') h = Math.max(h, 1);
        else {
          const below = this.heights.get(e.ref);
          if (below === undefined) {
            ready = false;
            stack.push(e.ref);
          } else h = Math.max(h, below + 1);
        }
      }
      if (ready) {
        this.heights.set(id, h);
        stack.pop();
      }
    }
    return this.heights.get(top)!;
  }

  scopeDirOrNull(scope: Scope): DirNode | null {
    try {
      return this.scopeDir(scope);
    } catch {
      return null;
    }
  }

  scopeDir(scope: Scope): DirNode {
    let cur: Node = this.vfs.root;
    for (const name of components(scope.root)) {
      const next: Node | undefined = cur.kind === 'directory' ? cur.children.get(name) : undefined;
      if (next === undefined || next.kind !== 'directory')
        throw new VfsError('ENOENT', 'vcs', scope.root, 'the workspace root no longer exists');
      cur = next;
    }
    if (cur.kind !== 'directory') throw new VfsError('ENOTDIR', 'vcs', scope.root);
    return cur;
  }

  head(scope: Scope): string | null {
    return this.refs.get(scope.id) ?? null;
  }

  headTree(scope: Scope): string {
    const h = this.head(scope);
    return h === null ? this.emptyTree : this.commits.get(h)!.tree;
  }

  // ---------- diffs between trees ----------

  /**
   * Walks two trees side by side, in path order, depth-first with an explicit stack of directory
   * pairs (a deep tree would overflow recursion), descending only where contents differ (a commit's
   * cost is one pass per changed directory). `on` gets each entry that differs, `x` before and `y`
   * after (one may be absent), in the directory `prefix`; a directory present in both comes only
   * when its own attributes differ.
   */
  private walkDiff(
    a: string,
    b: string,
    prefix: string,
    on: (x: TreeEntry | undefined, y: TreeEntry | undefined, prefix: string) => void,
  ): void {
    for (const [x, y, dir] of this.diffSteps(a, b, prefix)) on(x, y, dir);
  }

  /**
   * `walkDiff` one step at a time: each entry that differs, as `[x, y, prefix]`. Trees never change,
   * so a consumer may yield the event loop between steps (keep the trees from `pruneTrees` with
   * `reading`). `enter(dir)` (a directory's path, both sides with different contents) false
   * skips everything below it: at least one change.
   */
  *diffSteps(
    a: string,
    b: string,
    prefix: string,
    enter?: (dir: string) => boolean,
  ): Generator<[TreeEntry | undefined, TreeEntry | undefined, string]> {
    if (a === b) return;
    const frames = [
      { ea: this.trees.get(a) ?? EMPTY_TREE_ENTRIES, eb: this.trees.get(b) ?? EMPTY_TREE_ENTRIES, i: 0, j: 0, prefix },
    ];
    while (frames.length > 0) {
      const f = frames[frames.length - 1]!;
      const { ea, eb } = f;
      // Both lists are sorted by name: walk them side by side.
      if (f.i >= ea.length && f.j >= eb.length) {
        frames.pop();
        continue;
      }
      const cmp = f.i >= ea.length ? 1 : f.j >= eb.length ? -1 : compareNames(ea[f.i]!.name, eb[f.j]!.name);
      const x = cmp <= 0 ? ea[f.i++] : undefined;
      const y = cmp >= 0 ? eb[f.j++] : undefined;
      if (
        x !== undefined &&
        y !== undefined &&
        x.ref === y.ref &&
        x.kind === y.kind &&
        x.mode === y.mode &&
        x.uid === y.uid &&
        x.gid === y.gid
      )
        continue;
      if (x !== undefined && y !== undefined && x.kind === 'd' && y.kind === 'd') {
        if (x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid) yield [x, y, f.prefix];
        const below = `${f.prefix}/${x.name}`;
        if (x.ref !== y.ref && (enter === undefined || enter(below)))
          frames.push({
            ea: this.trees.get(x.ref) ?? EMPTY_TREE_ENTRIES,
            eb: this.trees.get(y.ref) ?? EMPTY_TREE_ENTRIES,
            i: 0,
            j: 0,
            prefix: below,
          });
        continue;
      }
      yield [x, y, f.prefix];
    }
  }

  diffTrees(a: string, b: string, prefix: string, out: Change[]): void {
    for (const c of this.changes(a, b, prefix)) out.push(c);
  }

  /**
   * The changes between two trees in path order, one at a time (what `diffTrees` lists; see
   * `diffSteps` for yielding between them and for `enter`).
   */
  *changes(a: string, b: string, prefix = '', enter?: (dir: string) => boolean): Generator<Change> {
    for (const [x, y, dir] of this.diffSteps(a, b, prefix, enter)) {
      const p = `${dir}/${(x ?? y)!.name}`;
      if (x !== undefined && y !== undefined && x.kind === y.kind)
        yield { path: x.kind === 'd' ? p + '/' : p, kind: 'modified', before: x, after: y };
      else {
        if (x !== undefined) yield* this.allBelow(x, p, 'deleted', enter);
        if (y !== undefined) yield* this.allBelow(y, p, 'added', enter);
      }
    }
  }

  /**
   * The tree `base` with some of the changes that lead from it to `work` applied (a scoped commit):
   * each change sets its path to what `work` has there (or removes it), directories on the way are
   * taken from `work` when `base` lacks them, and a directory left empty that `work` no longer has
   * goes too. The new trees are hashed and kept like the working tree's (the commit writes them).
   */
  graft(base: string, work: string, changes: readonly Change[]): string {
    const top: Draft = { entries: this.entriesOf(base), subs: new Map(), path: '' };
    for (const c of changes) {
      const parts = components(c.path.replace(/\/$/, ''));
      if (parts.length === 0) continue;
      let d = top;
      for (let i = 0; i < parts.length - 1; i++) d = this.draftBelow(d, parts[i]!, work);
      const name = parts[parts.length - 1]!;
      if (c.path.endsWith('/')) {
        // a directory's own mode or owner, or an empty directory added or removed
        if (c.after === undefined) {
          d.entries.delete(name);
          d.subs.delete(name);
        } else if (c.kind === 'added') {
          d.entries.set(name, c.after);
          d.subs.delete(name);
        } else {
          const cur = d.entries.get(name);
          if (cur !== undefined)
            d.entries.set(name, { ...cur, mode: c.after.mode, uid: c.after.uid, gid: c.after.gid });
        }
        continue;
      }
      d.subs.delete(name);
      if (c.after === undefined) {
        // a deletion listed after its path was set by another change of the same path (a kind change) keeps that
        if (c.kind === 'deleted' && d.entries.get(name)?.kind === c.before?.kind) d.entries.delete(name);
      } else d.entries.set(name, c.after);
    }
    return this.sealDraft(top, work);
  }

  private entriesOf(tree: string): Map<string, TreeEntry> {
    return new Map((this.trees.get(tree) ?? EMPTY_TREE_ENTRIES).map((e) => [e.name, e]));
  }

  /** The draft of `name` below `d`, opened from `d`'s entry, or from `work` when `d` has no directory there. */
  private draftBelow(d: Draft, name: string, work: string): Draft {
    const open = d.subs.get(name);
    if (open !== undefined) return open;
    const path = `${d.path}/${name}`;
    let e = d.entries.get(name);
    if (e === undefined || e.kind !== 'd') {
      const w = this.entryAt(work, path);
      e =
        w !== undefined && w.kind === 'd'
          ? { ...w, ref: this.emptyTree }
          : { name, kind: 'd', mode: 0o755, uid: 0, gid: 0, ref: this.emptyTree, size: 0 };
      d.entries.set(name, e);
    }
    const sub: Draft = { entries: this.entriesOf(e.ref), subs: new Map(), path };
    d.subs.set(name, sub);
    return sub;
  }

  /** Hashes a draft bottom-up (iteratively) and returns its tree id. */
  private sealDraft(top: Draft, work: string): string {
    const order: Draft[] = [];
    const stack = [top];
    while (stack.length > 0) {
      const d = stack.pop()!;
      order.push(d);
      for (const s of d.subs.values()) stack.push(s);
    }
    const ids = new Map<Draft, string>();
    for (let i = order.length - 1; i >= 0; i--) {
      const d = order[i]!;
      for (const [name, sub] of d.subs) {
        const id = ids.get(sub)!;
        const w = this.entryAt(work, sub.path);
        if (id === this.emptyTree && (w === undefined || w.kind !== 'd')) d.entries.delete(name);
        else d.entries.set(name, { ...d.entries.get(name)!, ref: id });
      }
      const entries = [...d.entries.values()].sort((a, b) => compareNames(a.name, b.name));
      const payload = encodeTree(entries);
      const id = objectId('tree', payload);
      if (!this.trees.has(id)) {
        this.trees.set(id, entries);
        if (!this.persisted.has(id)) this.encoded.set(id, payload);
      }
      ids.set(d, id);
    }
    return ids.get(top)!;
  }

  /** The changes between two trees, in path order. */
  changesBetween(a: string, b: string): Change[] {
    const out: Change[] = [];
    this.diffTrees(a, b, '', out);
    return out;
  }

  /**
   * How many changes `diffTrees` lists between two trees, without listing them: the same walk,
   * but a whole added or deleted subtree counts its memoised `leafCount`, and no change is built.
   */
  countChanges(a: string, b: string): number {
    let n = 0;
    this.walkDiff(a, b, '', (x, y) => {
      if (x !== undefined && y !== undefined && x.kind === y.kind) n++;
      else {
        if (x !== undefined) n += x.kind === 'd' ? this.leafCount(x.ref) : 1;
        if (y !== undefined) n += y.kind === 'd' ? this.leafCount(y.ref) : 1;
      }
    });
    return n;
  }

  /** The changes between two trees in path order (for tests: what `countChanges` counts). */
  listChanges(a: string, b: string): { path: string; kind: Change['kind'] }[] {
    const out: Change[] = [];
    this.diffTrees(a, b, '', out);
    return out.map((c) => ({ path: c.path, kind: c.kind }));
  }

  /** Every entry of a subtree as one kind of change, in path order (iterative). */
  pushAll(top: TreeEntry, topPath: string, kind: 'added' | 'deleted', out: Change[]): void {
    for (const c of this.allBelow(top, topPath, kind)) out.push(c);
  }

  /** `pushAll` one change at a time; `enter(dir)` false skips what a non-empty directory holds. */
  *allBelow(
    top: TreeEntry,
    topPath: string,
    kind: 'added' | 'deleted',
    enter?: (dir: string) => boolean,
  ): Generator<Change> {
    const stack: { e: TreeEntry; p: string }[] = [{ e: top, p: topPath }];
    while (stack.length > 0) {
      const { e, p } = stack.pop()!;
      if (e.kind !== 'd') {
        yield kind === 'added' ? { path: p, kind, after: e } : { path: p, kind, before: e };
        continue;
      }
      const entries = this.trees.get(e.ref) ?? [];
      if (entries.length === 0)
        yield kind === 'added' ? { path: p + '/', kind, after: e } : { path: p + '/', kind, before: e };
      else if (enter !== undefined && !enter(p)) continue;
      for (let k = entries.length - 1; k >= 0; k--) stack.push({ e: entries[k]!, p: `${p}/${entries[k]!.name}` });
    }
  }

  // ---------- log ----------

  entryAt(tree: string, rel: string): TreeEntry | undefined {
    const parts = components(rel);
    if (parts.length === 0) return { name: '', kind: 'd', mode: 0o755, uid: 0, gid: 0, ref: tree, size: 0 };
    let entries = this.trees.get(tree);
    let found: TreeEntry | undefined;
    for (let i = 0; i < parts.length; i++) {
      found = entries === undefined ? undefined : findEntry(entries, parts[i]!);
      if (found === undefined) return undefined;
      if (i < parts.length - 1) {
        if (found.kind !== 'd') return undefined;
        entries = this.trees.get(found.ref);
      }
    }
    return found;
  }

  // ---------- revert ----------

  // ---------- gc ----------
}

/** Resolves in a later turn of the event loop (after its I/O). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** An entry of a tree by name: tree entries are sorted by compareNames, so a binary search. */
export function attributionOf(cred: Cred): Attribution {
  return cred.delegate === undefined
    ? { by: cred.user.name }
    : { by: cred.user.name, on_behalf_of: cred.delegate.name };
}

export function findEntry(entries: TreeEntry[], name: string): TreeEntry | undefined {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = compareNames(entries[mid]!.name, name);
    if (c === 0) return entries[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return undefined;
}

export function joinScope(root: string, rel: string): string {
  if (rel === '' || rel === '/') return root;
  return root === '/' ? rel : root + rel;
}
