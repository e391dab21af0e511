/**
 * Attributes and directory listings the daemon gave this mount's principal, by path. `ls -l`,
 * `grep -r` and `find` list a directory and then look up every entry: the listing already carries what
 * those lookups need, so they are answered here instead of costing one daemon round trip each.
 *
 * Entries stay valid until the daemon reports a change that concerns them (see ChangeLog: the path, an
 * ancestor, for directories an entry; or a change of identities), and are dropped when the mount itself
 * changes a path. Permission decisions are never cached: only what the daemon already showed this
 * principal, and only until something that could change its answer happens.
 */
import type { ChangeLog } from './change-log.js';
import { S_IFDIR, S_IFMT, type FuseStat } from './fuse-types.js';
import { parentOf } from './paths.js';

interface Entry<T> {
  value: T;
  since: number;
}

export class AttrCache {
  private readonly entries = new Map<string, Entry<FuseStat>>();

  constructor(
    private readonly log: ChangeLog,
    private readonly maxEntries = 200000,
  ) {}

  get(path: string): FuseStat | undefined {
    const e = this.entries.get(path);
    if (!e) return undefined;
    const dir = (e.value.mode & S_IFMT) === S_IFDIR;
    if (!(dir ? this.log.dirUnchanged(path, e.since) : this.log.unchanged(path, e.since))) {
      this.entries.delete(path);
      return undefined;
    }
    return { ...e.value };
  }

  /** `since`: ChangeLog.now() taken before the request that answered `stat` was sent. */
  set(path: string, stat: FuseStat, since: number): void {
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(path, { value: stat, since });
  }

  /** Forgets a path and its parent directory (whose mtime and size change with it). */
  invalidate(path: string): void {
    this.entries.delete(path);
    this.entries.delete(parentOf(path));
  }

  clear(): void {
    this.entries.clear();
  }
}

/** A directory listing as readdir answers it. */
export interface Listing {
  names: string[];
  stats: FuseStat[];
}

/**
 * A cached listing; `names`: each name's position, built on first use; `shared`: the listing was handed
 * out (get), so it is copied before the mount's next create changes it.
 */
type ListingEntry = Entry<Listing> & { names?: Map<string, number>; shared?: boolean };

export class ListingCache {
  private readonly entries = new Map<string, ListingEntry>();

  constructor(
    private readonly log: ChangeLog,
    private readonly maxEntries = 20000,
  ) {}

  get(path: string): Listing | undefined {
    const e = this.valid(path);
    if (!e) return undefined;
    e.shared = true;
    return e.value;
  }

  /** Whether a valid cached listing of `dir` names `name`; undefined when there is none. */
  has(dir: string, name: string): boolean | undefined {
    const e = this.valid(dir);
    return e ? this.index(e).has(name) : undefined;
  }

  set(path: string, listing: Listing, since: number): void {
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(path, { value: listing, since, shared: true });
  }

  /**
   * The mount created `name` in `dir`: a cached listing of `dir` gains it (and stays valid). A listing
   * already handed to the binding is never changed under it (readdir may still be sending it): it is
   * copied once, and the copy then grows in place, so a create costs O(1), not O(entries).
   */
  add(dir: string, name: string, stat: FuseStat): void {
    const e = this.entries.get(dir);
    if (!e) return;
    this.own(e);
    const names = this.index(e);
    const i = names.get(name);
    if (i !== undefined) e.value.stats[i] = stat;
    else {
      names.set(name, e.value.names.length);
      e.value.names.push(name);
      e.value.stats.push(stat);
    }
  }

  /**
   * The mount moved a file from `srcDir` to `dstDir` (the same directory or not): the listings follow,
   * the destination's with the moved file's attributes as the daemon answered them.
   */
  moved(srcDir: string, srcName: string, dstDir: string, dstName: string, stat: FuseStat): void {
    this.removed(srcDir, srcName);
    if (this.valid(dstDir)) this.add(dstDir, dstName, stat);
  }

  /**
   * The mount removed `name` from `dir`: a cached listing of `dir` loses it (and stays valid). The last
   * entry takes its place, so that `rm -rf` of a large directory costs O(1) per file (readdir order is
   * no promise; a listing being sent is never changed, see add).
   */
  removed(dir: string, name: string): void {
    const e = this.valid(dir);
    const names = e ? this.index(e) : undefined;
    const i = names?.get(name);
    if (!e || !names || i === undefined) return;
    this.own(e);
    const last = e.value.names.length - 1;
    names.delete(name);
    if (i !== last) {
      const moved = e.value.names[last]!;
      e.value.names[i] = moved;
      e.value.stats[i] = e.value.stats[last]!;
      names.set(moved, i);
    }
    e.value.names.pop();
    e.value.stats.pop();
  }

  /** Forgets the listing of `path` and of its parent (the mount changed that entry). */
  invalidate(path: string): void {
    this.entries.delete(path);
    this.entries.delete(parentOf(path));
  }

  /** A listing about to change: copied first if it was handed out. */
  private own(e: ListingEntry): void {
    if (!e.shared) return;
    e.value = { names: [...e.value.names], stats: [...e.value.stats] };
    e.shared = false;
  }

  private valid(path: string): ListingEntry | undefined {
    const e = this.entries.get(path);
    if (!e) return undefined;
    if (!this.log.dirUnchanged(path, e.since)) {
      this.entries.delete(path);
      return undefined;
    }
    return e;
  }

  private index(e: ListingEntry): Map<string, number> {
    if (!e.names) {
      e.names = new Map();
      e.value.names.forEach((n, i) => e.names!.set(n, i));
    }
    return e.names;
  }
}
