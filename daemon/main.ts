/**
 * `mdvfs daemon`: loads the data dir into memory and serves the socket until SIGINT/SIGTERM.
 * Settings come from SERVICE_* environment variables (see the README).
 */
import { chmodSync, existsSync, statSync, unlinkSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Registry } from './auth/registry.js';
import { BootstrapSecret } from './auth/bootstrap-secret.js';
import type { AuthPolicy } from './rpc/protocol.js';
import { Vfs } from './core/vfs.js';
import { MAX_DEPTH } from './core/paths.js';
import { GrepPool } from './search/search.js';
import { VfsError } from './errors.js';
import { connectSocket } from './rpc/client.js';
import { defaultDataDir, EXIT_LOCKED, processAlive, socketPathFor } from './rpc/connect.js';
import { PRIVATE_UMASK, prepareSocketDir, securePrivateDataDir } from './rpc/private-dir.js';
import { RpcServer } from './rpc/server.js';
import { log, setupLog } from './rpc/log.js';
import { daemonMetrics } from './metrics.js';
import { listenTls, type TlsListener } from './rpc/tcp.js';
import {
  authPolicyFromEnv,
  daemonListenFromEnv,
  formatDaemonAddress,
  formatListen,
  fsyncFromEnv,
  idleExitFromEnv,
  intFromEnv,
  leaseTimeoutFromEnv,
  logLevelFromEnv,
  maxFileSizeFromEnv,
  principalCapsFromEnv,
  EXIT_STORE_CONFIG,
  SettingsError,
  storeFromEnv,
  storeLabel,
  type DaemonTlsServerSettings,
  type LogLevel,
  type PrincipalCaps,
  type StoreSetting,
} from './rpc/settings.js';
import { Service } from './service/runner.js';
import type { DaemonProcess } from './service/context.js';
import { degradedHandlers, standbyHandlers, waitingHandlers } from './standby.js';
import { isUnreachable } from './store/pg-errors.js';
import type { LeaseStatus, PostgresStore } from './store/postgres.js';
import { SqliteStore } from './store/sqlite.js';
import { readStoreRecord, refuseOtherKind, refuseOtherStore, writeStoreRecord } from './rpc/store-record.js';
import type { StoreIdentity } from './rpc/protocol.js';
import type { LoadedState, OpenedStore } from './store/store.js';
import { Vcs } from './vcs/vcs.js';
import { WarmState } from './warm.js';

/** The first pause before reconnecting to an unreachable PostgreSQL; each failure doubles it up to the cap. */
const RECONNECT_FIRST_MS = 250;
const RECONNECT_MAX_MS = 2000;
/** While PostgreSQL stays unreachable, one log line this often (besides one per change of state). */
const OUTAGE_LOG_EVERY_MS = 60_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface DaemonConfig {
  dataDir: string;
  maxFileSize: number;
  fsync: 'full' | 'normal' | 'off';
  /** SERVICE_STORE: SQLite in the data dir, or PostgreSQL. */
  store: StoreSetting;
  policy: AuthPolicy;
  regexTimeoutMs: number;
  /** SERVICE_EVENTS_MAX_STREAMS*, SERVICE_MAX_WORKSPACES_PER_USER, SERVICE_MAX_WORKSPACE_SECRETS_PER_USER (default: their defaults). */
  caps?: PrincipalCaps;
  /** How this daemon was started (see DaemonStatus.started_by). */
  startedBy: 'background' | 'serve' | 'foreground';
  /** The `mdvfs serve` that started it (it holds the daemon from birth). */
  servePid?: number;
  /** SERVICE_IDLE_EXIT in seconds (0: never); applies only to a daemon no live serve holds and not run in the foreground. */
  idleExitSecs: number;
  /** SERVICE_LEASE_TIMEOUT_MS (PostgreSQL store). */
  leaseTimeoutMs: number;
  /** SERVICE_DAEMON_LISTEN and its TLS files and secret: a TCP listener besides the socket. */
  tcp?: DaemonTlsServerSettings;
  /** SERVICE_LOG_LEVEL (default info). */
  logLevel?: LogLevel;
}

/**
 * How a daemon was started, told by its starter in the environment (internal, not settings):
 * MDVFS_STARTED_BY=background from connectDaemon, MDVFS_SERVE_PID=<pid> from `mdvfs serve`.
 */
function starterFromEnv(env: NodeJS.ProcessEnv): Pick<DaemonConfig, 'startedBy' | 'servePid'> {
  const serve = Number(env.MDVFS_SERVE_PID);
  if (Number.isSafeInteger(serve) && serve > 0) return { startedBy: 'serve', servePid: serve };
  return { startedBy: env.MDVFS_STARTED_BY === 'background' ? 'background' : 'foreground' };
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): DaemonConfig {
  const fsync = fsyncFromEnv(env);
  const tcp = daemonListenFromEnv(env);
  return {
    dataDir: defaultDataDir(env),
    maxFileSize: maxFileSizeFromEnv(env),
    fsync,
    store: storeFromEnv(env),
    // For requests that declare no policy (the HTTP sidecar declares its own with every request).
    policy: authPolicyFromEnv(env),
    regexTimeoutMs: intFromEnv(env, 'SERVICE_REGEX_TIMEOUT_MS', 2000),
    caps: principalCapsFromEnv(env),
    idleExitSecs: idleExitFromEnv(env),
    leaseTimeoutMs: leaseTimeoutFromEnv(env),
    logLevel: logLevelFromEnv(env),
    ...(tcp === undefined ? {} : { tcp }),
    ...starterFromEnv(env),
  };
}

export interface Daemon {
  socketPath: string;
  /** True once our socket file is gone or replaced (data dir deleted, socket unlinked): no client can reach us. */
  socketGone(): Promise<boolean>;
  /** Open client connections, and a hook called when their number changes. */
  clients(): number;
  onClientsChange(fn: (clients: number) => void): void;
  /** Seconds with no client after which this daemon should exit now (0: it should not). */
  idleExit(): number;
  /** SIGHUP: the TLS listener takes its certificate, key and secret from their files again (logged either way). */
  reloadTls(): void;
  stop(): Promise<void>;
}

type CoreConfig = Omit<DaemonConfig, 'startedBy' | 'idleExitSecs' | 'store' | 'leaseTimeoutMs' | 'tcp'>;

export interface Core {
  vfs: Vfs;
  registry: Registry;
  vcs: Vcs;
  store: OpenedStore;
  grep: GrepPool;
  service: Service;
}

/** Opens the SQLite store of the data dir, loads everything into memory, and returns the wired core (no socket). */
export function openCore(cfg: CoreConfig, proc?: DaemonProcess): Omit<Core, 'store'> & { store: SqliteStore } {
  const store = new SqliteStore(cfg.dataDir, cfg.fsync);
  const state = store.load();
  const registry = new Registry();
  if (!state.fresh) store.loadRegistry(registry);
  return { ...wireCore(cfg, store, state, registry, proc), store };
}

/**
 * What a daemon opens: the core of the active daemon, or (PostgreSQL) a standby's store that becomes
 * a core once it takes the lease. `lease` tells the role, epoch and lag on a PostgreSQL store.
 */
type OpenedDaemon = (
  { core: Core; standby?: undefined } | { core?: undefined; standby: PostgresStore; warm: WarmState }
) & {
  lease?: () => LeaseStatus;
};

/** Opens the store SERVICE_STORE names (SQLite, or PostgreSQL over the network): as active daemon, or as standby when another holds the lease. */
async function openDaemon(
  cfg: CoreConfig & Pick<DaemonConfig, 'store' | 'leaseTimeoutMs'>,
  proc: DaemonProcess,
): Promise<OpenedDaemon> {
  // A data dir belongs to one store: never a daemon of another in it (store-record.ts).
  const rec = refuseOtherKind(cfg.dataDir, cfg.store);
  if (cfg.store.kind === 'sqlite') {
    const core = openCore(cfg, proc);
    if (rec === undefined) writeStoreRecord(cfg.dataDir, core.store.identity(), storeLabel(cfg.store));
    return { core };
  }
  // Loaded only when asked for: a SQLite daemon starts without node-postgres.
  const { PostgresStore } = await import('./store/postgres.js');
  const store = await PostgresStore.connect(cfg.store.url, cfg.leaseTimeoutMs);
  const lease = (): LeaseStatus => store.leaseStatus();
  try {
    refuseOtherStore(cfg.dataDir, rec, store.identity());
    if (rec?.label !== storeLabel(cfg.store)) writeStoreRecord(cfg.dataDir, store.identity(), storeLabel(cfg.store));
    if (!(await store.tryLead())) {
      const warm = new WarmState(cfg.maxFileSize, store);
      await store.follow(warm);
      return { standby: store, warm, lease };
    }
    return { core: await loadCore(cfg, store, await store.load(), proc), lease };
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** Fills the registry of a loaded store, then as wireCore. */
async function loadCore(cfg: CoreConfig, store: OpenedStore, state: LoadedState, proc: DaemonProcess): Promise<Core> {
  const registry = new Registry();
  if (!state.fresh) await store.loadRegistry(registry);
  return wireCore(cfg, store, state, registry, proc);
}

/**
 * A standby that took the lease: its warm state (kept current as it followed) is the core's memory,
 * so only the pending attribution and the registry are read now; a store that held no tree yet is
 * loaded as at a start.
 */
async function takeOverCore(
  cfg: CoreConfig,
  store: PostgresStore,
  warm: WarmState,
  proc: DaemonProcess,
): Promise<Core> {
  const marks = await store.takeover(!warm.empty());
  if (marks === undefined) return loadCore(cfg, store, await store.load(), proc);
  const registry = new Registry();
  await store.loadRegistry(registry);
  return serveCore(cfg, store, warm, marks, registry, proc);
}

/** Fills memory from a loaded store (refusing a corrupt one) and wires the core around it. */
function wireCore(
  cfg: CoreConfig,
  store: OpenedStore,
  state: LoadedState,
  registry: Registry,
  proc?: DaemonProcess,
): Core {
  if (state.fresh) registry.initFresh();
  const tree = loadTree(store, state, cfg.maxFileSize, cfg.dataDir);
  return serveCore(cfg, store, tree, state.fresh ? undefined : state.marks, registry, proc);
}

/**
 * The tree, contents and history of a loaded store (a fresh one: `/`, `/home`, `/tmp`), as a start
 * holds them; throws EIO on a corrupt store (`where` names it).
 */
export function loadTree(
  store: OpenedStore,
  state: LoadedState,
  maxFileSize: number,
  where: string,
): { vfs: Vfs; vcs: Vcs } {
  const vfs = new Vfs({ maxFileSize, journal: store });
  const vcs = new Vcs(vfs, store);
  if (state.fresh) vfs.initFresh();
  else {
    for (const o of state.objects) {
      if (o.type === 'blob') vfs.blobs.load(o.id, o.data);
      else vcs.loadObject(o.id, o.type, o.data);
    }
    const nodes = state.inodes.map((row) => ({ node: vfs.loadNode(row), parent: row.parent }));
    for (const { node, parent } of nodes) vfs.linkLoaded(node, parent);
    // Iterative (no stored tree, however deep, can stop a start); also sets every directory's height.
    const reachable = vfs.loaded();
    if (reachable !== vfs.nodes.size)
      throw new VfsError(
        'EIO',
        'load store',
        where,
        `the store is corrupt: ${vfs.nodes.size - reachable} inode(s) are not reachable from / (a cycle or a lost subtree). Refusing to start.`,
      );
    for (const { node } of nodes) {
      if (node.kind === 'file' && !vfs.blobs.has(node.blob))
        throw new VfsError(
          'EIO',
          'load store',
          where,
          `the store is corrupt: file inode ${node.id} ('${node.name}') has no content. Refusing to start.`,
        );
    }
    for (const [scope, id] of state.refs) {
      if (!vcs.commits.has(id))
        throw new VfsError(
          'EIO',
          'load store',
          where,
          `the store is corrupt: ref '${scope}' points to a missing commit. Refusing to start.`,
        );
      vcs.refs.set(scope, id);
    }
  }
  return { vfs, vcs };
}

/** Wires the services around a loaded tree and history (`marks`: the stored pending attribution; none when fresh). */
function serveCore(
  cfg: CoreConfig,
  store: OpenedStore,
  { vfs, vcs }: { vfs: Vfs; vcs: Vcs },
  marks: LoadedState['marks'] | undefined,
  registry: Registry,
  proc?: DaemonProcess,
): Core {
  if (marks !== undefined) {
    vcs.loadMarks(marks);
    if (registry.users.get(0) === undefined)
      throw new VfsError('EIO', 'load store', cfg.dataDir, 'the store is corrupt: no root user. Refusing to start.');
  }
  store.registry = registry;
  if (cfg.caps !== undefined) registry.caps = cfg.caps;
  const grep = new GrepPool(2, cfg.regexTimeoutMs);
  const service = new Service({
    vfs,
    registry,
    vcs,
    store,
    grep,
    policy: cfg.policy,
    bootstrap: new BootstrapSecret(cfg.dataDir),
    ...(cfg.caps === undefined ? {} : { caps: cfg.caps }),
    ...(proc === undefined ? {} : { process: proc }),
  });
  return { vfs, registry, vcs, store, grep, service };
}

/** Starts a daemon on the data dir's socket. */
export async function startDaemon(cfg: DaemonConfig): Promise<Daemon> {
  setupLog('daemon', cfg.logLevel ?? 'info');
  // Security: whoever created the data dir, the store, its WAL, the pid file and the socket are ours alone.
  process.umask(PRIVATE_UMASK);
  securePrivateDataDir(cfg.dataDir);
  const startedAt = Date.now();
  const socketPath = socketPathFor(cfg.dataDir);
  let holder = cfg.servePid;
  const servedBy = (): number | undefined => (holder !== undefined && processAlive(holder) ? holder : undefined);
  const idleExit = (): number => (cfg.startedBy === 'foreground' || servedBy() !== undefined ? 0 : cfg.idleExitSecs);
  // The socket server comes after the core (it needs the handlers); status reads its clients late.
  const late: { rpc?: RpcServer; lease?: () => LeaseStatus; serving?: boolean; tcp?: TlsListener } = {};
  const leaseFields = (): object => {
    const l = late.lease?.();
    // Active once it serves: a standby that took the lease is still loading until its core is wired.
    return l === undefined
      ? {}
      : late.serving === true
        ? { role: 'active', epoch: l.epoch, committed_seq: l.applied }
        : { role: 'standby', epoch: l.epoch, lag: l.lag, applied_seq: l.applied, head_seq: l.head, active: l.holder };
  };
  const proc: DaemonProcess = {
    status: () => {
      const by = servedBy();
      return {
        pid: process.pid,
        data_dir: cfg.dataDir,
        socket: socketPath,
        ...(late.tcp === undefined ? {} : { listen: formatDaemonAddress({ kind: 'tls', ...late.tcp.address }) }),
        uptime: Math.floor((Date.now() - startedAt) / 1000),
        store: storeLabel(cfg.store),
        started_by: cfg.startedBy,
        ...(by === undefined ? {} : { served_by: by }),
        idle_exit: idleExit(),
        clients: late.rpc?.clients ?? 0,
        ...leaseFields(),
      };
    },
    hold: (pid) => {
      const by = servedBy();
      if (by !== undefined && by !== pid) return by;
      if (holder !== pid) log.info({ serve: pid }, 'held by mdvfs serve');
      holder = pid;
      return pid;
    },
  };
  let stopped = false;
  const where = cfg.store.kind === 'postgres' ? storeLabel(cfg.store) : cfg.dataDir;
  // A PostgreSQL outage at start is waited out (the socket answers EAGAIN meanwhile); anything else stops the start.
  let opened: OpenedDaemon | undefined;
  let outage: Error | undefined;
  try {
    opened = await openDaemon(cfg, proc);
  } catch (err) {
    if (cfg.store.kind !== 'postgres' || !isUnreachable(err)) throw err;
    outage = err as Error;
  }
  let core: Core | undefined;
  /** The store in use: the active core's, or a standby's; none while PostgreSQL is unreachable. */
  let current: OpenedStore | undefined;
  const fatal = (err: Error): void => {
    log.error({ err: err.message }, 'store write failed; stopping so that nothing diverges from disk');
    process.exit(1);
  };
  /**
   * A daemon waiting for PostgreSQL names the store its data dir recorded (else only the kind), so that
   * front ends of that store keep their connection and get its EAGAIN until it is back.
   */
  const waitingIdentity = (): StoreIdentity | undefined =>
    cfg.store.kind === 'postgres' ? { kind: 'postgres', id: readStoreRecord(cfg.dataDir)?.id ?? 'unknown' } : undefined;
  const outageText = (): string =>
    `PostgreSQL at ${where} is unreachable; this daemon reconnects by itself, retry in a few seconds`;
  const server = new RpcServer(
    opened?.core?.service.handlers ??
      (opened === undefined
        ? waitingHandlers(proc, outageText, waitingIdentity)
        : standbyHandlers(
            proc,
            () => late.lease?.().holder || 'unknown',
            () => current?.identity(),
          )),
    log,
  );
  late.rpc = server;
  /** A core no longer served (replaced after an outage): its feeds end, so their front ends resubscribe. */
  const retire = (old: Core | undefined): void => {
    if (old === undefined) return;
    old.grep.close();
    old.service.events.endAll('the daemon reloaded its store after a PostgreSQL outage');
  };
  /** Serves a core: its handlers answer on the socket from now on. */
  const activate = (c: Core): void => {
    const old = core;
    core = c;
    current = c.store;
    if (c.vfs.root.height > MAX_DEPTH) {
      log.warn(
        { depth: c.vfs.root.height, limit: MAX_DEPTH },
        `the tree is ${c.vfs.root.height} levels deep (stored before the limit of ${MAX_DEPTH}): it is served and may be moved up or deleted, but nothing can be created or moved below level ${MAX_DEPTH}; 'mdvfs fsck' names the deepest path`,
      );
    }
    c.vfs.onChange((paths) => server.broadcast({ kind: 'change', paths }));
    c.store.onFatal = cfg.store.kind === 'postgres' ? lost : fatal;
    server.handlers = c.service.handlers;
    late.serving = true;
    daemonMetrics.state = 'active';
    if (old !== c) retire(old);
  };
  /** Takes what a (re)connection opened: serves its core, or follows as a standby until the lease frees. */
  const adopt = (o: OpenedDaemon): void => {
    if (o.lease === undefined) delete late.lease;
    else late.lease = o.lease;
    if (o.core !== undefined) {
      activate(o.core);
      return;
    }
    const { standby, warm } = o;
    current = standby;
    standby.onFatal = lost;
    late.serving = false;
    daemonMetrics.state = 'standby';
    server.handlers = standbyHandlers(
      proc,
      () => late.lease?.().holder || 'unknown',
      () => standby.identity(),
    );
    retire(core);
    core = undefined;
    log.info(
      { epoch: standby.leaseStatus().epoch, active: standby.leaseStatus().holder },
      'standby: following the change stream until the lease frees',
    );
    void standby
      .waitForLease()
      .then(async () => {
        const t0 = Date.now();
        const c = await takeOverCore(cfg, standby, warm, proc);
        if (stopped || current !== standby) return;
        activate(c);
        daemonMetrics.takeovers++;
        log.info({ epoch: standby.leaseStatus().epoch, ms: Date.now() - t0 }, 'took the lease: active');
      })
      .catch((err: Error) => {
        if (!stopped && current === standby) lost(err);
      });
  };
  /**
   * PostgreSQL went away (or the lease did): the store is dropped, reads are served from memory
   * and every mutation is refused (EAGAIN, HTTP 503) until a new connection re-takes or re-follows
   * the lease; that reloads the store, so nothing unacknowledged survives the outage.
   */
  const lost = (err: Error): void => {
    if (stopped || current === undefined) return;
    const old = current;
    current = undefined;
    delete late.lease;
    late.serving = false;
    daemonMetrics.state = core === undefined ? 'waiting' : 'degraded';
    server.handlers =
      core === undefined
        ? waitingHandlers(proc, outageText, waitingIdentity)
        : degradedHandlers(core.service.handlers, outageText);
    log.warn(
      { err: err.message },
      core === undefined
        ? 'lost PostgreSQL: reconnecting'
        : 'lost PostgreSQL: serving reads from memory and refusing writes (EAGAIN, HTTP 503) while reconnecting',
    );
    void Promise.resolve()
      .then(() => old.close())
      .catch(() => undefined);
    void reconnect(err);
  };
  /** Retries an unreachable PostgreSQL with capped exponential backoff until it answers; a configuration error stops the daemon. */
  const reconnect = async (first: Error): Promise<void> => {
    const since = Date.now();
    let delay = RECONNECT_FIRST_MS;
    let attempts = 0;
    let logged = since;
    let last = first.message;
    while (!stopped) {
      await sleep(delay);
      if (stopped) return;
      delay = Math.min(delay * 2, RECONNECT_MAX_MS);
      attempts++;
      let o: OpenedDaemon;
      try {
        o = await openDaemon(cfg, proc);
      } catch (err) {
        if (stopped) return;
        if (!isUnreachable(err)) {
          log.error(
            { err: (err as Error).message },
            'PostgreSQL answered with an error that retrying cannot fix; stopping',
          );
          process.exit(EXIT_STORE_CONFIG);
        }
        last = (err as Error).message;
        if (Date.now() - logged >= OUTAGE_LOG_EVERY_MS) {
          logged = Date.now();
          log.warn(
            { err: last, attempts, down_s: Math.round((logged - since) / 1000) },
            'PostgreSQL still unreachable',
          );
        }
        continue;
      }
      if (stopped) {
        await (o.core?.store ?? o.standby)?.close();
        return;
      }
      log.info({ attempts, down_ms: Date.now() - since }, 'PostgreSQL is back');
      daemonMetrics.storeReconnects++;
      adopt(o);
      return;
    }
  };
  const storeOf = (): OpenedStore | undefined => current;
  if (path.dirname(socketPath) !== path.resolve(cfg.dataDir)) prepareSocketDir(socketPath);
  // The SQLite store's exclusive lock makes any socket file left here stale. A PostgreSQL store's lock
  // is on the database, not on this data dir: a daemon that still answers here keeps its socket.
  if (cfg.store.kind === 'postgres' && existsSync(socketPath) && (await answers(socketPath))) {
    await (opened?.core?.store ?? opened?.standby)?.close();
    throw new VfsError('EBUSY', 'start', cfg.dataDir, `another mdvfs daemon answers on ${socketPath}`);
  }
  if (opened !== undefined) adopt(opened);
  else if (outage !== undefined) {
    daemonMetrics.state = 'waiting';
    log.warn({ err: outage.message }, 'PostgreSQL unreachable at start: answering EAGAIN (HTTP 503) and reconnecting');
    const first = outage;
    // After the socket listens (below): the first retry is a moment away.
    setImmediate(() => void reconnect(first));
  }
  if (existsSync(socketPath)) unlinkSync(socketPath);
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.server.listen(socketPath, () => resolve());
  });
  chmodSync(socketPath, 0o600); // Security: only the data dir's owner may talk to the daemon
  if (cfg.tcp !== undefined) {
    try {
      late.tcp = await listenTls(cfg.tcp, (sock) => server.accept(sock), log);
    } catch (err) {
      server.server.close();
      await storeOf()?.close();
      if (err instanceof SettingsError) throw err;
      const e = err as NodeJS.ErrnoException;
      throw new VfsError(
        'EIO',
        'listen',
        formatListen(cfg.tcp.listen),
        `cannot listen on ${formatListen(cfg.tcp.listen)} (SERVICE_DAEMON_LISTEN): ${e.code ?? e.message}`,
      );
    }
  }
  // Inode numbers are reused at once on tmpfs: the change time (set by the chmod above) tells files apart.
  const identity = (): string => {
    const st = statSync(socketPath, { bigint: true });
    return `${st.dev}:${st.ino}:${st.ctimeNs}`;
  };
  let socketId = identity();
  /**
   * Whether the file at the socket path is still our listening socket. The identity can also move
   * without a new file (a chmod -R or chown -R of the data dir changes the change time, a hard link
   * or a relabel too), so a moved identity is confirmed by asking whoever listens there for its pid.
   * Doubt (a stat refused, no answer in time) counts as ours: a healthy daemon must not stop.
   */
  const ours = async (): Promise<boolean> => {
    let id: string;
    try {
      id = identity();
    } catch (err) {
      return (err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'ENOTDIR';
    }
    if (id === socketId) return true;
    let client: Awaited<ReturnType<typeof connectSocket>> | undefined;
    try {
      client = await connectSocket(socketPath);
      const ping = client.call('sys.ping', {});
      const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 5000).unref());
      const answer = await Promise.race([ping, timeout]);
      if (answer !== 'timeout' && answer.pid !== process.pid) return false;
      socketId = id;
      return true;
    } catch {
      return false; // nobody listens there: a file that is not our socket
    } finally {
      client?.close();
    }
  };
  const pidFile = path.join(cfg.dataDir, 'daemon.pid');
  writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
  log.info(
    {
      dataDir: cfg.dataDir,
      socket: socketPath,
      ...(late.tcp === undefined ? {} : { listen: formatListen(late.tcp.address) }),
    },
    'daemon ready',
  );
  return {
    socketPath,
    socketGone: async () => !(await ours()),
    clients: () => server.clients,
    onClientsChange: (fn) => {
      server.onClientsChange = fn;
    },
    idleExit,
    reloadTls: () => {
      if (late.tcp === undefined) {
        log.info({}, 'SIGHUP: no SERVICE_DAEMON_LISTEN, nothing to reload');
        return;
      }
      try {
        const next = daemonListenFromEnv();
        if (next === undefined) throw new SettingsError('SERVICE_DAEMON_LISTEN is no longer set');
        late.tcp.reload(next);
        log.info({ listen: formatListen(late.tcp.address) }, 'SIGHUP: reloaded the TLS certificate, key and secret');
      } catch (err) {
        log.error(
          { err: (err as Error).message },
          'SIGHUP: kept the previous TLS certificate, key and secret (the new ones cannot be used)',
        );
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      late.tcp?.close(); // its proven connections are the RPC server's, closed below
      const mine = await ours();
      if (mine) {
        await new Promise<void>((resolve) => {
          server.server.close(() => resolve());
          server.closeAll();
        });
      } else {
        // libuv unlinks a listening socket's path when the server closes: that file is another daemon's
        // now, so the listener is left to the process exit, which removes nothing.
        server.closeAll();
      }
      core?.grep.close();
      await storeOf()?.close();
      try {
        // Never another daemon's: a data dir deleted and made again can have a new daemon on this path.
        if (mine && existsSync(socketPath)) unlinkSync(socketPath);
        if (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() === String(process.pid)) unlinkSync(pidFile);
      } catch {
        // best effort
      }
    },
  };
}

/** Whether a daemon answers a ping on this socket (within 5 s). */
async function answers(socketPath: string): Promise<boolean> {
  let client: Awaited<ReturnType<typeof connectSocket>> | undefined;
  try {
    client = await connectSocket(socketPath);
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 5000).unref());
    return (await Promise.race([client.call('sys.ping', {}), timeout])) !== 'timeout';
  } catch {
    return false;
  } finally {
    client?.close();
  }
}

/** One sentence for `mdvfs daemon` on a data dir whose store another daemon holds, naming its pid when its pid file does. */
function lockedMessage(dataDir: string): string {
  let pid = 0;
  try {
    pid = Number.parseInt(readFileSync(path.join(dataDir, 'daemon.pid'), 'utf8'), 10);
    process.kill(pid, 0); // a pid file left by a killed daemon names no one
  } catch {
    pid = 0;
  }
  const who = pid > 0 ? `another mdvfs daemon (pid ${pid})` : 'another mdvfs daemon';
  return `${who} already runs for ${dataDir}; stop it first ('mdvfs stop') or set another SERVICE_DATA_DIR (EBUSY)`;
}

/** `mdvfs daemon`: foreground until SIGINT/SIGTERM, which flush and exit 0. */
export async function runDaemon(): Promise<void> {
  let cfg: DaemonConfig;
  try {
    cfg = configFromEnv();
  } catch (err) {
    process.stderr.write(`mdvfs daemon: ${(err as Error).message}\n`);
    process.exit(2);
  }
  let daemon: Daemon;
  try {
    daemon = await startDaemon(cfg);
  } catch (err) {
    // EBUSY: the store is locked by another daemon (sqlite.ts), or another daemon (PostgreSQL store)
    // answers on this data dir's socket: say whose it is and what to do.
    const locked = err instanceof VfsError && err.code === 'EBUSY';
    const thisDir = locked && (cfg.store.kind === 'sqlite' || (err.op === 'start' && err.path === cfg.dataDir));
    // A PostgreSQL store's lease message names the database (without its password).
    process.stderr.write(`mdvfs daemon: ${thisDir ? lockedMessage(cfg.dataDir) : (err as Error).message}\n`);
    // A PostgreSQL store that refused us for good (authentication, missing database, bad URL): not worth a restart.
    const storeConfig = err instanceof VfsError && err.code === 'EIO' && err.op === 'open store';
    process.exit(locked ? EXIT_LOCKED : storeConfig ? EXIT_STORE_CONFIG : 1);
  }
  const stop = (sig: string) => {
    process.stderr.write(`mdvfs daemon: ${sig}, flushing and stopping\n`);
    void daemon.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  // With a TLS listener, SIGHUP renews its certificate without a restart (docs/deploy.md); without
  // one, SIGHUP keeps its default (the daemon stops, as a hung-up terminal's process does).
  if (cfg.tcp !== undefined) process.on('SIGHUP', () => daemon.reloadTls());
  // A daemon started in the background by a client exits after SERVICE_IDLE_EXIT seconds with no
  // client, so none lingers on a data dir nobody uses (a mistyped SERVICE_DATA_DIR, say).
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (clients: number): void => {
    clearTimeout(idleTimer);
    idleTimer = undefined;
    const secs = daemon.idleExit();
    if (clients > 0 || secs === 0) return;
    idleTimer = setTimeout(() => {
      if (daemon.clients() === 0 && daemon.idleExit() > 0) stop(`no client for ${secs} s`);
    }, secs * 1000);
    idleTimer.unref();
  };
  daemon.onClientsChange(armIdle);
  armIdle(daemon.clients());
  // A daemon whose socket was removed (its data dir deleted, or the file unlinked) can never be reached
  // again: it stops instead of lingering on a store nobody can see.
  let checking = false;
  const watch = setInterval(() => {
    if (checking) return;
    checking = true;
    void daemon.socketGone().then((gone) => {
      checking = false;
      if (!gone) return;
      clearInterval(watch);
      stop('socket removed');
    });
  }, 2000);
  watch.unref();
  await new Promise<never>(() => {
    // serve until a signal
  });
}

// Run directly (spawned by connectDaemon) as well as through `mdvfs daemon`.
const invoked =
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]).replace(/\.(ts|js)$/, '') ===
    path.resolve(new URL(import.meta.url).pathname).replace(/\.(ts|js)$/, '');
if (invoked) await runDaemon();
