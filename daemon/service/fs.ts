/** The filesystem operations (paths arrive resolved; the runner shows the results' paths). */
import { VfsError } from '../errors.js';
import { slicer, type Vfs } from '../core/vfs.js';
import { formatMode, LIST_PAGE_MAX, parseMode, READ_CHUNK, type DirEntry, type Listing } from '../rpc/protocol.js';
import { decodeCursor, encodeCursor, toEntry, toStat } from './present.js';
import type { AreaOps, Kit } from './context.js';

/** `field` (atime or mtime) of an operation on `path`: nanoseconds as a decimal string, or milliseconds. */
function parseTime(t: string | number | undefined, op: string, path: string, field: string): bigint | undefined {
  if (t === undefined) return undefined;
  const bad = (): never => {
    throw new VfsError('EINVAL', op, path, `invalid ${field} (nanoseconds as a decimal string, or milliseconds)`);
  };
  if (typeof t === 'number') return Number.isFinite(t) ? BigInt(Math.round(t * 1_000_000)) : bad();
  return /^-?\d{1,22}$/.test(t) ? BigInt(t) : bad();
}

function mode(m: number | string | undefined, op: string): number | undefined {
  if (m === undefined) return undefined;
  const v = parseMode(m);
  if (v === null) throw new VfsError('EINVAL', op, undefined, `invalid mode '${String(m)}' (octal, e.g. 0644)`);
  return v;
}

export const fsOps = (k: Kit): AreaOps<'fs'> => ({
  'fs.resolve': (p) => ({ path: p.path }),
  'fs.stat': (p, { cred }) => ({ ...toStat(k.d.vfs.stat(cred, p.path, p.nofollow === true), cred), path: p.path }),
  'fs.list': async (p, { cred }) => {
    const after = p.cursor === undefined ? undefined : decodeCursor(p.cursor);
    const limit = p.limit ?? LIST_PAGE_MAX;
    const { entries, more } = await k.d.vfs.listPage(cred, p.path, after, limit);
    // The names as the page was cut; the entries are then built in slices (a page of 10,000 costs
    // tens of ms on a loaded machine), each node as it is when its entry is built (readdir(3) allows
    // it). One that left the directory meanwhile is left out: it may now be somewhere the caller cannot look.
    const names = entries.map((n) => n.name);
    const dir = entries[0]?.parent;
    const built: DirEntry[] = [];
    const pause = slicer();
    for (let i = 0; i < entries.length; i++) {
      if (entries[i]!.parent === dir) built.push(toEntry(entries[i]!, cred, names[i]!));
      if ((i & 511) === 511) {
        const w = pause();
        if (w !== undefined) await w;
      }
    }
    const out: Listing = { path: p.path, entries: built };
    const last = names[names.length - 1];
    if (more && last !== undefined) {
      out.truncated = true;
      out.next_cursor = encodeCursor(last);
    }
    return out;
  },
  'fs.read': (p, { ctx, cred }) => {
    const { node, data } = k.d.vfs.read(cred, p.path);
    const base = { path: p.path, etag: node.blob, size: node.size };
    if (p.if_none_match !== undefined && (p.if_none_match === node.blob || p.if_none_match === '*'))
      return { ...base, not_modified: true };
    if (p.if_match !== undefined && p.if_match !== node.blob)
      throw new VfsError('EPRECOND', 'read', p.path, 'the file changed while it was being read in parts');
    // Bounded parts: no answer carries more than READ_CHUNK bytes, whatever SERVICE_MAX_FILE_SIZE allows.
    const off = Math.min(p.offset ?? 0, data.length);
    const len = Math.min(p.length ?? READ_CHUNK, READ_CHUNK);
    ctx.out = off === 0 && data.length <= len ? data : data.subarray(off, off + len);
    return base;
  },
  'fs.write': (p, { ctx, cred }) => {
    const opts: Parameters<Vfs['write']>[3] = { parents: p.parents !== false };
    const m = mode(p.mode, 'write');
    if (m !== undefined) opts.mode = m;
    if (p.if_match !== undefined) opts.ifMatch = p.if_match;
    if (p.if_none_match !== undefined) opts.ifNoneMatch = p.if_none_match;
    if (p.exclusive !== undefined) opts.exclusive = p.exclusive;
    if (p.append !== undefined) opts.append = p.append;
    if (p.atime !== undefined || p.mtime !== undefined) {
      const atime = parseTime(p.atime, 'write', p.path, 'atime');
      const mtime = parseTime(p.mtime, 'write', p.path, 'mtime');
      if (p.exclusive !== true || atime === undefined || mtime === undefined)
        throw new VfsError('EINVAL', 'write', p.path, 'atime and mtime are given together, with exclusive only');
      opts.times = { atime, mtime };
    }
    if (p.grant !== undefined || p.want_grant === true) {
      opts.holder = k.grantHolder(ctx, cred, 'write');
      if (p.grant !== undefined) opts.grant = p.grant;
      if (p.want_grant === true) opts.wantGrant = true;
    }
    const r = k.d.vfs.write(cred, p.path, ctx.data ?? Buffer.alloc(0), opts);
    // The stat is taken now: later requests may change the node while this one waits for durability.
    return {
      path: r.path,
      size: r.node.size,
      etag: r.node.blob,
      created: r.created,
      ...(p.stat === true ? { stat: toStat(r.node, cred), readable: k.d.vfs.mayRead(cred, r.node) } : {}),
      ...(r.grant !== undefined ? { grant: r.grant } : {}),
    };
  },
  'fs.truncate': (p, { ctx, cred }) => {
    const n = k.d.vfs.truncate(
      cred,
      p.path,
      p.size,
      p.grant === undefined ? undefined : { id: p.grant, holder: k.grantHolder(ctx, cred, 'truncate') },
    );
    return { path: p.path, size: n.size };
  },
  'fs.grantWrite': (p, { ctx, cred }) => ({
    path: p.path,
    grant: k.d.vfs.openForWrite(cred, p.path, p.mode, k.grantHolder(ctx, cred, 'open')).grant,
  }),
  'fs.releaseGrant': (p, { ctx }) => {
    const conn = ctx.conn;
    return {
      released: conn === undefined ? 0 : p.grants.filter((g) => k.d.vfs.grants.release(g, conn.id)).length,
    };
  },
  'fs.mkdir': (p, { cred }) => {
    const opts: { parents?: boolean; mode?: number } = { parents: p.parents === true };
    const m = mode(p.mode, 'mkdir');
    if (m !== undefined) opts.mode = m;
    const r = k.d.vfs.mkdir(cred, p.path, opts);
    return { path: p.path, created: r.created, ...(p.stat === true ? { stat: toStat(r.node, cred) } : {}) };
  },
  'fs.unlink': (p, { cred }) => {
    k.d.vfs.unlink(cred, p.path);
    return { path: p.path };
  },
  'fs.rmdir': (p, { cred }) => {
    k.d.vfs.rmdir(cred, p.path);
    return { path: p.path };
  },
  'fs.delete': async (p, { cred }) => ({
    path: p.path,
    deleted: await k.d.vfs.removeSliced(cred, p.path, p.recursive === true),
  }),
  'fs.copy': (p, { cred }) => {
    const dst = k.intoDir(cred, p.src, p.dst, p.into_dir === true, 'copy');
    const opts: { recursive?: boolean; overwrite?: boolean } = { recursive: p.recursive === true };
    if (p.overwrite !== undefined) opts.overwrite = p.overwrite;
    const n = k.d.vfs.copy(cred, p.src, dst, opts);
    return { src: p.src, dst, copied: n };
  },
  'fs.move': (p, { cred }) => {
    const r = k.d.vfs.move(
      cred,
      p.src,
      k.intoDir(cred, p.src, p.dst, p.into_dir === true, 'rename'),
      p.overwrite === undefined ? {} : { overwrite: p.overwrite },
    );
    return {
      src: r.from,
      dst: r.to,
      ...(p.stat === true ? { stat: toStat(k.d.vfs.stat(cred, r.to, true), cred) } : {}),
    };
  },
  'fs.symlink': (p, { cred }) => {
    k.d.vfs.symlink(cred, p.target, p.path);
    return { path: p.path, target: p.target };
  },
  'fs.readlink': (p, { cred }) => ({ path: p.path, target: k.d.vfs.readlink(cred, p.path) }),
  'fs.chmod': (p, { cred }) => {
    const n = k.d.vfs.chmod(cred, p.path, mode(p.mode, 'chmod')!);
    return { path: p.path, mode: formatMode(n.mode), ...(p.stat === true ? { stat: toStat(n, cred) } : {}) };
  },
  'fs.chown': (p, { cred }) => {
    const uid = p.owner === undefined || p.owner === '' ? undefined : k.d.registry.uidOf(p.owner);
    const gid = p.group === undefined || p.group === '' ? undefined : k.d.registry.gidOf(p.group);
    const n = k.d.vfs.chown(cred, p.path, uid, gid, p.nofollow === true);
    return { path: p.path, uid: n.uid, gid: n.gid, ...(p.stat === true ? { stat: toStat(n, cred) } : {}) };
  },
  'fs.utimens': (p, { cred }) => {
    const n = k.d.vfs.utimens(
      cred,
      p.path,
      parseTime(p.atime, 'utime', p.path, 'atime'),
      parseTime(p.mtime, 'utime', p.path, 'mtime'),
      p.nofollow === true,
    );
    return { path: p.path, ...(p.stat === true ? { stat: toStat(n, cred) } : {}) };
  },
  'fs.access': (p, { cred }) => {
    k.d.vfs.access(cred, p.path, p.mode);
    return { path: p.path };
  },
  'fs.statfs': () => {
    const bsize = 4096;
    const blocks = 1 << 30;
    const used = Math.ceil(k.d.vfs.blobs.totalBytes() / bsize);
    const files = 1 << 30;
    return {
      bsize,
      blocks,
      bfree: blocks - used,
      bavail: blocks - used,
      files,
      ffree: files - k.d.vfs.nodes.size,
      namemax: 255,
    };
  },
});
