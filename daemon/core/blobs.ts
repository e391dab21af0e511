/**
 * File contents, stored once per distinct object id and shared by the working tree and history.
 * A blob referenced by no file and no commit is dropped at once; `gc` sweeps anything left.
 */
import { objectId } from './objects.js';

export interface Journal {
  /** The node (its attributes, parent and name) must be written. */
  inode(node: import('./inode.js').Node): void;
  inodeRemoved(id: number): void;
  object(id: string, type: 'blob' | 'tree' | 'commit', payload: Buffer): void;
  objectRemoved(id: string): void;
}

export class BlobStore {
  private readonly data = new Map<string, Buffer>();
  /** working-tree references per blob */
  private readonly refs = new Map<string, number>();
  /** blobs referenced by some committed tree: never dropped eagerly */
  readonly inHistory = new Set<string>();

  /** How many `hold`s are in force, and the blobs whose dropping waits for them to end. */
  private holds = 0;
  private readonly deferred = new Set<string>();

  constructor(private readonly journal: Journal) {}

  /**
   * Keeps every blob there now until the returned function is called (once): a request that reads
   * the working tree's contents across turns of the event loop (a diff) sees them as they were when
   * it began, even if a write meanwhile releases them. Blobs released meanwhile go afterwards.
   */
  hold(): () => void {
    this.holds++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.holds > 0) return;
      for (const id of this.deferred) if (!this.isReferenced(id)) this.drop(id);
      this.deferred.clear();
    };
  }

  private drop(id: string): void {
    this.data.delete(id);
    this.journal.objectRemoved(id);
  }

  /** Adds a reference to `content`, storing it if new; returns its id. */
  put(content: Buffer): string {
    const id = objectId('blob', content);
    this.ref(id, content);
    return id;
  }

  /** Adds a reference to a blob whose id is known (copies, reverts). */
  ref(id: string, content?: Buffer): void {
    if (!this.data.has(id)) {
      if (content === undefined) throw new Error(`blob ${id} is missing`);
      const copy = toShared(content); // callers' buffers may be reused
      this.data.set(id, copy);
      this.journal.object(id, 'blob', copy);
    }
    this.refs.set(id, (this.refs.get(id) ?? 0) + 1);
  }

  release(id: string): void {
    const n = (this.refs.get(id) ?? 0) - 1;
    if (n > 0) {
      this.refs.set(id, n);
      return;
    }
    this.refs.delete(id);
    if (this.inHistory.has(id)) return;
    if (this.holds > 0) this.deferred.add(id);
    else this.drop(id);
  }

  get(id: string): Buffer {
    const b = this.data.get(id);
    if (b === undefined) throw new Error(`blob ${id} is missing`);
    return b;
  }

  has(id: string): boolean {
    return this.data.has(id);
  }

  /** Loading: a stored blob (already verified), with no references yet. */
  load(id: string, content: Buffer): void {
    this.data.set(id, toShared(content));
  }

  /** Loading: count a working-tree reference without journaling. */
  loadRef(id: string): void {
    this.refs.set(id, (this.refs.get(id) ?? 0) + 1);
  }

  /** Following (daemon/warm.ts): drops a working-tree reference without journaling or dropping the blob. */
  unloadRef(id: string): void {
    const n = (this.refs.get(id) ?? 0) - 1;
    if (n > 0) this.refs.set(id, n);
    else this.refs.delete(id);
  }

  /** Following: forgets a blob the store no longer holds (without journaling). */
  unload(id: string): void {
    this.data.delete(id);
  }

  /** Whether a file of the working tree holds this blob. */
  inWorkingTree(id: string): boolean {
    return this.refs.has(id);
  }

  get size(): number {
    return this.data.size;
  }

  ids(): IterableIterator<string> {
    return this.data.keys();
  }

  isReferenced(id: string): boolean {
    return this.refs.has(id) || this.inHistory.has(id);
  }

  /** Drops every blob neither the working tree nor history references. */
  sweep(): number {
    let removed = 0;
    for (const id of [...this.data.keys()]) {
      if (!this.isReferenced(id) && !this.deferred.has(id)) {
        this.drop(id);
        removed++;
      }
    }
    return removed;
  }

  totalBytes(): number {
    let n = 0;
    for (const b of this.data.values()) n += b.length;
    return n;
  }
}

/**
 * Contents live in SharedArrayBuffers so that search workers read them without copying
 * (a hostile regex runs in a worker that can be terminated, never on the daemon's event loop).
 */
export function toShared(content: Buffer): Buffer {
  const b = Buffer.from(new SharedArrayBuffer(content.length));
  content.copy(b);
  return b;
}
