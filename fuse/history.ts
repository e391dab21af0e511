/**
 * `<mount>/.history/<commit>/...`: every commit's tree, read-only, through vcs.log / vcs.ls / vcs.stat /
 * vcs.cat. A commit never changes, so what was looked up under a full hash is cached (bounded).
 */
import { VfsError } from '../daemon/errors.js';
import type { Listing, Stat } from '../daemon/rpc/protocol.js';
import type { Caller } from '../daemon/rpc/client.js';
import { entryToFuseStat, syntheticDir, toFuseStat, type Owners } from './attrs.js';
import type { FuseStat } from './fuse-types.js';

export const HISTORY_DIR = '/.history';

export function isHistoryPath(path: string): boolean {
  return path === HISTORY_DIR || path.startsWith(`${HISTORY_DIR}/`);
}

/** `/.history/<rev>/a/b` → `{rev, path: '/a/b'}`; `/.history` → `{rev: null}`. */
export function splitHistoryPath(path: string): { rev: string | null; path: string } {
  const rest = path.slice(HISTORY_DIR.length + 1);
  if (rest === '') return { rev: null, path: '/' };
  const slash = rest.indexOf('/');
  return slash < 0 ? { rev: rest, path: '/' } : { rev: rest.slice(0, slash), path: rest.slice(slash) };
}

const MAX_CACHED = 20000;

export class HistoryView {
  private readonly stats = new Map<string, Stat | VfsError>();
  private readonly listings = new Map<string, Listing>();
  private readonly mountedAt = Date.now();

  constructor(
    private readonly rpc: Caller,
    private readonly owners: Owners,
  ) {}

  async getattr(path: string): Promise<FuseStat> {
    const { rev, path: sub } = splitHistoryPath(path);
    if (rev === null) return syntheticDir(this.owners, this.mountedAt);
    return toFuseStat(await this.stat(rev, sub), this.owners, true);
  }

  async readdir(path: string): Promise<{ names: string[]; stats: FuseStat[] }> {
    const { rev, path: sub } = splitHistoryPath(path);
    const dot = syntheticDir(this.owners, this.mountedAt);
    if (rev === null) {
      const { commits } = await this.rpc.call('vcs.log', {});
      const names = ['.', '..', ...commits.map((c) => c.hash)];
      return { names, stats: names.map(() => dot) };
    }
    const listing = await this.list(rev, sub);
    const names = ['.', '..'];
    const stats = [dot, dot];
    for (const e of listing.entries) {
      names.push(e.name);
      stats.push(entryToFuseStat(e, this.owners, true));
    }
    return { names, stats };
  }

  async read(path: string): Promise<Buffer> {
    const { rev, path: sub } = splitHistoryPath(path);
    if (rev === null) throw new VfsError('EISDIR', 'open', path);
    const { data } = await this.rpc.request('vcs.cat', { rev, path: sub });
    return data;
  }

  async readlink(path: string): Promise<string> {
    const { rev, path: sub } = splitHistoryPath(path);
    if (rev === null) throw new VfsError('EINVAL', 'readlink', path);
    const s = await this.stat(rev, sub);
    if (s.kind !== 'symlink' || s.target === undefined) throw new VfsError('EINVAL', 'readlink', path);
    return s.target;
  }

  /** access(2) in history: anything that exists may be read or searched; nothing may be written. */
  async access(path: string, mode: number): Promise<void> {
    if (mode & 2) throw new VfsError('EROFS', 'access', path);
    await this.getattr(path);
  }

  private async stat(rev: string, path: string): Promise<Stat> {
    const key = `${rev}:${path}`;
    const hit = this.stats.get(key);
    if (hit instanceof VfsError) throw hit;
    if (hit) return hit;
    try {
      const s = await this.rpc.call('vcs.stat', { rev, path });
      if (isFullHash(rev)) remember(this.stats, key, s);
      return s;
    } catch (err) {
      const e =
        err instanceof VfsError && (err.code === 'EINVAL' || err.code === 'EPROTO')
          ? new VfsError('ENOENT', 'stat', path)
          : err;
      // Missing paths are remembered too: editors and git probe many names that do not exist.
      if (isFullHash(rev) && e instanceof VfsError && e.code === 'ENOENT') remember(this.stats, key, e);
      throw e;
    }
  }

  private async list(rev: string, path: string): Promise<Listing> {
    const key = `${rev}:${path}`;
    const hit = this.listings.get(key);
    if (hit) return hit;
    const l = await this.rpc.call('vcs.ls', { rev, path });
    if (isFullHash(rev)) remember(this.listings, key, l);
    return l;
  }
}

function isFullHash(rev: string): boolean {
  return /^[0-9a-f]{12,}$/.test(rev);
}

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  if (map.size >= MAX_CACHED) map.clear();
  map.set(key, value);
}
