/**
 * A standby's warm state (PostgreSQL store, docs/deploy.md): the in-memory tree, contents and
 * history of the store it follows, built from the store's rows once and kept current by applying
 * each followed change batch to it, so that taking the lease only wires the services around it
 * (daemon/main.ts): a takeover does not grow with the store.
 *
 * It holds what a start would load from the same rows (wireCore): the same nodes with the same
 * attributes, places, heights and link counts, the same blobs and working-tree references, the
 * same trees, commits, refs and blobs held by history; the store's corruption checks are made on
 * every batch for what it changed (a missing parent, two entries of one name, a subtree cut off
 * from `/`, a file without content, a ref to a missing commit). Batches are applied in slices of
 * the event loop (`slicer`): the standby keeps answering pings while a big one goes in. Nothing is
 * journaled meanwhile: the rows come from the store.
 */
import type { DirNode, Node } from './core/inode.js';
import { slicer, Vfs } from './core/vfs.js';
import { VfsError } from './errors.js';
import type { FollowedRows, FollowTarget, PostgresStore } from './store/postgres.js';
import { Vcs } from './vcs/vcs.js';

export class WarmState implements FollowTarget {
  vfs!: Vfs;
  vcs!: Vcs;
  /** A root inode has been loaded (else the store holds no tree yet: a takeover loads it afresh). */
  private rooted = false;
  /** Per blob: how many stored trees list it (`BlobStore.inHistory` holds those above 0). */
  private readonly historyRefs = new Map<string, number>();

  constructor(
    private readonly maxFileSize: number,
    private readonly store: PostgresStore,
  ) {
    this.reset();
  }

  /** Whether no tree was loaded yet (a fresh store). */
  empty(): boolean {
    return !this.rooted;
  }

  private reset(): void {
    this.vfs = new Vfs({ maxFileSize: this.maxFileSize, journal: this.store });
    this.vcs = new Vcs(this.vfs, this.store);
    // The placeholder root of a new Vfs is not the store's: its row replaces it.
    this.vfs.nodes.delete(this.vfs.root.id);
    this.rooted = false;
    this.historyRefs.clear();
  }

  private corrupt(detail: string): VfsError {
    return new VfsError('EIO', 'load store', this.store.where, `the store is corrupt: ${detail}. Refusing to start.`);
  }

  /** Applies rows read in one snapshot (everything when `full`), in slices; throws EIO on a corrupt store. */
  async apply(rows: FollowedRows): Promise<void> {
    if (rows.full) this.reset();
    const pause = slicer();
    const step = async (): Promise<void> => {
      const p = pause();
      if (p !== undefined) await p;
    };
    await this.applyObjects(rows, step);
    const { vfs, vcs } = this;
    const touched = new Set<DirNode>();
    const gone: DirNode[] = [];
    const placed: { node: Node; parent: number | null }[] = [];
    const forget = (node: Node): void => {
      if (node.parent !== null) touched.add(node.parent);
      vfs.unloadNode(node);
      if (node.kind === 'directory') gone.push(node);
    };
    for (const id of rows.removedInodes) {
      const node = vfs.nodes.get(id);
      if (node !== undefined) forget(node);
      await step();
    }
    for (const row of rows.inodes) {
      let node = vfs.nodes.get(row.id);
      if (node !== undefined && node.kind !== row.kind) {
        forget(node); // an id used again for another kind of node
        node = undefined;
      }
      if (node === undefined) placed.push({ node: vfs.loadNode(row), parent: row.parent });
      else {
        vfs.reloadNode(node, row);
        if (node.name !== row.name || (node.parent?.id ?? null) !== row.parent) {
          if (node.parent !== null) touched.add(node.parent);
          vfs.unlinkLoaded(node);
          node.name = row.name;
          placed.push({ node, parent: row.parent });
        }
      }
      if (row.kind === 'file' && !vfs.blobs.has(row.blob ?? ''))
        throw this.corrupt(`file inode ${row.id} ('${row.name}') has no content`);
      await step();
    }
    // Unlinked first, linked after: entries that swap names in one batch never meet.
    for (const { node, parent } of placed) {
      vfs.linkLoaded(node, parent);
      if (parent === null) this.rooted = true;
      else touched.add(node.parent!);
      await step();
    }
    for (const dir of gone)
      for (const c of dir.children.values())
        if (c.parent === dir && vfs.nodes.get(c.id) === c)
          throw this.corrupt(`inode ${c.id} ('${c.name}') lost its directory (inode ${dir.id})`);
    for (const id of rows.removedObjects)
      if (vfs.blobs.inWorkingTree(id)) throw this.corrupt(`a file's content ${id} is gone`);
    // Every directory placed or changed must hang off `/`; their depths order the height updates.
    const depth = new Map<DirNode, number>();
    for (const { node } of placed) {
      const d = node.kind === 'directory' ? node : node.parent;
      if (d !== null) this.depthOf(d, depth);
      await step();
    }
    for (const d of touched) if (vfs.nodes.get(d.id) === d) this.depthOf(d, depth);
    // Exact heights, as a start's `loaded()` sets them: deepest first, each from its entries.
    const dirs = [...depth].sort((a, b) => b[1] - a[1]);
    for (const [d] of dirs) {
      let h = d.children.size === 0 ? 0 : 1;
      if (d.subdirs > 0)
        for (const c of d.children.values()) if (c.kind === 'directory' && c.height >= h) h = c.height + 1;
      d.height = h;
      await step();
    }
    for (const scope of rows.removedRefs) vcs.refs.delete(scope);
    for (const [scope, id] of rows.refs) {
      if (!vcs.commits.has(id)) throw this.corrupt(`ref '${scope}' points to a missing commit`);
      vcs.refs.set(scope, id);
    }
  }

  /** Blobs, trees and commits, before the inodes that refer to them. */
  private async applyObjects(rows: FollowedRows, step: () => Promise<void>): Promise<void> {
    const { vfs, vcs } = this;
    const inHistory = vfs.blobs.inHistory;
    for (const o of rows.objects) {
      if (o.type === 'blob') {
        if (!vfs.blobs.has(o.id)) vfs.blobs.load(o.id, o.data);
      } else if (o.type === 'commit') vcs.loadObject(o.id, 'commit', o.data);
      else if (!vcs.persisted.has(o.id)) {
        vcs.loadObject(o.id, 'tree', o.data);
        for (const e of vcs.trees.get(o.id)!)
          if (e.kind === 'f') this.historyRefs.set(e.ref, (this.historyRefs.get(e.ref) ?? 0) + 1);
      }
      await step();
    }
    for (const id of rows.removedObjects) {
      if (vfs.blobs.has(id)) vfs.blobs.unload(id);
      else if (vcs.persisted.has(id)) {
        for (const e of vcs.trees.get(id) ?? []) {
          if (e.kind !== 'f') continue;
          const n = (this.historyRefs.get(e.ref) ?? 0) - 1;
          if (n > 0) this.historyRefs.set(e.ref, n);
          else {
            this.historyRefs.delete(e.ref);
            inHistory.delete(e.ref);
          }
        }
        vcs.persisted.delete(id);
        if (id !== vcs.emptyTree) vcs.trees.delete(id); // a Vcs always knows the empty tree
      } else vcs.commits.delete(id);
      await step();
    }
  }

  /** A directory's depth below `/` (memoised in `known`); throws EIO if it does not hang off `/`. */
  private depthOf(dir: DirNode, known: Map<DirNode, number>): void {
    const chain: DirNode[] = [];
    let d: DirNode | null = dir;
    let base = 0;
    for (;;) {
      if (d === null) throw this.corrupt(`directory inode ${dir.id} ('${dir.name}') is not reachable from /`);
      const k = known.get(d);
      if (k !== undefined) {
        base = k;
        break;
      }
      if (d === this.vfs.root) {
        known.set(d, 0);
        break;
      }
      chain.push(d);
      if (chain.length > this.vfs.nodes.size)
        throw this.corrupt(`directory inode ${dir.id} ('${dir.name}') is in a cycle`);
      d = d.parent;
    }
    for (let i = chain.length - 1; i >= 0; i--) known.set(chain[i]!, ++base);
  }
}
