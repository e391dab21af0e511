/**
 * What the daemon reported changed, and when, so the mount's caches (attributes, listings, content)
 * can be trusted until a change that concerns them arrives, instead of for a fixed time.
 *
 * Time is a counter of change events. A cache entry records `now()` taken when its request was sent;
 * it is valid while no change was reported since then for its path or any ancestor directory (a chmod,
 * chown, rename or removal of a directory changes what the principal may reach below it), and for a
 * directory's listing or attributes also none for an entry in it. `forgetAll` (identities, groups or
 * tokens changed, the connection to the daemon dropped, or too many paths are remembered) invalidates
 * everything recorded before it. Because the counter is taken when a request is sent, a change reported
 * while the request is in flight invalidates its answer, in whatever order the two arrive.
 */
import { isHistoryPath, splitHistoryPath } from './history.js';
import { parentOf } from './paths.js';

export class ChangeLog {
  private gen = 1;
  private floor = 1;
  /** Last change of each path (it concerns that path and everything below it). */
  private readonly changedAt = new Map<string, number>();
  /** Last change of an entry of each directory (its listing, size and mtime). */
  private readonly entriesAt = new Map<string, number>();

  constructor(private readonly maxPaths = 200000) {}

  /** The current point in the change history: take it before sending the request whose answer is cached. */
  now(): number {
    return this.gen;
  }

  /** `paths` changed (absolute mount paths); an empty list means that anything may have changed. */
  changed(paths: readonly string[]): void {
    if (paths.length === 0 || this.changedAt.size + paths.length > this.maxPaths) {
      this.forgetAll();
      return;
    }
    this.gen++;
    for (const p of paths) {
      this.changedAt.set(p, this.gen);
      this.entriesAt.set(parentOf(p), this.gen);
    }
  }

  forgetAll(): void {
    this.gen++;
    this.floor = this.gen;
    this.changedAt.clear();
    this.entriesAt.clear();
  }

  /**
   * Nothing reported since `since` for `path` or any of its ancestors; for a `.history` path, for its
   * live path either (a commit never changes, but who may read it follows the live file's mode).
   */
  unchanged(path: string, since: number): boolean {
    if (since < this.floor) return false;
    if (isHistoryPath(path)) {
      const { rev, path: live } = splitHistoryPath(path);
      if (rev !== null && !this.unchangedAt(live, since)) return false;
    }
    return this.unchangedAt(path, since);
  }

  private unchangedAt(path: string, since: number): boolean {
    for (let p = path; ; p = parentOf(p)) {
      const g = this.changedAt.get(p);
      if (g !== undefined && g > since) return false;
      if (p === '/') return true;
    }
  }

  /** As `unchanged`, and no entry of the directory `path` changed either. */
  dirUnchanged(path: string, since: number): boolean {
    const g = this.entriesAt.get(path);
    return (g === undefined || g <= since) && this.unchanged(path, since);
  }
}

/**
 * Daemon event paths as mount paths. A workspace mount sees its workspace root as `/`: paths inside it
 * are mapped, a change of the root or an ancestor of it concerns the whole mount, and paths elsewhere
 * cannot concern it (the daemon confines the workspace). Returns null for "the whole mount".
 */
export function mountPaths(paths: readonly string[], jail: string | undefined): string[] | null {
  if (paths.length === 0) return null;
  if (jail === undefined || jail === '/') return [...paths];
  const out: string[] = [];
  for (const p of paths) {
    if (p === jail || jail.startsWith(p === '/' ? '/' : `${p}/`)) return null;
    if (p.startsWith(`${jail}/`)) out.push(p.slice(jail.length));
  }
  return out;
}
