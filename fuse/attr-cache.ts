/**
 * Recently seen attributes by path, for at most the kernel's own attribute timeout (1 s). `ls -l`,
 * `grep -r` and `find` list a directory and then look up every entry: the listing already carries
 * what those lookups need, so they are answered here instead of costing one daemon round trip each.
 *
 * Entries are dropped when the mount changes a path, and when the daemon reports a change (its
 * `sys.subscribe` events), so changes made through REST or MCP are not hidden longer than the kernel's
 * own caches would hide them. Permission decisions are never cached: only attributes are.
 */
import type { FuseStat } from './fuse-native.js';

export const ATTR_TTL_MS = 1000;

export class AttrCache {
  private readonly entries = new Map<string, { stat: FuseStat; until: number }>();

  constructor(private readonly maxEntries = 100000) {}

  get(path: string): FuseStat | undefined {
    const e = this.entries.get(path);
    if (!e) return undefined;
    if (e.until < Date.now()) {
      this.entries.delete(path);
      return undefined;
    }
    return { ...e.stat };
  }

  set(path: string, stat: FuseStat, ttlMs = ATTR_TTL_MS): void {
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(path, { stat, until: Date.now() + ttlMs });
  }

  /** Forgets a path and its parent directory (whose mtime and size change with it). */
  invalidate(path: string): void {
    this.entries.delete(path);
    this.entries.delete(parentOf(path));
  }

  /** Forgets a path, its parent and everything below it (renames and removals of directories). */
  invalidateTree(path: string): void {
    this.invalidate(path);
    const prefix = path === '/' ? '/' : `${path}/`;
    for (const p of this.entries.keys()) if (p.startsWith(prefix)) this.entries.delete(p);
  }

  clear(): void {
    this.entries.clear();
  }
}

export function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

export function childPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}
