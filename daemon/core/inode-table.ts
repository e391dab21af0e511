import type { Node } from './inode.js';

/**
 * Every inode by id, in 256 Maps chosen by the id's low bits. One Map of a million entries
 * rehashes all of them when it grows past a power of two or shrinks below a quarter of its
 * capacity: a recursive delete of a million inodes held the event loop 100-600 ms at each shrink
 * (profiled on a loaded machine), and creating the 1,048,577th inode as long. A shard holds 1/256
 * of the entries, so one rehash is 256 times shorter; ids spread evenly, so a bulk delete shrinks
 * all shards within a few hundred deletes, and `removeSliced` checks its time slice between them.
 */
export class InodeTable {
  private readonly shards: Map<number, Node>[] = Array.from({ length: INODE_SHARDS }, () => new Map<number, Node>());
  private count = 0;

  get size(): number {
    return this.count;
  }
  get(id: number): Node | undefined {
    return this.shards[id % INODE_SHARDS]!.get(id);
  }
  set(id: number, node: Node): this {
    const shard = this.shards[id % INODE_SHARDS]!;
    const before = shard.size;
    shard.set(id, node);
    this.count += shard.size - before;
    return this;
  }
  delete(id: number): boolean {
    const gone = this.shards[id % INODE_SHARDS]!.delete(id);
    if (gone) this.count--;
    return gone;
  }
  *values(): IterableIterator<Node> {
    for (const shard of this.shards) yield* shard.values();
  }
}
const INODE_SHARDS = 256;
