/**
 * Core operations in-process: the daemon's VFS (openCore on a temp data dir on tmpfs, every
 * mutation flushed to SQLite before the phase ends) vs node:fs synchronous calls on tmpfs. No socket
 * and no permission shortcut: the VFS runs its checks for root like for anyone.
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BenchTable } from './types.js';
import { compareRow, errorRow, log, median, nowMs, shmDir } from './util.js';
import { configFromEnv, openCore } from '../daemon/main.js';

const PHASES = ['create', 'read', 'stat', 'readdir', 'rename', 'delete'] as const;
type Phase = (typeof PHASES)[number];
type Times = Record<Phase, number> & { flush: Record<Phase, number> }; // microseconds per operation

/** What the store writes per operation (group commit: one transaction per batch). */
const PERSISTED: Record<Phase, string> = {
  create: 'an inode row and a content object per file',
  read: 'nothing',
  stat: 'nothing',
  readdir: 'nothing',
  rename: 'an inode row per file',
  delete: 'an inode row and a content object deleted per file',
};

const PER_DIR = 1000;
const READDIR_ROUNDS = 20;

/** The operations of one repetition, on one side. */
interface Side {
  mkdir(p: string): void;
  write(p: string, data: Buffer): void;
  read(p: string): number;
  stat(p: string): number;
  readdir(p: string): number;
  rename(a: string, b: string): void;
  unlink(p: string): void;
  /** Makes the phase's changes durable as far as this side goes (the VFS: written to SQLite). */
  settle(): Promise<void>;
}

async function repetition(side: Side, root: string, count: number): Promise<Times> {
  const dirs = Math.ceil(count / PER_DIR);
  const file = (i: number, suffix = '') => `${root}/d${Math.floor(i / PER_DIR)}/f${i}${suffix}.md`;
  const body = Buffer.alloc(1024, 'markdown body line\n');
  for (let k = 0; k < dirs; k++) side.mkdir(`${root}/d${k}`);
  await side.settle();
  const t = { flush: {} } as Times;
  const phase = async (name: Phase, ops: number, fn: () => void): Promise<void> => {
    const t0 = nowMs();
    fn();
    const t1 = nowMs();
    await side.settle();
    const t2 = nowMs();
    t[name] = ((t2 - t0) * 1000) / ops;
    t.flush[name] = ((t2 - t1) * 1000) / ops;
  };
  let sink = 0;
  await phase('create', count, () => {
    for (let i = 0; i < count; i++) {
      body.writeUInt32LE(i, 0); // distinct contents, no dedup
      side.write(file(i), body);
    }
  });
  await phase('read', count, () => {
    for (let i = 0; i < count; i++) sink += side.read(file(i));
  });
  await phase('stat', count, () => {
    for (let i = 0; i < count; i++) sink += side.stat(file(i));
  });
  await phase('readdir', dirs * READDIR_ROUNDS, () => {
    for (let r = 0; r < READDIR_ROUNDS; r++) for (let k = 0; k < dirs; k++) sink += side.readdir(`${root}/d${k}`);
  });
  await phase('rename', count, () => {
    for (let i = 0; i < count; i++) side.rename(file(i), file(i, '-renamed'));
  });
  await phase('delete', count, () => {
    for (let i = 0; i < count; i++) side.unlink(file(i, '-renamed'));
  });
  if (sink < 0) throw new Error('unreachable');
  return t;
}

export async function benchCore(opts: { quick: boolean }): Promise<BenchTable> {
  const count = opts.quick ? 2000 : 10000;
  const title = 'Core operations in-process vs node:fs on tmpfs';
  try {
    const dataDir = path.join(shmDir('mdvfs-bench-core-'), 'data');
    mkdirSync(dataDir, { recursive: true });
    const core = openCore({ ...configFromEnv({ ...process.env, SERVICE_DATA_DIR: dataDir }), fsync: 'full' });
    const cred = core.service.authenticate({});
    const ours: Side = {
      mkdir: (p) => void core.vfs.mkdir(cred, p, { parents: true }),
      write: (p, data) => void core.vfs.write(cred, p, data),
      read: (p) => core.vfs.read(cred, p).data.length,
      stat: (p) => core.vfs.stat(cred, p).id,
      readdir: (p) => core.vfs.list(cred, p).entries.length,
      rename: (a, b) => void core.vfs.move(cred, a, b),
      unlink: (p) => core.vfs.unlink(cred, p),
      settle: () => core.store.durable(),
    };
    const fsRoot = shmDir('mdvfs-bench-core-fs-');
    const native: Side = {
      mkdir: (p) => mkdirSync(p, { recursive: true }),
      write: (p, data) => writeFileSync(p, data),
      read: (p) => readFileSync(p).length,
      stat: (p) => statSync(p).ino,
      readdir: (p) => readdirSync(p, { withFileTypes: true }).length,
      rename: (a, b) => renameSync(a, b),
      unlink: (p) => unlinkSync(p),
      settle: async () => {},
    };
    const oursAll: Times[] = [];
    const nativeAll: Times[] = [];
    const reps = opts.quick ? 5 : 7;
    log(`core: ${reps} paired repetitions of ${count} files`);
    for (let rep = -1; rep < reps; rep++) {
      // alternate which side goes first; rep -1 is the warm-up
      const a = await repetition(
        rep % 2 === 0 ? ours : native,
        rep % 2 === 0 ? `/bench${rep}` : `${fsRoot}/r${rep}`,
        count,
      );
      const b = await repetition(
        rep % 2 === 0 ? native : ours,
        rep % 2 === 0 ? `${fsRoot}/r${rep}` : `/bench${rep}`,
        count,
      );
      if (rep < 0) continue;
      oursAll.push(rep % 2 === 0 ? a : b);
      nativeAll.push(rep % 2 === 0 ? b : a);
    }
    core.grep.close();
    core.store.close();
    rmSync(fsRoot, { recursive: true, force: true });
    const n = count.toLocaleString('en-US');
    const what: Record<Phase, string> = {
      create: `create ${n} files of 1 KiB (VFS: flushed to SQLite)`,
      read: `read ${n} files`,
      stat: `stat ${n} files`,
      readdir: `list a directory of ${PER_DIR.toLocaleString('en-US')} entries (with types)`,
      rename: `rename ${n} files within their directory (VFS: flushed)`,
      delete: `delete ${n} files (VFS: flushed)`,
    };
    return {
      title,
      rows: PHASES.map((ph) => {
        const flush = median(oursAll.map((x) => x.flush[ph]));
        const why =
          flush >= 1
            ? `; of ours, ${flush.toFixed(1)} µs/op is the SQLite write of the batch (${PERSISTED[ph]}), which node:fs on tmpfs does not pay`
            : '';
        return compareRow({
          name: what[ph],
          unit: 'µs/op',
          better: 'lower',
          ours: median(oursAll.map((x) => x[ph])),
          baseline: median(nativeAll.map((x) => x[ph])),
          target: 1,
          targetText: '≥ 1 (no slower)',
          note: `ours = daemon VFS in-process (openCore, SERVICE_FSYNC=full, data dir on tmpfs); baseline = node:fs *Sync on tmpfs; median of ${reps} paired reps${why}`,
        });
      }),
    };
  } catch (err) {
    return { title, rows: [errorRow(title, err)] };
  }
}
