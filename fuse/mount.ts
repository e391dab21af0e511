/**
 * `mdvfs mount <dir>` and `mdvfs umount <dir>`.
 *
 * The mount runs in the foreground as one principal (root unless --user/--token-file/SERVICE_TOKEN). It is mounted with
 * auto_unmount (a killed mount never leaves a dead mountpoint) and force (a stale one is cleared first),
 * and unmounts cleanly on SIGINT/SIGTERM/SIGHUP after sending any unsaved buffers to the daemon. After
 * an unmount from outside (`mdvfs umount`, `--lazy` while files are open) it exits once the last open
 * file is closed or the kernel ended the session.
 *
 * Never touch the mountpoint synchronously from this process: the kernel request would wait for this
 * very event loop and deadlock (even SIGKILL cannot free it). Everything here is async.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ERRORS, VfsError, type ErrorCode } from '../daemon/errors.js';
import { defaultDataDir } from '../daemon/rpc/connect.js';
import type { Creds, WhoAmI } from '../daemon/rpc/protocol.js';
import { OwnerMap } from './attrs.js';
import { DaemonLink } from '../daemon/rpc/link.js';
import { LowLevelMount } from './lowlevel/ll-mount.js';
import { loadLowLevel } from './lowlevel/native.js';
import { MountFs } from './mount-fs.js';
import { MountFsSet } from './mount-set.js';
import { SharedUsers } from './shared.js';

const execFileP = promisify(execFile);

export interface MountOptions {
  user?: string;
  token?: string;
  onBehalfOf?: string;
  readOnly?: boolean;
  /** No open or flush request reaches the mount; data goes to the daemon after close(2) (docs/posix.md). */
  writeback?: boolean;
  /** Every local user acts as the store's user of the same name (fuse/shared.ts). */
  shared?: boolean;
}

export function credsFor(opts: MountOptions): Creds {
  if (opts.user !== undefined && opts.token !== undefined)
    throw new Error('use either --user or --token-file, not both');
  if (opts.shared && (opts.user !== undefined || opts.token !== undefined || opts.onBehalfOf !== undefined))
    throw mountError('EINVAL', '--shared acts as each local user: it takes no --user, --token-file or --on-behalf-of');
  // Handle-less requests are served by path (writeback), with no opener whose user they could act as.
  if (opts.shared && opts.writeback) throw mountError('EINVAL', '--shared and --writeback do not go together');
  const creds: Creds = { origin: 'local' };
  if (opts.user !== undefined) creds.authorization = `User ${opts.user}`;
  if (opts.token !== undefined) creds.authorization = `Bearer ${opts.token}`;
  if (opts.onBehalfOf !== undefined) creds.onBehalfOf = opts.onBehalfOf;
  return creds;
}

/** A mount-point error with its code and one sentence naming the directory. */
function mountError(code: ErrorCode, sentence: string): VfsError {
  const e = new VfsError(code, 'mount');
  e.message = `${code}: ${sentence}`;
  return e;
}

export async function runMount(dir: string, opts: MountOptions): Promise<void> {
  const creds = credsFor(opts);
  // The kernel's mount table names the real path: watching it for an outside unmount needs the same.
  const mnt = await fsp.realpath(path.resolve(dir)).catch(() => path.resolve(dir));
  const st = await fsp.stat(mnt).catch((err: NodeJS.ErrnoException) => {
    // A mountpoint left behind by a killed mount answers ENOTCONN: serve() detaches it first.
    if (err.code === 'ENOTCONN') return null;
    if (err.code === 'ENOENT') throw mountError('ENOENT', `cannot mount at '${mnt}': no such directory`);
    if (err.code === 'EACCES' || err.code === 'ENOTDIR' || err.code === 'ELOOP')
      throw mountError(err.code, `cannot mount at '${mnt}': ${ERRORS[err.code].text}`);
    throw new Error(`cannot mount at '${mnt}': ${err.message}`);
  });
  if (st && !st.isDirectory()) throw mountError('ENOTDIR', `cannot mount at '${mnt}': not a directory`);
  // A second mount on the same directory would hide the first, which goes on running unseen.
  if (st && (await fuseAt(mnt, 'fuse.mdvfs')))
    throw mountError(
      'EBUSY',
      `cannot mount at '${mnt}': an mdvfs mount is already there; unmount it first ('mdvfs umount ${mnt}')`,
    );

  // allow_other: fusermount3 refuses it to other users without saying why, after the daemon was started.
  if (opts.shared && process.getuid?.() !== 0 && !(await userAllowOther()))
    throw mountError(
      'EPERM',
      `cannot mount at '${mnt}' with --shared: run it as root, or set user_allow_other in /etc/fuse.conf`,
    );
  // First: without the addon there is nothing to connect for.
  const ll = loadLowLevel();
  const dataDir = defaultDataDir();
  const link = await DaemonLink.open(dataDir, creds, { name: 'mdvfs mount' });
  let who: WhoAmI;
  try {
    who = await link.call('auth.whoami', {});
  } catch (err) {
    link.close();
    const as = opts.user !== undefined ? `user ${opts.user}` : opts.token !== undefined ? 'the given token' : 'root';
    const prefix = `cannot mount as ${as}${opts.onBehalfOf ? ` on behalf of ${opts.onBehalfOf}` : ''}: `;
    if (err instanceof VfsError) {
      // Keep the daemon's code (EAUTH, EPERM...) so the CLI reports the real cause.
      err.message = prefix + err.message;
      throw err;
    }
    throw new Error(prefix + String(err));
  }

  // whoami shows a workspace caller its root as '/': change events need the real one.
  const jail = who.workspace ? (await link.call('auth.scope', {})).root_path : '/';
  const writeback = opts.writeback === true;
  let fss: MountFsSet;
  let shared: SharedUsers | undefined;
  try {
    if (opts.shared) {
      shared = new SharedUsers(link, { readOnly: opts.readOnly === true });
      await shared.reload();
      fss = shared.set;
    } else {
      const owners = new OwnerMap(who.uid, who.gid, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
      const mfs = new MountFs(link, {
        readOnly: opts.readOnly === true,
        owners,
        writeback,
        ...(jail !== '/' ? { jail } : {}),
      });
      fss = new MountFsSet(mfs, owners);
    }
  } catch (err) {
    link.close();
    throw err;
  }
  const llm = new LowLevelMount(ll, fss, jail !== '/' ? { jail } : {});
  try {
    await link.onChange((ev) => {
      llm.onChange(ev, fss.onChange(ev));
      // Users or groups may have changed (or the connection was lost): a shared mount maps them again.
      if (ev.paths.length === 0) shared?.stale();
    });
  } catch (err) {
    link.close();
    throw err;
  }
  try {
    await serve(llm, mnt, st === null);
  } catch (err) {
    link.close(); // or the open socket would keep this failed process alive
    throw err;
  }
  const delegate = who.on_behalf_of ? ` on behalf of ${who.on_behalf_of}` : '';
  process.stderr.write(
    `mdvfs: mounted ${dataDir} at ${mnt} as ${shared ? 'each local user' : who.user}${delegate}${opts.readOnly ? ' (read-only)' : ''}${writeback ? ' (writeback)' : ''}${shared ? ' (shared)' : ''}\n`,
  );

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (why: string, unmount: boolean) => {
      if (stopping) {
        // A second signal while shutting down (a daemon that does not answer): leave now. auto_unmount
        // still removes the mount when this process is gone.
        if (unmount) process.exit(1);
        return;
      }
      stopping = true;
      process.stderr.write(`mdvfs: ${why}, unmounting ${mnt}\n`);
      void shutdown(llm, fss, link, unmount).finally(resolve);
    };
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => stop(`got ${sig}`, true));
    // `mdvfs umount` / `fusermount3 -u` end the mount from outside: notice it, and exit once files are closed.
    void watchMountTable(mnt, () => stopping).then(() => stop('unmounted from outside', false));
  });
  process.exit(0);
}

async function serve(llm: LowLevelMount, mnt: string, stale: boolean): Promise<void> {
  // A mountpoint left behind by a killed mount (ENOTCONN): detach it first.
  if (stale)
    await execFileP('fusermount3', ['-uz', mnt])
      .catch(() => execFileP('umount', ['-l', mnt]))
      .catch(() => undefined);
  try {
    llm.mount(mnt);
  } catch (err) {
    throw new Error(`cannot mount at ${mnt}: ${(err as Error).message}`);
  }
  await raiseReadahead(mnt);
}

/** Whether /etc/fuse.conf lets users other than root mount with allow_other. */
async function userAllowOther(): Promise<boolean> {
  const conf = await fsp.readFile('/etc/fuse.conf', 'utf8').catch(() => '');
  return conf.split('\n').some((line) => line.trim() === 'user_allow_other');
}

/** The kernel's readahead for the mount, in KiB: one window is one FUSE read request of the largest size (1 MiB). */
const READAHEAD_KIB = 1024;

/**
 * Sets the mount's readahead (its backing device's read_ahead_kb, as mergerfs's `readahead` option
 * does). FUSE starts at 128 KiB and the init reply can only lower it, so a sequential read of a file
 * the kernel does not hold would reach the mount as 128 KiB requests; with 1 MiB it takes 1 MiB
 * requests, an eighth as many (issue 18: the cold 64 MiB read). Only root may write it: otherwise,
 * or without /proc and /sys, the kernel's default stays.
 */
async function raiseReadahead(mnt: string): Promise<void> {
  const dev = (await fuseAt(mnt))?.dev;
  if (dev === undefined || !/^\d+:\d+$/.test(dev)) return;
  await fsp.writeFile(`/sys/class/bdi/${dev}/read_ahead_kb`, String(READAHEAD_KIB)).catch(() => undefined);
}

/** A path as /proc/self/mountinfo shows it (space, tab, newline and backslash in octal escapes). */
function escapeMountPath(p: string): string {
  return p.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

/**
 * The mounts at `mnt` in this namespace's mount table (/proc/self/mountinfo, never the mount itself),
 * bottom to top: each one's device and filesystem type (`fuse.mdvfs`, `tmpfs`...). Empty: nothing is
 * mounted there; null: the table cannot be read (no /proc).
 */
async function mountsAt(mnt: string): Promise<{ dev: string; type: string }[] | null> {
  const table = await fsp.readFile('/proc/self/mountinfo', 'utf8').catch(() => null);
  if (table === null) return null;
  const escaped = escapeMountPath(mnt);
  const found: { dev: string; type: string }[] = [];
  for (const line of table.split('\n')) {
    const fields = line.split(' ');
    if (fields[4] !== escaped) continue;
    const sep = fields.indexOf('-');
    found.push({ dev: fields[2] ?? '', type: sep > 0 ? (fields[sep + 1] ?? '') : '' });
  }
  return found;
}

/** The first FUSE mount at `mnt` (only one of type `type`, e.g. `fuse.mdvfs`, when given), as mountsAt. */
async function fuseAt(mnt: string, type?: string): Promise<{ dev: string; type: string } | undefined | null> {
  const mounts = await mountsAt(mnt);
  if (mounts === null) return null;
  return mounts.find((m) => (type === undefined ? m.type === 'fuse' || m.type.startsWith('fuse.') : m.type === type));
}

async function shutdown(llm: LowLevelMount, mfs: MountFsSet, link: DaemonLink, unmount: boolean): Promise<void> {
  if (!unmount && mfs.openByKernel > 0) {
    // After a lazy unmount (`mdvfs umount --lazy`), processes may still hold files open and write to
    // them. Wait until the last is closed, or until the kernel ends the session: when the last file of
    // a detached mount is closed, the kernel may drop its release request with the session, so the
    // open count alone could wait forever.
    process.stderr.write(
      `mdvfs: ${mfs.openByKernel} file(s) still open in the detached mount; exiting when they are closed\n`,
    );
    while (mfs.openByKernel > 0 && !llm.sessionEnded) await sleep(200);
  }
  await mfs.flushAll();
  if (unmount) llm.unmount();
  await llm.close();
  link.close();
}

/** Resolves when `mnt` no longer appears in this namespace's mount table (read from /proc, never the mount). */
async function watchMountTable(mnt: string, done: () => boolean): Promise<void> {
  let seen = false;
  for (let round = 0; !done(); round++) {
    // The first look is immediate: the mount is known to be up, and may be ended from outside at once.
    if (round > 0) await sleep(1000);
    const fuse = await fuseAt(mnt);
    if (fuse === null) return new Promise(() => undefined); // no /proc: rely on signals alone
    const mounted = fuse !== undefined;
    if (mounted) seen = true;
    else if (seen) return;
    else if (round >= 5) {
      // Never found under that name: do not guess, keep serving until a signal arrives.
      process.stderr.write(`mdvfs: ${mnt} not found in /proc/self/mountinfo; stop the mount with Ctrl-C or SIGTERM\n`);
      return new Promise(() => undefined);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * `mdvfs umount <dir>`: unmounts, or refuses with EBUSY while a process has a file or its working
 * directory in the mount (as umount(8) does). `lazy` detaches at once (`fusermount3 -uz`): the mount
 * process sends what open files hold and exits when the last is closed.
 */
export async function runUmount(dir: string, opts: { lazy?: boolean } = {}): Promise<void> {
  let mnt = path.resolve(dir);
  const fail = (e: { stderr?: string; message: string }): never => {
    const text = (e.stderr ?? e.message).trim();
    if (!opts.lazy && /busy/i.test(text)) {
      const busy = new Error(
        `cannot unmount ${mnt}: it is busy (a process has a file open in it or is working in it); close those, ` +
          `or detach it now with 'mdvfs umount --lazy ${mnt}' (the mount then exits when the last file is closed)`,
      );
      throw Object.assign(busy, { code: 'EBUSY' });
    }
    throw new Error(`cannot unmount ${mnt}: ${text}`);
  };
  // Say plainly what is wrong, rather than fusermount3's "Invalid argument". The directory itself is
  // looked at only when the mount table has nothing there: a hung mount must not hang its unmount.
  if ((await mountsAt(mnt))?.length === 0) {
    const real = await fsp.realpath(mnt).catch(() => null);
    if (real === null) throw mountError('ENOENT', `cannot unmount '${mnt}': no such directory`);
    mnt = real; // the table names real paths
    if ((await mountsAt(mnt))?.length === 0)
      throw mountError('EINVAL', `cannot unmount '${mnt}': nothing is mounted there`);
  }
  try {
    await execFileP('fusermount3', [opts.lazy ? '-uz' : '-u', mnt]);
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code !== 'ENOENT') fail(e);
    // No fusermount3 (the fuse3 package absent): root can still unmount directly.
    await execFileP('umount', opts.lazy ? ['-l', mnt] : [mnt]).catch(fail);
  }
}
