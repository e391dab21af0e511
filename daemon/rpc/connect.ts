/**
 * Finding the daemon of a data dir, and starting one in the background when none runs
 * (like a language server), so every front end shares one daemon and one copy of the data.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectSocket, type DaemonClient } from './client.js';
import { securePrivateDataDir, verifySocket } from './private-dir.js';
import { VfsError } from '../errors.js';
import { DAEMON_V8_FLAGS, loaderFlags } from '../node-flags.js';
import {
  daemonsFromEnv,
  daemonTlsClientFromEnv,
  formatDaemonAddress,
  leaseTimeoutFromEnv,
  storeFromEnv,
  type DaemonAddress,
  type DaemonTlsClientSettings,
} from './settings.js';
import { connectTls } from './tcp.js';
import { checkIdentity, expectedStore, readStoreRecord, type StoreRecord } from './store-record.js';
import type { StoreIdentity } from './protocol.js';

/** A socket or data dir refused by private-dir.ts: retrying or starting a daemon cannot help. */
const refused = (err: unknown): boolean => err instanceof VfsError && err.code === 'EACCES';
/** A daemon of another store answered (or none may be started): starting one cannot help either. */
const stale = (err: unknown): boolean => err instanceof VfsError && err.code === 'ESTALE';

/**
 * The handshake: the daemon names the store it serves (`sys.ping`, answered by standbys too) and is
 * refused unless it is the one expected. The client is closed when refused.
 */
async function handshake(client: DaemonClient, where: string, expected: Parameters<typeof checkIdentity>[1]) {
  try {
    checkIdentity(where, expected, (await client.call('sys.ping', {})).store);
    return client;
  } catch (err) {
    client.close();
    throw err;
  }
}

/**
 * The store a front end given SERVICE_DAEMONS has accepted (its data dir's record, else the first
 * active daemon's), and the newest lease epoch seen active: a daemon of another store, or an active
 * one of an older epoch, is passed over. One per process: every reconnect comes through here.
 */
const accepted: { id?: string; kind?: StoreIdentity['kind']; epoch: number } = { epoch: 0 };

/** The daemon's exit status when another daemon holds the data dir's lock (EX_TEMPFAIL). */
export const EXIT_LOCKED = 75;

/** SERVICE_DATA_DIR, else $XDG_DATA_HOME/mdvfs, else ~/.local/share/mdvfs. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SERVICE_DATA_DIR) return path.resolve(env.SERVICE_DATA_DIR);
  const base = env.XDG_DATA_HOME || path.join(os.homedir(), '.local', 'share');
  return path.join(base, 'mdvfs');
}

/**
 * The socket of a data dir: `<dataDir>/daemon.sock`, or, when that would pass the 107-byte limit
 * of Unix socket paths, `<runtime dir>/mdvfs-<uid>/<hash>.sock`. Security: that directory is private
 * (0700, ours): the daemon checks it before binding and clients before connecting (private-dir.ts),
 * because a predictable name in a shared /tmp can be taken first by another local user.
 */
export function socketPathFor(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const direct = path.join(path.resolve(dataDir), 'daemon.sock');
  if (Buffer.byteLength(direct) <= 100) return direct;
  const runtime =
    env.XDG_RUNTIME_DIR && existsSync(env.XDG_RUNTIME_DIR)
      ? env.XDG_RUNTIME_DIR
      : (env.TMPDIR || '/tmp').replace(/(.)\/+$/, '$1');
  const id = createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16);
  return path.join(runtime, `mdvfs-${process.getuid?.() ?? 0}`, `${id}.sock`);
}

export interface ConnectOptions {
  dataDir?: string;
  /** Start a background daemon when none answers (default true). */
  spawn?: boolean;
  /** How long to wait for a spawned daemon, or for one of `daemons` to be active (ms). */
  timeoutMs?: number;
  /** Addresses of several daemons on one store, the active one to be used (default SERVICE_DAEMONS; [] for the data dir's daemon). */
  daemons?: DaemonAddress[];
}

/** The daemon entry point next to this module (works from dist/ and from sources run by a TS loader). */
function daemonEntry(): string {
  const here = fileURLToPath(import.meta.url);
  const ext = path.extname(here);
  return path.join(path.dirname(here), '..', `main${ext}`);
}

/**
 * Node flags for the background daemon: its V8 flags, and from TS sources the parent's loader
 * flags. Why not all of process.execArgv: a client run as `node -e '<code>'` (or -p, --test,
 * --inspect...) would make the "daemon" run that code again, which starts another, and so on.
 */
function daemonArgs(entry: string): string[] {
  return [...DAEMON_V8_FLAGS, ...(entry.endsWith('.ts') ? loaderFlags(process.execArgv) : []), entry];
}

/** One line on stderr when a front end or `mdvfs serve` creates a data dir (so a new empty store is never silent). */
export function announceNewDataDir(dataDir: string): void {
  process.stderr.write(`mdvfs: created a new data dir ${dataDir} (set SERVICE_DATA_DIR to use another)\n`);
}

/** A background daemon's environment: it exits when idle (SERVICE_IDLE_EXIT) and belongs to no serve. */
function backgroundEnv(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dataDir, MDVFS_STARTED_BY: 'background' };
  delete env.MDVFS_SERVE_PID;
  return env;
}

/**
 * Connects to the data dir's daemon, starting one in the background if needed; or, when a list of
 * daemons is given (SERVICE_DAEMONS), to the one of them that is active. Every reconnecting front end
 * (the MCP stdio server, the mount, the HTTP sidecar restarted by serve) comes back here, so after a
 * failover it finds the new active daemon.
 */
export async function connectDaemon(opts: ConnectOptions = {}): Promise<DaemonClient> {
  const daemons = opts.daemons ?? daemonsFromEnv();
  if (daemons.length > 0)
    return connectActive(daemons, opts.timeoutMs ?? 15000, path.resolve(opts.dataDir ?? defaultDataDir()));
  const dataDir = path.resolve(opts.dataDir ?? defaultDataDir());
  // mkdir on a kernel pseudo filesystem may never return: refuse it clearly instead (/dev/shm is plain tmpfs).
  if (/^\/(proc|sys)(\/|$)/.test(dataDir))
    throw new Error(`SERVICE_DATA_DIR cannot be under /proc or /sys (got ${dataDir})`);
  // Security: never send a credential to a socket another local user could own (private-dir.ts).
  const existed = existsSync(dataDir);
  if (opts.spawn !== false || existed) securePrivateDataDir(dataDir);
  // A mistyped SERVICE_DATA_DIR must not go unnoticed: say once that this is a new, empty store.
  if (!existed && opts.spawn !== false) announceNewDataDir(dataDir);
  // Security: the data dir's daemon must serve the store the data dir belongs to (store-record.ts).
  const expected = expectedStore(dataDir);
  const sock = socketPathFor(dataDir);
  try {
    verifySocket(sock);
    return await handshake(await connectSocket(sock), sock, expected);
  } catch (err) {
    if (opts.spawn === false || refused(err) || stale(err)) throw err;
  }
  if (!expected.mayStart) throw new VfsError('ESTALE', 'connect', dataDir, expected.why);
  const logFd = openSync(path.join(dataDir, 'daemon.log'), 'a', 0o600);
  const child = spawn(process.execPath, daemonArgs(daemonEntry()), {
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: backgroundEnv(dataDir),
  });
  child.unref();
  closeSync(logFd);
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? 1;
  });
  const deadline = Date.now() + (opts.timeoutMs ?? 15000);
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      verifySocket(sock);
      return await handshake(await connectSocket(sock), sock, expected);
    } catch (err) {
      if (refused(err) || stale(err)) throw err;
      lastErr = err;
    }
    // EXIT_LOCKED: another starter won the race for the lock; keep waiting for its socket.
    if (exited !== null && exited !== EXIT_LOCKED)
      throw new Error(
        `the daemon for ${dataDir} failed to start (exit ${exited}); see ${path.join(dataDir, 'daemon.log')}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for the daemon of ${dataDir}: ${String(lastErr)}`);
}

/**
 * The active one of several daemons: each is asked `sys.health` (O(1)), which a standby answers with
 * EAGAIN. During a failover none may be active for a moment: the list is tried again until `timeoutMs`.
 */
async function connectActive(daemons: DaemonAddress[], timeoutMs: number, dataDir?: string): Promise<DaemonClient> {
  // The data dir of this machine's own daemon, when it recorded its store: only that store is accepted.
  if (accepted.id === undefined && dataDir !== undefined) {
    let rec: StoreRecord | undefined;
    try {
      rec = readStoreRecord(dataDir);
    } catch {
      rec = undefined; // unreadable: the first active daemon's store is accepted, as without a data dir
    }
    if (rec?.kind === 'postgres' && rec.id !== undefined) accepted.id = rec.id;
  }
  // The kind of store expected: the one SERVICE_STORE names; else PostgreSQL when several daemons are
  // listed (only a PostgreSQL store has several); else (one daemon, say a SQLite one over TLS) the kind
  // first accepted.
  const named = (process.env.SERVICE_STORE ?? '').trim() === '' ? undefined : storeFromEnv().kind;
  const kind = named ?? (daemons.length > 1 ? 'postgres' : accepted.kind);
  // Read once per search: a tls:// address needs the CA and the secret file (a bad one is a SettingsError).
  const tls = daemons.some((d) => d.kind === 'tls') ? daemonTlsClientFromEnv() : undefined;
  // A daemon silent for half the lease timeout is left (the heartbeat): by then a standby is about to take over.
  const silentMs = Math.max(500, Math.floor(leaseTimeoutFromEnv() / 2));
  const deadline = Date.now() + timeoutMs;
  const seen = new Map<string, string>();
  for (;;) {
    for (const addr of daemons) {
      let client: DaemonClient | undefined;
      try {
        client = await connectTo(addr, tls);
        // A paused daemon's socket still accepts (the kernel does): its answer is awaited only so long.
        const { store } = await answerWithin(client.call('sys.health', {}), Math.min(2000, silentMs));
        checkIdentity(formatDaemonAddress(addr), { kind, id: accepted.id }, store, accepted.epoch);
        if (store !== undefined) {
          accepted.id ??= store.id;
          accepted.kind ??= store.kind;
          accepted.epoch = Math.max(accepted.epoch, store.epoch ?? 0);
        }
        client.watch(silentMs);
        return client;
      } catch (err) {
        client?.close();
        if (refused(err)) throw err;
        seen.set(
          formatDaemonAddress(addr),
          err instanceof VfsError && err.code === 'EAGAIN' ? 'a standby' : (err as Error).message,
        );
      }
    }
    if (Date.now() > deadline)
      throw new Error(
        `no active daemon among SERVICE_DAEMONS: ${[...seen].map(([s, why]) => `${s}: ${why}`).join('; ')}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `p`, or ETIMEDOUT after `ms`. */
function answerWithin<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new VfsError('ETIMEDOUT', 'connect', undefined, `no answer within ${ms} ms (paused or hung?)`)),
      ms,
    );
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** One daemon address: its Unix socket (checked private first), or TLS with the shared secret. */
function connectTo(addr: DaemonAddress, tls: DaemonTlsClientSettings | undefined): Promise<DaemonClient> {
  switch (addr.kind) {
    case 'unix':
      verifySocket(addr.path); // Security: never a socket another local user could own
      return connectSocket(addr.path);
    case 'tls':
      return connectTls(addr, tls!);
  }
}

/** Whether a process lives (a zombie counts as gone). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
