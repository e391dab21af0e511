/** Garbage collection of history objects: which blobs history holds, and trees no commit reaches. */
import { EMPTY_TREE_ENTRIES, type Trees } from './trees.js';

/**
 * Blob ids any stored tree refers to: every commit's, and also a tree `prepersist` wrote for a
 * commit still to come (or one that lost a race), so no stored tree ever refers to a swept blob.
 */
export function reachableBlobs(v: Trees): Set<string> {
  const blobs = new Set<string>();
  for (const t of v.persisted)
    for (const e of v.trees.get(t) ?? EMPTY_TREE_ENTRIES) if (e.kind === 'f') blobs.add(e.ref);
  return blobs;
}

/**
 * gc: drops the stored trees that no commit reaches (written ahead for a commit that lost a race,
 * see `prepersist`), so that they and the blobs only they hold do not stay forever. Nothing is
 * dropped while trees are being written ahead (they are for a commit still to come), or if a tree
 * of the history is not at hand (then what it reaches is unknown).
 */
export function dropOrphanTrees(v: Trees): number {
  if (v.prepersisting > 0) return 0;
  const seen = new Set<string>();
  const stack = [...v.commits.values()].map((c) => c.tree);
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (seen.has(id)) continue;
    seen.add(id);
    const entries = v.trees.get(id);
    if (entries === undefined) return 0;
    for (const e of entries) if (e.kind === 'd') stack.push(e.ref);
  }
  let dropped = 0;
  for (const id of [...v.persisted]) {
    if (seen.has(id)) continue;
    v.persisted.delete(id);
    v.store.objectRemoved(id);
    dropped++;
  }
  return dropped;
}

export function countCommits(v: Trees): number {
  return v.commits.size;
}

/** Trees in the store; the in-memory map also caches trees of uncommitted working-tree states. */
export function countTrees(v: Trees): number {
  return v.persisted.size;
}

/**
 * Drops cached trees that no commit holds (status and diff hash the working tree, and those
 * states are garbage once it changes). A directory whose cached id is dropped re-hashes itself.
 * Nothing is dropped while a walk that yields the event loop reads them (`Trees.reading`).
 */
export function pruneTrees(v: Trees): number {
  if (v.reading > 0) return 0; // a status, diff or commit is walking them across turns
  let n = 0;
  for (const id of [...v.trees.keys()]) {
    if (id === v.emptyTree || v.persisted.has(id)) continue;
    v.trees.delete(id);
    v.encoded.delete(id);
    v.heights.delete(id);
    v.leaves.delete(id);
    n++;
  }
  return n;
}
