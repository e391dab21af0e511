/**
 * Version control over the working tree: commits snapshot a scope ('' = the whole filesystem, or a
 * workspace id for its subtree) as tree objects. Directories cache their tree id and changes clear
 * the cache up the parent chain, so a commit hashes only the directories that changed.
 */
import { createTwoFilesPatch } from 'diff';
import { VfsError } from '../errors.js';
import { compareNames, depthOf, markDirty, pathOf, sortedNames, type DirNode, type Node } from '../core/inode.js';
import { components, MAX_DEPTH } from '../core/paths.js';
import { slicer, type Vfs } from '../core/vfs.js';
import { may, principalMay, isAdminCred, R, W, X, requireUnlink, requireAccess, requireChmod, requireChown, type Cred } from '../core/perms.js';
import type { Store } from '../store/sqlite.js';
import { decodeCommit, decodeTree, encodeCommit, encodeTree, objectId, shortId, type CommitObject, type TreeEntry } from '../store/objects.js';
import type { CommitRecord, StatusResult } from '../rpc/protocol.js';

export interface Scope {
  id: string; // '' or a workspace id
  root: string; // absolute path of the scope's root directory
}

interface Change {
  path: string; // relative to the scope root, with a leading '/'
  kind: 'added' | 'modified' | 'deleted';
  before?: TreeEntry;
  after?: TreeEntry;
}

const EMPTY_TREE_ENTRIES: TreeEntry[] = [];

export class Vcs {
  readonly trees = new Map<string, TreeEntry[]>();
  readonly commits = new Map<string, CommitObject>();
  /** trees written to the store */
  private readonly persisted = new Set<string>();
  /** How many `prepersist` runs are under way (gc keeps the trees they write). */
  private prepersisting = 0;
  /** payloads of trees hashed but not yet written, so a commit does not serialise them twice */
  private readonly encoded = new Map<string, Buffer>();
  readonly refs = new Map<string, string>();
  /** levels below each tree measured so far (trees never change, so neither does this) */
  private readonly heights = new Map<string, number>();
  /** per tree: the changes adding or deleting it as a whole counts (what `pushAll` lists); memoised like heights */
  private readonly leaves = new Map<string, number>();
  private readonly emptyTree: string;

  constructor(private readonly vfs: Vfs, private readonly store: Store) {
    this.emptyTree = objectId('tree', encodeTree([]));
    this.trees.set(this.emptyTree, []);
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
    if (type === 'tree') return decodeTree(data).filter((e) => e.kind !== 'l').map((e) => e.ref);
    if (type === 'commit') {
      const c = decodeCommit(data);
      return c.parent === null ? [c.tree] : [c.tree, c.parent];
    }
    return [];
  }

  // ---------- trees of the working tree ----------

  /** The tree id of a directory, hashing only directories changed since last time. */
  treeOf(top: DirNode): string {
    if (this.cached(top)) return top.treeId!;
    // Post-order with an explicit stack (a deep tree would overflow recursion): a directory is
    // hashed once every changed subdirectory below it has its id.
    const stack: DirNode[] = [top];
    const opened = new Set<DirNode>();
    while (stack.length > 0) {
      const dir = stack[stack.length - 1]!;
      if (!opened.has(dir)) {
        opened.add(dir);
        for (const c of dir.children.values()) if (c.kind === 'directory' && !this.cached(c)) stack.push(c);
        continue;
      }
      stack.pop();
      this.hashDir(dir);
    }
    return top.treeId!;
  }

  private cached(dir: DirNode): boolean {
    return dir.treeId !== undefined && this.trees.has(dir.treeId);
  }

  /** Hashes one directory whose subdirectories all have their tree ids. */
  private hashDir(dir: DirNode): string {
    const names = sortedNames(dir);
    const entries: TreeEntry[] = new Array<TreeEntry>(names.length);
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      const c = dir.children.get(name)!;
      // one object shape for every entry (no spreads): this loop runs over whole directories
      if (c.kind === 'file') entries[i] = { name, kind: 'f', mode: c.mode, uid: c.uid, gid: c.gid, ref: c.blob, size: c.size };
      else if (c.kind === 'symlink') entries[i] = { name, kind: 'l', mode: c.mode, uid: c.uid, gid: c.gid, ref: c.target, size: Buffer.byteLength(c.target) };
      else entries[i] = { name, kind: 'd', mode: c.mode, uid: c.uid, gid: c.gid, ref: c.treeId!, size: 0 };
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
    const stack: { dir: DirNode; expanded: boolean }[] = [{ dir: top, expanded: false }];
    while (stack.length > 0) {
      const item = stack[stack.length - 1]!;
      if (this.cached(item.dir)) {
        stack.pop();
        continue;
      }
      if (!item.expanded) {
        item.expanded = true;
        for (const c of item.dir.children.values()) if (c.kind === 'directory' && !this.cached(c)) stack.push({ dir: c, expanded: false });
        continue;
      }
      stack.pop();
      this.treeOf(item.dir);
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

  private async writeAhead(scope: Scope, pauser: () => () => Promise<void> | undefined): Promise<boolean> {
    let top: DirNode;
    try {
      top = this.scopeDir(scope);
    } catch {
      return false; // the commit itself reports it
    }
    if (!this.cached(top)) return false; // changed since prehash: the commit hashes and writes it
    const rootId = top.treeId!;
    const pause = pauser();
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
        for (const e of entries) if (e.kind === 'd' && !this.persisted.has(e.ref)) stack.push({ id: e.ref, expanded: false });
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
  private writeTree(id: string, entries: TreeEntry[]): void {
    for (const e of entries) if (e.kind === 'f') this.vfs.blobs.inHistory.add(e.ref);
    this.store.object(id, 'tree', this.encoded.get(id) ?? encodeTree(entries));
    this.encoded.delete(id);
    this.persisted.add(id);
  }

  /** Writes a tree and its not-yet-written subtrees to the store; marks their blobs as history. */
  private persistTree(top: string): void {
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
  private leafCount(top: string): number {
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

  private scopeDirOrNull(scope: Scope): DirNode | null {
    try {
      return this.scopeDir(scope);
    } catch {
      return null;
    }
  }

  private scopeDir(scope: Scope): DirNode {
    let cur: Node = this.vfs.root;
    for (const name of components(scope.root)) {
      const next: Node | undefined = cur.kind === 'directory' ? cur.children.get(name) : undefined;
      if (next === undefined || next.kind !== 'directory') throw new VfsError('ENOENT', 'vcs', scope.root, 'the workspace root no longer exists');
      cur = next;
    }
    if (cur.kind !== 'directory') throw new VfsError('ENOTDIR', 'vcs', scope.root);
    return cur;
  }

  head(scope: Scope): string | null {
    return this.refs.get(scope.id) ?? null;
  }

  private headTree(scope: Scope): string {
    const h = this.head(scope);
    return h === null ? this.emptyTree : this.commits.get(h)!.tree;
  }

  // ---------- diffs between trees ----------

  private diffTrees(a: string, b: string, prefix: string, out: Change[]): void {
    if (a === b) return;
    // Depth-first with an explicit stack of directory pairs (a deep tree would overflow recursion);
    // changes come out in the same order as a recursive walk.
    const frames = [{ ea: this.trees.get(a) ?? EMPTY_TREE_ENTRIES, eb: this.trees.get(b) ?? EMPTY_TREE_ENTRIES, i: 0, j: 0, prefix }];
    while (frames.length > 0) {
      const f = frames[frames.length - 1]!;
      const { ea, eb } = f;
      // Both lists are sorted by name: walk them side by side (a commit's cost is one pass per changed directory).
      if (f.i >= ea.length && f.j >= eb.length) {
        frames.pop();
        continue;
      }
      const cmp = f.i >= ea.length ? 1 : f.j >= eb.length ? -1 : compareNames(ea[f.i]!.name, eb[f.j]!.name);
      const x = cmp <= 0 ? ea[f.i++] : undefined;
      const y = cmp >= 0 ? eb[f.j++] : undefined;
      if (x !== undefined && y !== undefined && x.ref === y.ref && x.kind === y.kind && x.mode === y.mode && x.uid === y.uid && x.gid === y.gid) continue;
      const p = `${f.prefix}/${(x ?? y)!.name}`;
      if (x !== undefined && y !== undefined && x.kind === 'd' && y.kind === 'd') {
        if (x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid) out.push({ path: p + '/', kind: 'modified', before: x, after: y });
        if (x.ref !== y.ref) frames.push({ ea: this.trees.get(x.ref) ?? EMPTY_TREE_ENTRIES, eb: this.trees.get(y.ref) ?? EMPTY_TREE_ENTRIES, i: 0, j: 0, prefix: p });
        continue;
      }
      if (x !== undefined && (y === undefined || x.kind !== y.kind)) this.pushAll(x, p, 'deleted', out);
      if (y !== undefined && (x === undefined || x.kind !== y.kind)) this.pushAll(y, p, 'added', out);
      if (x !== undefined && y !== undefined && x.kind === y.kind && (x.ref !== y.ref || x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid)) out.push({ path: p, kind: 'modified', before: x, after: y });
    }
  }

  /**
   * How many changes `diffTrees` lists between two trees, without listing them: the same walk,
   * but a whole added or deleted subtree counts its memoised `leafCount`, and no path is built.
   */
  countChanges(a: string, b: string): number {
    if (a === b) return 0;
    let n = 0;
    const frames = [{ ea: this.trees.get(a) ?? EMPTY_TREE_ENTRIES, eb: this.trees.get(b) ?? EMPTY_TREE_ENTRIES, i: 0, j: 0 }];
    while (frames.length > 0) {
      const f = frames[frames.length - 1]!;
      const { ea, eb } = f;
      if (f.i >= ea.length && f.j >= eb.length) {
        frames.pop();
        continue;
      }
      const cmp = f.i >= ea.length ? 1 : f.j >= eb.length ? -1 : compareNames(ea[f.i]!.name, eb[f.j]!.name);
      const x = cmp <= 0 ? ea[f.i++] : undefined;
      const y = cmp >= 0 ? eb[f.j++] : undefined;
      if (x !== undefined && y !== undefined && x.ref === y.ref && x.kind === y.kind && x.mode === y.mode && x.uid === y.uid && x.gid === y.gid) continue;
      if (x !== undefined && y !== undefined && x.kind === 'd' && y.kind === 'd') {
        if (x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid) n++;
        if (x.ref !== y.ref) frames.push({ ea: this.trees.get(x.ref) ?? EMPTY_TREE_ENTRIES, eb: this.trees.get(y.ref) ?? EMPTY_TREE_ENTRIES, i: 0, j: 0 });
        continue;
      }
      if (x !== undefined && (y === undefined || x.kind !== y.kind)) n += x.kind === 'd' ? this.leafCount(x.ref) : 1;
      if (y !== undefined && (x === undefined || x.kind !== y.kind)) n += y.kind === 'd' ? this.leafCount(y.ref) : 1;
      if (x !== undefined && y !== undefined && x.kind === y.kind && (x.ref !== y.ref || x.mode !== y.mode || x.uid !== y.uid || x.gid !== y.gid)) n++;
    }
    return n;
  }

  /** The changes between two trees in path order (for tests: what `countChanges` counts). */
  listChanges(a: string, b: string): { path: string; kind: Change['kind'] }[] {
    const out: Change[] = [];
    this.diffTrees(a, b, '', out);
    return out.map((c) => ({ path: c.path, kind: c.kind }));
  }

  /** Every entry of a subtree as one kind of change, in path order (iterative). */
  private pushAll(top: TreeEntry, topPath: string, kind: 'added' | 'deleted', out: Change[]): void {
    const stack: { e: TreeEntry; p: string }[] = [{ e: top, p: topPath }];
    while (stack.length > 0) {
      const { e, p } = stack.pop()!;
      if (e.kind !== 'd') {
        out.push(kind === 'added' ? { path: p, kind, after: e } : { path: p, kind, before: e });
        continue;
      }
      const entries = this.trees.get(e.ref) ?? [];
      if (entries.length === 0) out.push(kind === 'added' ? { path: p + '/', kind, after: e } : { path: p + '/', kind, before: e });
      for (let k = entries.length - 1; k >= 0; k--) stack.push({ e: entries[k]!, p: `${p}/${entries[k]!.name}` });
    }
  }

  // ---------- commit ----------

  /**
   * Snapshots the scope, atomically (one turn of the event loop). Cost grows with what changed
   * since the last commit, and with what `prehash` and `prepersist` did not already do.
   */
  commit(cred: Cred, scope: Scope, message: string, extra: { revert_of?: string } = {}): CommitRecord {
    if (message.trim() === '') throw new VfsError('EINVAL', 'commit', undefined, 'a commit needs a message');
    const tree = this.treeOf(this.scopeDir(scope));
    const parent = this.head(scope);
    this.persistTree(tree);
    const changes = this.countChanges(parent === null ? this.emptyTree : this.commits.get(parent)!.tree, tree);
    const c: CommitObject = { tree, parent, author: cred.user.name, scope: scope.id, root: scope.root, message, timestamp: Math.floor(Date.now() / 1000), changes };
    if (cred.delegate !== undefined) c.on_behalf_of = cred.delegate.name;
    if (extra.revert_of !== undefined) c.revert_of = extra.revert_of;
    const payload = encodeCommit(c);
    const id = objectId('commit', payload);
    this.commits.set(id, c);
    this.store.object(id, 'commit', payload);
    this.refs.set(scope.id, id);
    this.store.setRef(scope.id, id);
    return this.record(id, c);
  }

  record(id: string, c: CommitObject): CommitRecord {
    const r: CommitRecord = { hash: shortId(id), message: c.message, author: c.author, timestamp: c.timestamp, parent: c.parent === null ? null : shortId(c.parent), changes: c.changes };
    if (c.on_behalf_of !== undefined) r.on_behalf_of = c.on_behalf_of;
    if (c.scope !== '') r.workspace = c.scope;
    return r;
  }

  /**
   * A commit named as git names it, within the scope's history: `HEAD`, a unique hash prefix (4+ hex
   * digits), either followed by ancestry steps `~n`, `~` or `^` (`HEAD~2`, `abcd^`; one parent per commit).
   * Every transport names commits through here (revert, diff, the mount's .history).
   */
  find(scope: Scope, rev: string, op = 'revert'): string {
    const spec = rev.trim();
    const shown = spec.slice(0, 80);
    const m = /^([^~^]*)((?:~\d*|\^1?)*)$/.exec(spec);
    const base = m?.[1] ?? '';
    let id: string;
    if (base.toUpperCase() === 'HEAD' || base === '@') {
      const head = this.head(scope);
      if (head === null) throw new VfsError('ENOENT', op, undefined, `no commit ${shown}: nothing has been committed yet`);
      id = head;
    } else {
      const p = base.toLowerCase();
      if (m === null || !/^[0-9a-f]{4,64}$/.test(p)) throw new VfsError('EINVAL', op, undefined, `'${shown}' is not a commit: give HEAD, a hash of at least 4 hex digits, or either with ~n or ^`);
      const hits: string[] = [];
      for (let h = this.head(scope); h !== null; h = this.commits.get(h)?.parent ?? null) if (h.startsWith(p)) hits.push(h);
      if (hits.length === 0) throw new VfsError('ENOENT', op, undefined, `no commit ${p} in this history`);
      if (hits.length > 1) throw new VfsError('EINVAL', op, undefined, `commit prefix ${p} is ambiguous: give more hex digits`);
      id = hits[0]!;
    }
    let back = 0;
    for (const step of (m?.[2] ?? '').match(/~\d*|\^1?/g) ?? []) {
      const n = step.startsWith('~') && step.length > 1 ? Number(step.slice(1)) : 1;
      if (!Number.isSafeInteger(n)) throw new VfsError('EINVAL', op, undefined, `'${shown}' steps back too far`);
      back += n;
    }
    for (let i = 0; i < back; i++) {
      const parent = this.commits.get(id)?.parent ?? null;
      if (parent === null) throw new VfsError('ENOENT', op, undefined, `no commit ${shown}: ${base} has only ${i} commit${i === 1 ? '' : 's'} before it`);
      id = parent;
    }
    return id;
  }

  // ---------- log ----------

  log(scope: Scope, opts: { path?: string; limit?: number }, cred?: Cred): CommitRecord[] {
    // Security: a path's history would tell whether a file exists where the caller cannot look.
    if (opts.path !== undefined && cred !== undefined && !this.visibleNow(cred, scope, opts.path)) throw new VfsError('EACCES', 'log', opts.path);
    const out: CommitRecord[] = [];
    const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
    for (let id = this.head(scope); id !== null && out.length < limit; ) {
      const c = this.commits.get(id);
      if (c === undefined) break;
      if (opts.path === undefined || this.touches(c, opts.path)) out.push(this.record(id, c));
      id = c.parent;
    }
    return out;
  }

  /** Whether a commit changed the entry at `rel` (relative to the scope root). */
  private touches(c: CommitObject, rel: string): boolean {
    const now = this.entryAt(c.tree, rel);
    const before = c.parent === null ? undefined : this.entryAt(this.commits.get(c.parent)!.tree, rel);
    if (now === undefined && before === undefined) return false;
    if (now === undefined || before === undefined) return true;
    return now.ref !== before.ref || now.mode !== before.mode || now.kind !== before.kind || now.uid !== before.uid || now.gid !== before.gid;
  }

  private entryAt(tree: string, rel: string): TreeEntry | undefined {
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

  // ---------- status and diff ----------

  private changesSince(scope: Scope, from: string, to: string): Change[] {
    const out: Change[] = [];
    this.diffTrees(from, to, '', out);
    return out;
  }

  /** Whether the caller may read `rel` (scope-relative) in the working tree, or for a path that is gone, list its nearest existing ancestor. */
  private visibleNow(cred: Cred, scope: Scope, rel: string, memo?: Map<string, boolean>): boolean {
    const abs = joinScope(scope.root, rel.replace(/\/$/, ''));
    let p = abs;
    let exact = true;
    const tried: string[] = [];
    const answer = (v: boolean): boolean => {
      // Within one request the answer for a missing path's ancestors is the same for all its siblings.
      if (memo !== undefined) for (const q of tried) memo.set(q, v);
      return v;
    };
    for (;;) {
      if (!exact) {
        const known = memo?.get(p);
        if (known !== undefined) return answer(known);
        tried.push(p);
      }
      try {
        const n = this.vfs.resolve(cred, p, 'status', false);
        if (exact) return n.kind === 'directory' ? may(cred, n, R | X) : n.kind === 'symlink' || may(cred, n, R);
        return answer(n.kind === 'directory' && may(cred, n, R | X));
      } catch (err) {
        if (!(err instanceof VfsError) || err.code !== 'ENOENT' || p === '/') return answer(false);
      }
      p = p.slice(0, p.lastIndexOf('/')) || '/';
      exact = false;
    }
  }

  /** Whether the caller could read `rel` as it was in a snapshot (its stored modes and owners). */
  private visibleIn(cred: Cred, tree: string, rel: string): boolean {
    if (isAdminCred(cred)) return true;
    const parts = components(rel.replace(/\/$/, ''));
    let entries = this.trees.get(tree);
    for (let i = 0; i < parts.length; i++) {
      const e = entries === undefined ? undefined : findEntry(entries, parts[i]!);
      if (e === undefined) return true; // absent here: nothing to hide
      const node = { mode: e.mode, uid: e.uid, gid: e.gid, kind: e.kind === 'd' ? 'directory' : e.kind === 'f' ? 'file' : 'symlink' } as Node;
      const last = i === parts.length - 1;
      const bits = e.kind === 'd' ? (last ? R | X : X) : e.kind === 'f' ? R : 0;
      for (const p of cred.delegate === undefined ? [cred.user] : [cred.user, cred.delegate]) if (bits !== 0 && !principalMay(p, node, bits)) return false;
      if (e.kind !== 'd') return true;
      entries = this.trees.get(e.ref);
    }
    return true;
  }

  status(cred: Cred, scope: Scope): StatusResult {
    const head = this.head(scope);
    const changes = this.changesSince(scope, this.headTree(scope), this.treeOf(this.scopeDir(scope)));
    const added: string[] = [];
    const modified: string[] = [];
    const deleted: string[] = [];
    const memo = new Map<string, boolean>();
    const headTree = this.headTree(scope);
    // Bounded answer: at most STATUS_MAX paths are listed; `truncated` and a last line count the rest.
    let more = 0;
    for (const c of changes) {
      if (!this.visibleNow(cred, scope, c.path, memo)) continue;
      if (c.kind !== 'added' && !this.visibleIn(cred, headTree, c.path)) continue;
      if (added.length + modified.length + deleted.length >= STATUS_MAX) more++;
      else (c.kind === 'added' ? added : c.kind === 'modified' ? modified : deleted).push(c.path);
    }
    const lines: string[] = [head === null ? 'No commits yet' : `On commit ${shortId(head)}`];
    if (added.length + modified.length + deleted.length === 0) lines.push('nothing to commit, working tree clean');
    else {
      lines.push('Changes since the last commit:');
      for (const p of added) lines.push(`\tadded:    ${p}`);
      for (const p of modified) lines.push(`\tmodified: ${p}`);
      for (const p of deleted) lines.push(`\tdeleted:  ${p}`);
      if (more > 0) lines.push(`\t... and ${more} more changes (only the first ${STATUS_MAX} are listed)`);
    }
    const r: StatusResult = { added, modified, deleted, clean: added.length + modified.length + deleted.length === 0, head: head === null ? null : shortId(head), text: lines.join('\n') + '\n' };
    if (more > 0) {
      r.truncated = true;
      r.more = more;
    }
    return r;
  }

  /**
   * Unified diff between two commits, or a commit and the working tree, optionally one path.
   *
   * Stall-free and consistent (see docs/architecture.md): what to diff is decided synchronously,
   * in one turn of the event loop and in O(changes): the trees, the changed paths the caller may
   * see, and the content buffers of both sides (working-tree blobs can be freed by a later write).
   * The text diffs, the expensive part, then run in slices that yield the event loop, each file
   * bounded in time, and the output stops at DIFF_MAX_BYTES with `truncated` and a marker line.
   */
  async diff(cred: Cred, scope: Scope, opts: { from?: string; to?: string; path?: string }): Promise<{ diff: string; truncated: boolean }> {
    const fromId = opts.from === undefined ? this.head(scope) : this.find(scope, opts.from, 'diff');
    const fromTree = fromId === null ? this.emptyTree : this.commits.get(fromId)!.tree;
    const toWorking = opts.to === undefined;
    const toTree = toWorking ? this.treeOf(this.scopeDir(scope)) : this.commits.get(this.find(scope, opts.to!, 'diff'))!.tree;
    const changes = this.changesSince(scope, fromTree, toTree);
    const filter = opts.path === undefined ? undefined : opts.path.replace(/\/$/, '');
    const memo = new Map<string, boolean>();
    const work: { label: string; before: TreeEntry | undefined; after: TreeEntry | undefined; a: Buffer | string; b: Buffer | string }[] = [];
    for (const c of changes) {
      if (filter !== undefined && filter !== '' && c.path !== filter && !c.path.startsWith(filter + '/')) continue;
      if (c.path.endsWith('/')) continue;
      if (!this.visibleIn(cred, fromTree, c.path) || !this.visibleIn(cred, toTree, c.path)) continue;
      if (toWorking && !this.visibleNow(cred, scope, c.path, memo)) continue;
      work.push({ label: c.path.slice(1), before: c.before, after: c.after, a: this.entryContent(c.before), b: this.entryContent(c.after) });
    }
    const parts: string[] = [];
    let bytes = 0;
    let shown = 0;
    // Myers' algorithm is O(N·D): past a time budget for the request a file's diff becomes a whole
    // replacement, and no single file may hold the event loop longer than DIFF_FILE_MS.
    const deadline = Date.now() + DIFF_BUDGET_MS;
    const pause = slicer();
    for (const w of work) {
      await pause();
      const a = textOf(w.a);
      const b = textOf(w.b);
      let part: string;
      if (a === b) part = `diff ${w.label}\nmode ${w.before?.mode.toString(8) ?? '-'} -> ${w.after?.mode.toString(8) ?? '-'}\n`;
      else {
        const oldName = w.before === undefined ? '/dev/null' : `a/${w.label}`;
        const newName = w.after === undefined ? '/dev/null' : `b/${w.label}`;
        const timeout = Math.max(DIFF_MIN_MS, Math.min(DIFF_FILE_MS, deadline - Date.now()));
        const patch = createTwoFilesPatch(oldName, newName, a, b, undefined, undefined, { context: 3, timeout });
        part = patch === undefined ? wholeReplacement(oldName, newName, a, b) : patch.replace(/^=+\n/m, '');
      }
      const size = Buffer.byteLength(part);
      if (bytes + size > DIFF_MAX_BYTES) {
        // The first file alone is too big: show its beginning, cut at a line.
        if (shown === 0) parts.push(part.slice(0, part.lastIndexOf('\n', DIFF_MAX_BYTES / 2) + 1));
        parts.push(`[diff truncated: the output is limited to ${DIFF_MAX_BYTES} bytes; ${work.length - shown} of ${work.length} changed files not shown (narrow it with a path)]\n`);
        return { diff: parts.join(''), truncated: true };
      }
      parts.push(part);
      bytes += size;
      shown++;
    }
    return { diff: parts.join(''), truncated: false };
  }

  /** The bytes to diff for one side of a change, taken now (a symlink's text, nothing for a directory). */
  private entryContent(e: TreeEntry | undefined): Buffer | string {
    if (e === undefined || e.kind === 'd') return '';
    if (e.kind === 'l') return `-> ${e.ref}\n`;
    const data = this.vfs.blobs.get(e.ref);
    return data.includes(0) ? `Binary content (${data.length} bytes, ${shortId(e.ref)})\n` : data;
  }

  // ---------- revert ----------

  /**
   * Restores the scope to a commit: uncommitted work is committed first, every change is
   * permission-checked before anything is applied (all-or-nothing), and the revert is a new commit.
   */
  revert(cred: Cred, scope: Scope, prefix: string): { hash: string; reverted_to: string; saved: string | null; commit: CommitRecord } {
    const target = this.find(scope, prefix);
    const targetTree = this.commits.get(target)!.tree;
    const dir = this.scopeDir(scope);
    // Security: a commit taken before the depth limit may hold a deeper tree; it is not rebuilt.
    const deepest = depthOf(dir) + this.treeHeight(targetTree);
    if (deepest > MAX_DEPTH) throw new VfsError('ENAMETOOLONG', 'revert', scope.root, `commit ${shortId(target)} holds a tree reaching level ${deepest}, and the tree may be at most ${MAX_DEPTH} levels deep`);
    let saved: string | null = null;
    if (this.treeOf(dir) !== this.headTree(scope)) {
      this.checkRevert(cred, scope, dir, targetTree);
      saved = this.commit(cred, scope, `save uncommitted changes before revert to ${shortId(target)}`).hash;
    } else this.checkRevert(cred, scope, dir, targetTree);
    this.applyTree(dir, targetTree);
    const commit = this.commit(cred, scope, `revert to ${shortId(target)}`, { revert_of: target });
    return { hash: commit.hash, reverted_to: shortId(target), saved, commit };
  }

  /** Security: a non-admin may revert only entries they could change by hand. */
  private checkRevert(cred: Cred, scope: Scope, dir: DirNode, targetTree: string): void {
    if (isAdminCred(cred)) return;
    const changes: Change[] = [];
    this.diffTrees(this.treeOf(dir), targetTree, '', changes);
    try {
      for (const c of changes) {
        const rel = c.path.replace(/\/$/, '');
        const abs = joinScope(scope.root, rel);
        const parentAbs = abs.slice(0, abs.lastIndexOf('/')) || '/';
        const existing = this.lookupQuiet(abs);
        if (c.kind === 'modified' && existing !== undefined && c.after !== undefined) {
          this.checkModify(cred, existing, c.after, abs);
          continue;
        }
        if (c.kind === 'added') {
          const parent = this.nearestDir(parentAbs);
          if (parent !== null) requireAccess(cred, parent, W | X, 'revert', abs);
        } else if (existing !== undefined) this.checkRemove(cred, dir, existing, rel, targetTree);
      }
    } catch (err) {
      // One answer for a denied revert, whichever rule denied it (chmod and chown say EPERM).
      if (err instanceof VfsError && err.code === 'EPERM') throw new VfsError('EACCES', 'revert', err.path, err.message);
      throw err;
    }
  }

  /** Changing an entry in place: content needs w, a link target needs replacing the link, attributes need chmod/chown rights. */
  private checkModify(cred: Cred, node: Node, want: TreeEntry, abs: string): void {
    if (node.kind === 'file' && node.blob !== want.ref) requireAccess(cred, node, W, 'revert', abs);
    // a symlink's target cannot be written, only replaced (its 0777 mode grants nothing)
    if (node.kind === 'symlink' && node.target !== want.ref && node.parent !== null) requireUnlink(cred, node.parent, node, 'revert', abs);
    if (node.mode !== want.mode) requireChmod(cred, node, 'revert', abs);
    if (node.uid !== want.uid || node.gid !== want.gid) requireChown(cred, node, want.uid, want.gid, 'revert', abs);
  }

  /** Removing an entry also removes each ancestor the target lacks: every one needs unlink rights in its parent, like `rm -r`. */
  private checkRemove(cred: Cred, scopeDir: DirNode, node: Node, rel: string, targetTree: string): void {
    let n = node;
    let r = rel;
    for (;;) {
      const parent = n.parent;
      if (parent === null) return;
      requireUnlink(cred, parent, n, 'revert', pathOf(n));
      if (parent === scopeDir) return;
      r = r.slice(0, r.lastIndexOf('/'));
      const kept = this.entryAt(targetTree, r);
      if (kept !== undefined && kept.kind === 'd') return;
      n = parent;
    }
  }

  private lookupQuiet(abs: string): Node | undefined {
    let cur: Node = this.vfs.root;
    for (const name of components(abs)) {
      if (cur.kind !== 'directory') return undefined;
      const n: Node | undefined = cur.children.get(name);
      if (n === undefined) return undefined;
      cur = n;
    }
    return cur;
  }

  private nearestDir(abs: string): DirNode | null {
    let p = abs;
    for (;;) {
      const n = this.lookupQuiet(p);
      if (n !== undefined && n.kind === 'directory') return n;
      if (p === '/') return null;
      p = p.slice(0, p.lastIndexOf('/')) || '/';
    }
  }

  /** Makes `dir`'s contents equal to `tree`, touching only what differs (iterative, whatever the depth). */
  private applyTree(top: DirNode, topTree: string): void {
    const stack: { dir: DirNode; tree: string }[] = [{ dir: top, tree: topTree }];
    while (stack.length > 0) {
      const { dir, tree } = stack.pop()!;
      if (dir.treeId === tree) continue;
      const entries = this.trees.get(tree) ?? [];
      const want = new Map(entries.map((e) => [e.name, e]));
      for (const [name, child] of [...dir.children]) {
        const e = want.get(name);
        if (e === undefined || kindOf(e) !== child.kind) this.vfs.revertRemove(child);
      }
      const below: { dir: DirNode; tree: string }[] = [];
      for (const e of entries) {
        const cur = dir.children.get(e.name);
        if (cur === undefined) {
          this.materialize(dir, e);
          continue;
        }
        if (cur.mode !== e.mode || cur.uid !== e.uid || cur.gid !== e.gid) {
          cur.mode = e.mode;
          cur.uid = e.uid;
          cur.gid = e.gid;
          this.vfs.revertTouch(cur, false);
        }
        if (cur.kind === 'file' && cur.blob !== e.ref) this.vfs.revertContent(cur, e.ref, e.size);
        else if (cur.kind === 'symlink' && cur.target !== e.ref) {
          cur.target = e.ref;
          this.vfs.revertTouch(cur, true);
        } else if (cur.kind === 'directory') below.push({ dir: cur, tree: e.ref });
      }
      markDirty(dir);
      for (let k = below.length - 1; k >= 0; k--) stack.push(below[k]!);
    }
  }

  private materialize(parent: DirNode, top: TreeEntry): void {
    const stack: { parent: DirNode; e: TreeEntry }[] = [{ parent, e: top }];
    while (stack.length > 0) {
      const { parent: into, e } = stack.pop()!;
      const node = this.vfs.revertCreate(into, e, e.kind === 'd' ? this.treeHeight(e.ref) : 0);
      if (node.kind !== 'directory') continue;
      const children = this.trees.get(e.ref) ?? [];
      for (let k = children.length - 1; k >= 0; k--) stack.push({ parent: node, e: children[k]! });
    }
  }

  // ---------- snapshot views (.history) ----------

  private snapshotEntry(cred: Cred, scope: Scope, rev: string, path: string): { entry: TreeEntry; commit: CommitObject; rel: string } {
    const id = this.find(scope, rev, 'history');
    const commit = this.commits.get(id)!;
    const rel = '/' + components(path.startsWith('/') ? path : '/' + path).join('/');
    const entry = this.entryAt(commit.tree, rel);
    if (entry === undefined) throw new VfsError('ENOENT', 'history', rel);
    if (!this.visibleIn(cred, commit.tree, rel)) throw new VfsError('EACCES', 'history', rel);
    return { entry, commit, rel };
  }

  snapshotStat(cred: Cred, scope: Scope, rev: string, path: string): { entry: TreeEntry; timestamp: number; rel: string } {
    const { entry, commit, rel } = this.snapshotEntry(cred, scope, rev, path);
    return { entry, timestamp: commit.timestamp, rel };
  }

  snapshotList(cred: Cred, scope: Scope, rev: string, path: string): { entries: TreeEntry[]; timestamp: number; rel: string } {
    const { entry, commit, rel } = this.snapshotEntry(cred, scope, rev, path);
    if (entry.kind !== 'd') throw new VfsError('ENOTDIR', 'history', rel);
    return { entries: this.trees.get(entry.ref) ?? [], timestamp: commit.timestamp, rel };
  }

  snapshotRead(cred: Cred, scope: Scope, rev: string, path: string): { data: Buffer; entry: TreeEntry; rel: string } {
    const { entry, rel } = this.snapshotEntry(cred, scope, rev, path);
    if (entry.kind === 'd') throw new VfsError('EISDIR', 'history', rel);
    if (entry.kind === 'l') throw new VfsError('EINVAL', 'history', rel, 'a symbolic link');
    return { data: this.vfs.blobs.get(entry.ref), entry, rel };
  }

  // ---------- gc ----------

  /**
   * Blob ids any stored tree refers to: every commit's, and also a tree `prepersist` wrote for a
   * commit still to come (or one that lost a race), so no stored tree ever refers to a swept blob.
   */
  reachableBlobs(): Set<string> {
    const blobs = new Set<string>();
    for (const t of this.persisted) for (const e of this.trees.get(t) ?? EMPTY_TREE_ENTRIES) if (e.kind === 'f') blobs.add(e.ref);
    return blobs;
  }

  /**
   * gc: drops the stored trees that no commit reaches (written ahead for a commit that lost a race,
   * see `prepersist`), so that they and the blobs only they hold do not stay forever. Nothing is
   * dropped while trees are being written ahead (they are for a commit still to come), or if a tree
   * of the history is not at hand (then what it reaches is unknown).
   */
  dropOrphanTrees(): number {
    if (this.prepersisting > 0) return 0;
    const seen = new Set<string>();
    const stack = [...this.commits.values()].map((c) => c.tree);
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      const entries = this.trees.get(id);
      if (entries === undefined) return 0;
      for (const e of entries) if (e.kind === 'd') stack.push(e.ref);
    }
    let dropped = 0;
    for (const id of [...this.persisted]) {
      if (seen.has(id)) continue;
      this.persisted.delete(id);
      this.store.objectRemoved(id);
      dropped++;
    }
    return dropped;
  }

  countCommits(): number {
    return this.commits.size;
  }

  /** Trees in the store; the in-memory map also caches trees of uncommitted working-tree states. */
  countTrees(): number {
    return this.persisted.size;
  }

  /**
   * Drops cached trees that no commit holds (status and diff hash the working tree, and those
   * states are garbage once it changes). A directory whose cached id is dropped re-hashes itself.
   */
  pruneTrees(): number {
    let n = 0;
    for (const id of [...this.trees.keys()]) {
      if (id === this.emptyTree || this.persisted.has(id)) continue;
      this.trees.delete(id);
      this.encoded.delete(id);
      this.heights.delete(id);
      this.leaves.delete(id);
      n++;
    }
    return n;
  }

}

/** Time a diff request may spend finding minimal diffs, the least any one file gets, and the most. */
const DIFF_BUDGET_MS = 1000;
const DIFF_MIN_MS = 5;
const DIFF_FILE_MS = 30;
/**
 * The most a diff answers, in bytes (a clear marker and `truncated` say when it was cut): well
 * under a socket frame even with JSON escaping, and more than anyone reads; narrow with a path.
 */
export const DIFF_MAX_BYTES = 4 * 1024 * 1024;
/** The most paths a status lists (about 1 MB of answer); the rest are counted in `more`. */
export const STATUS_MAX = 10000;

function textOf(content: Buffer | string): string {
  return typeof content === 'string' ? content : content.toString('utf8');
}

/** A unified diff that removes every old line and adds every new one (valid, not minimal). */
function wholeReplacement(oldName: string, newName: string, a: string, b: string): string {
  const lines = (s: string): string[] => (s === '' ? [] : (s.endsWith('\n') ? s.slice(0, -1) : s).split('\n'));
  const la = lines(a);
  const lb = lines(b);
  const range = (n: number) => (n === 0 ? '0,0' : `1,${n}`);
  const out = [`--- ${oldName}`, `+++ ${newName}`, `@@ -${range(la.length)} +${range(lb.length)} @@`];
  for (const l of la) out.push('-' + l);
  if (a !== '' && !a.endsWith('\n')) out.push('\\ No newline at end of file');
  for (const l of lb) out.push('+' + l);
  if (b !== '' && !b.endsWith('\n')) out.push('\\ No newline at end of file');
  return out.join('\n') + '\n';
}

/** An entry of a tree by name: tree entries are sorted by compareNames, so a binary search. */
function findEntry(entries: TreeEntry[], name: string): TreeEntry | undefined {
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

function kindOf(e: TreeEntry): Node['kind'] {
  return e.kind === 'd' ? 'directory' : e.kind === 'f' ? 'file' : 'symlink';
}

export { pathOf };
