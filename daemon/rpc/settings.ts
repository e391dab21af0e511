/**
 * The service's SERVICE_* settings, each parsed in exactly one function here, used by the daemon
 * and by the front ends (it lives under daemon/rpc so that the front ends may import it).
 * A bad value throws a SettingsError whose message is one line naming the variable and the fix.
 */
import { readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AuthPolicy } from './protocol.js';

export class SettingsError extends Error {
  /** Every bad setting is an invalid argument: the message names the variable and its value. */
  readonly code = 'EINVAL';
}

/**
 * The exit code of a daemon whose SERVICE_STORE cannot work as set (bad URL, authentication
 * refused, missing database), as for any bad setting: `mdvfs serve` reports it and stops instead
 * of restarting the daemon. (An unreachable PostgreSQL is not one: the daemon waits for it.)
 */
export const EXIT_STORE_CONFIG = 2;

export type ServiceMode = 'local' | 'hosted';

export interface ListenAddress {
  host: string;
  port: number;
}

const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_PORT = 3000;
/**
 * 256 MiB: room for the git packs and SQLite databases a notes repository holds (10 MiB broke both),
 * while one file still passes through every front end in memory (the mount's buffer, the socket
 * message, the daemon's blob: about three copies while it is written).
 */
export const DEFAULT_MAX_FILE_SIZE = 256 * 1024 * 1024;

type Env = NodeJS.ProcessEnv;

/**
 * Every SERVICE_* variable the service reads: the README's settings table lists exactly these (a
 * test compares them), and the parsers below take their names from this type.
 */
export const SETTINGS = [
  'SERVICE_MODE',
  'SERVICE_LISTEN',
  'SERVICE_HTTP_WORKERS',
  'SERVICE_CORS_ORIGINS',
  'SERVICE_DATA_DIR',
  'SERVICE_MAX_FILE_SIZE',
  'SERVICE_FSYNC',
  'SERVICE_ANONYMOUS',
  'SERVICE_USER_AUTH',
  'SERVICE_REGEX_TIMEOUT_MS',
  'SERVICE_IDLE_EXIT',
  'SERVICE_STORE',
  'SERVICE_LEASE_TIMEOUT_MS',
  'SERVICE_DAEMONS',
  'SERVICE_DAEMON_LISTEN',
  'SERVICE_DAEMON_TLS_CERT',
  'SERVICE_DAEMON_TLS_KEY',
  'SERVICE_DAEMON_TLS_CA',
  'SERVICE_DAEMON_SECRET_FILE',
  'SERVICE_AS_USER',
  'SERVICE_TOKEN',
  'SERVICE_ON_BEHALF_OF',
  'SERVICE_WORKSPACE',
  'SERVICE_URL',
  'SERVICE_MCP_SESSION_TTL',
  'SERVICE_MCP_MAX_SESSIONS',
  'SERVICE_MCP_MAX_SESSIONS_PER_CLIENT',
  'SERVICE_MCP_MAX_SESSIONS_PER_USER',
  'SERVICE_MCP_MAX_RESOURCES',
  'SERVICE_EVENTS_MAX_STREAMS',
  'SERVICE_EVENTS_MAX_STREAMS_PER_USER',
  'SERVICE_MAX_WORKSPACES_PER_USER',
  'SERVICE_MAX_WORKSPACE_SECRETS_PER_USER',
  'SERVICE_LOG_LEVEL',
] as const;
export type SettingName = (typeof SETTINGS)[number];

/** SERVICE_MODE: `local` (default) or `hosted`. */
export function modeFromEnv(env: Env = process.env): ServiceMode {
  const v = (env.SERVICE_MODE ?? '').trim();
  if (v === '' || v === 'local') return 'local';
  if (v === 'hosted') return 'hosted';
  throw new SettingsError(`SERVICE_MODE must be local or hosted, got '${v.slice(0, 64)}'`);
}

/**
 * SERVICE_ANONYMOUS and SERVICE_USER_AUTH, applied by the daemon to requests that came over the
 * network. Their defaults follow SERVICE_MODE: local keeps the contract's (anonymous is root, the
 * User scheme works); hosted denies anonymous requests and the User scheme. Explicit values win.
 */
export function authPolicyFromEnv(env: Env = process.env): AuthPolicy {
  const hosted = modeFromEnv(env) === 'hosted';
  const anon = env.SERVICE_ANONYMOUS || (hosted ? 'deny' : 'root');
  if (anon !== 'root' && anon !== 'deny')
    throw new SettingsError(`SERVICE_ANONYMOUS must be root or deny, got '${anon.slice(0, 64)}'`);
  const userAuth = env.SERVICE_USER_AUTH || (hosted ? 'off' : 'on');
  if (userAuth !== 'on' && userAuth !== 'off')
    throw new SettingsError(`SERVICE_USER_AUTH must be on or off, got '${userAuth.slice(0, 64)}'`);
  return { anonymous: anon, userAuth: userAuth === 'on', ...(hosted ? { hosted: true } : {}) };
}

/** A whole number setting (empty or unset: the default). */
export function intFromEnv(env: Env, name: SettingName, dflt: number, min = 0): number {
  const v = env[name]?.trim();
  if (v === undefined || v === '') return dflt;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min)
    throw new SettingsError(
      `${name} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got '${v.slice(0, 64)}'`,
    );
  return Number(v);
}

/** SERVICE_FSYNC: `full` (default: survives power loss), `normal` (survives process crashes) or `off`. */
export type Fsync = 'full' | 'normal' | 'off';
export function fsyncFromEnv(env: Env = process.env): Fsync {
  const v = (env.SERVICE_FSYNC ?? '').trim();
  if (v === '') return 'full';
  if (v === 'full' || v === 'normal' || v === 'off') return v;
  throw new SettingsError(`SERVICE_FSYNC must be full, normal or off, got '${v.slice(0, 64)}'`);
}

/** How much a process logs; each level includes those before it. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * SERVICE_LOG_LEVEL: `error`, `warn`, `info` (default) or `debug`, for the daemon and the HTTP
 * workers alike. One line per HTTP request is written at `debug` only (docs/deploy.md, "Logs").
 */
export function logLevelFromEnv(env: Env = process.env): LogLevel {
  const v = (env.SERVICE_LOG_LEVEL ?? '').trim();
  if (v === '') return 'info';
  const level = LOG_LEVELS.find((l) => l === v);
  if (level === undefined)
    throw new SettingsError(`SERVICE_LOG_LEVEL must be error, warn, info or debug, got '${v.slice(0, 64)}'`);
  return level;
}

/** SERVICE_MCP_MAX_RESOURCES: files listed by MCP `resources/list` (default 5000). */
export function mcpMaxResourcesFromEnv(env: Env = process.env): number {
  return intFromEnv(env, 'SERVICE_MCP_MAX_RESOURCES', 5000, 1);
}

/** SERVICE_MAX_FILE_SIZE in bytes (default 256 MiB). */
export function maxFileSizeFromEnv(env: Env = process.env): number {
  return intFromEnv(env, 'SERVICE_MAX_FILE_SIZE', DEFAULT_MAX_FILE_SIZE);
}

/**
 * SERVICE_IDLE_EXIT: seconds a daemon started in the background (by the CLI, `mdvfs mount` or
 * `mdvfs-mcp`) waits with no client before it exits (default 300; 0 = never). A daemon run in the
 * foreground (`mdvfs daemon`, or by a live `mdvfs serve`) never exits for being idle.
 */
export function idleExitFromEnv(env: Env = process.env): number {
  return intFromEnv(env, 'SERVICE_IDLE_EXIT', 300);
}

/** `host:port`, `[v6]:port`, `:port` or `port` (host defaults to 127.0.0.1); null when it is none of these. */
function hostPort(v: string): ListenAddress | null {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(v) ?? /^()()(\d{1,5})$/.exec(v);
  const port = Number(m?.[3]);
  if (!m || !Number.isInteger(port) || port > 65535) return null;
  return { host: m[1] || m[2] || DEFAULT_HOST, port };
}

/** SERVICE_LISTEN: `host:port`, `[v6]:port`, `:port` or `port` (host defaults to 127.0.0.1). */
export function parseListen(value: string | undefined): ListenAddress {
  const v = (value ?? '').trim();
  if (v === '') return { host: DEFAULT_HOST, port: DEFAULT_PORT };
  const a = hostPort(v);
  if (a === null) throw new SettingsError(`SERVICE_LISTEN must be host:port (got '${v.slice(0, 100)}')`);
  return a;
}

export function formatListen(a: ListenAddress): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** `localhost`, `127.x.x.x` or `::1` (brackets allowed). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/**
 * SERVICE_CORS_ORIGINS: comma-separated exact origins `scheme://host[:port]`, as browsers send
 * them in `Origin` (default ports dropped, lowercase). `*` is refused: that is hosted mode.
 */
export function corsOriginsFromEnv(env: Env = process.env): ReadonlySet<string> {
  const out = new Set<string>();
  for (const raw of (env.SERVICE_CORS_ORIGINS ?? '').split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const bad = (why: string): never => {
      throw new SettingsError(
        `SERVICE_CORS_ORIGINS: '${entry.slice(0, 100)}' is not an origin (${why}); list origins like https://app.example.com or http://localhost:5173, separated by commas`,
      );
    };
    if (entry === '*') bad('use SERVICE_MODE=hosted for a server every origin may call');
    if (!/^https?:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(entry))
      bad('scheme://host[:port], nothing after the port');
    let origin: string;
    try {
      origin = new URL(entry).origin;
    } catch {
      return bad('not a valid URL');
    }
    out.add(origin);
  }
  return out;
}

/**
 * SERVICE_HTTP_WORKERS: how many HTTP sidecar processes `mdvfs serve` runs on the listen address
 * (default: one per core but one, which the daemon keeps; at least 1, and at least 2 with
 * SERVICE_DAEMONS, so that the port stays open while a worker restarts after losing its daemon).
 */
const MAX_HTTP_WORKERS = 256;
export function httpWorkersFromEnv(env: Env = process.env): number {
  const least = (env.SERVICE_DAEMONS ?? '').trim() === '' ? 1 : 2;
  const n = intFromEnv(env, 'SERVICE_HTTP_WORKERS', Math.max(least, os.availableParallelism() - 1), 1);
  if (n > MAX_HTTP_WORKERS)
    throw new SettingsError(`SERVICE_HTTP_WORKERS must be at most ${MAX_HTTP_WORKERS}, got '${n}'`);
  return n;
}

/** Everything the HTTP sidecar needs (`mdvfs serve`, `mdvfs http`), checked together at start. */
export interface HttpSettings {
  mode: ServiceMode;
  listen: ListenAddress;
  corsOrigins: ReadonlySet<string>;
  /** The policy the sidecar declares to the daemon with every request (see Creds.policy). */
  policy: AuthPolicy;
  maxFileSize: number;
  mcp: McpSessionSettings;
  /** SERVICE_HTTP_WORKERS (`mdvfs serve`). */
  workers: number;
  /** SERVICE_LOG_LEVEL. */
  logLevel: LogLevel;
}

export interface McpSessionSettings {
  /** SERVICE_MCP_SESSION_TTL (seconds, default 1800), in ms. */
  idleMs: number;
  /** SERVICE_MCP_MAX_SESSIONS (default 1000): live sessions in all; beyond it new ones are refused. */
  maxSessions: number;
  /** SERVICE_MCP_MAX_SESSIONS_PER_CLIENT (default 16): live sessions per credential (or per anonymous client address). */
  maxSessionsPerClient: number;
  /**
   * SERVICE_MCP_MAX_SESSIONS_PER_USER (default 64, at most half of SERVICE_MCP_MAX_SESSIONS unless
   * set): live sessions per authenticated user or agent, all its credentials together (token,
   * workspace secrets, delegations); a user over it loses its own least recently used session.
   */
  maxSessionsPerUser: number;
}

/**
 * A per-user cap (default `dflt`, or half the cap in all when that is lower). Security: it must stay
 * below the cap in all, so that one user at its own cap never fills the server alone; the cap in
 * all is only the last resort against many users at once.
 */
function perUserCap(env: Env, name: SettingName, dflt: number, total: SettingName, all: number): number {
  const mine = intFromEnv(env, name, Math.max(1, Math.min(dflt, Math.floor(all / 2))), 1);
  if (mine >= all)
    throw new SettingsError(
      `${name} (${mine}) must be below ${total} (${all}), so that one user cannot fill the server alone; lower ${name} or raise ${total}`,
    );
  return mine;
}

export function mcpSessionsFromEnv(env: Env = process.env): McpSessionSettings {
  const maxSessions = intFromEnv(env, 'SERVICE_MCP_MAX_SESSIONS', 1000, 2);
  return {
    idleMs: intFromEnv(env, 'SERVICE_MCP_SESSION_TTL', 1800, 1) * 1000,
    maxSessions,
    maxSessionsPerClient: intFromEnv(env, 'SERVICE_MCP_MAX_SESSIONS_PER_CLIENT', 16, 1),
    maxSessionsPerUser: perUserCap(
      env,
      'SERVICE_MCP_MAX_SESSIONS_PER_USER',
      64,
      'SERVICE_MCP_MAX_SESSIONS',
      maxSessions,
    ),
  };
}

/**
 * What one principal may hold or create in the daemon (docs/security.md, "Caps"). A principal is the
 * authenticated user or agent: its tokens, workspace secrets and delegations all count as it.
 */
export interface PrincipalCaps {
  /** SERVICE_EVENTS_MAX_STREAMS (default 256): `GET /events` streams in all (the last resort). */
  eventStreams: number;
  /** SERVICE_EVENTS_MAX_STREAMS_PER_USER (default 16, at most half the total unless set): `GET /events` streams per user; beyond it, refused. */
  eventStreamsPerUser: number;
  /** SERVICE_MAX_WORKSPACES_PER_USER (default 100): workspaces one user owns (root: no bound). */
  workspacesPerUser: number;
  /** SERVICE_MAX_WORKSPACE_SECRETS_PER_USER (default 1000): secrets of the workspaces one user owns (root: no bound). */
  workspaceSecretsPerUser: number;
}

export const DEFAULT_PRINCIPAL_CAPS: PrincipalCaps = {
  eventStreams: 256,
  eventStreamsPerUser: 16,
  workspacesPerUser: 100,
  workspaceSecretsPerUser: 1000,
};

/** The daemon's per-principal caps (see PrincipalCaps). */
export function principalCapsFromEnv(env: Env = process.env): PrincipalCaps {
  const d = DEFAULT_PRINCIPAL_CAPS;
  const eventStreams = intFromEnv(env, 'SERVICE_EVENTS_MAX_STREAMS', d.eventStreams, 2);
  return {
    eventStreams,
    eventStreamsPerUser: perUserCap(
      env,
      'SERVICE_EVENTS_MAX_STREAMS_PER_USER',
      d.eventStreamsPerUser,
      'SERVICE_EVENTS_MAX_STREAMS',
      eventStreams,
    ),
    workspacesPerUser: intFromEnv(env, 'SERVICE_MAX_WORKSPACES_PER_USER', d.workspacesPerUser),
    workspaceSecretsPerUser: intFromEnv(env, 'SERVICE_MAX_WORKSPACE_SECRETS_PER_USER', d.workspaceSecretsPerUser),
  };
}

/**
 * The sidecar's settings. Security: in local mode anonymous requests run as root, so the server
 * must only be reachable from this machine: a non-loopback SERVICE_LISTEN refuses to start.
 */
export function httpSettingsFromEnv(env: Env = process.env): HttpSettings {
  const mode = modeFromEnv(env);
  const listen = parseListen(env.SERVICE_LISTEN);
  if (mode === 'local' && !isLoopbackHost(listen.host)) {
    throw new SettingsError(
      `refusing to listen on ${formatListen(listen)}: in local mode (the default) requests without credentials act as root, so the server only listens on loopback; set SERVICE_LISTEN=127.0.0.1:${listen.port}, or SERVICE_MODE=hosted to require bearer tokens and listen anywhere`,
    );
  }
  return {
    mode,
    listen,
    corsOrigins: corsOriginsFromEnv(env),
    policy: authPolicyFromEnv(env),
    maxFileSize: maxFileSizeFromEnv(env),
    mcp: mcpSessionsFromEnv(env),
    workers: httpWorkersFromEnv(env),
    logLevel: logLevelFromEnv(env),
  };
}

/** Where the daemon keeps its durable state: SQLite in the data dir (default) or PostgreSQL. */
export type StoreSetting = { kind: 'sqlite' } | { kind: 'postgres'; url: string };

/**
 * SERVICE_STORE: unset, empty or `sqlite` (SERVICE_DATA_DIR/store.db), or a `postgres://…`
 * (`postgresql://…`) connection URL. Security: the URL may hold a password; messages never repeat it.
 */
export function storeFromEnv(env: Env = process.env): StoreSetting {
  const v = (env.SERVICE_STORE ?? '').trim();
  if (v === '' || v === 'sqlite') return { kind: 'sqlite' };
  if (/^postgres(ql)?:\/\//i.test(v)) {
    if (pgUrl(v) === undefined)
      throw new SettingsError(
        'SERVICE_STORE is not a valid postgres:// URL (its value is not shown: it may hold a password)',
      );
    return { kind: 'postgres', url: v };
  }
  throw new SettingsError(
    'SERVICE_STORE must be sqlite or a postgres://user@host/db URL (its value is not shown: it may hold a password)',
  );
}

/**
 * The store named without credentials (for status and messages): `sqlite`, or
 * `postgres://host[:port]/db` with the socket directory of a `?host=` parameter, never the user or password.
 */
export function storeLabel(s: StoreSetting): string {
  if (s.kind === 'sqlite') return 'sqlite';
  const u = pgUrl(s.url);
  if (u === undefined) return 'postgres://(an unparsable URL)';
  const host = u.searchParams.get('host');
  return `postgres://${u.host}${u.pathname}${host === null ? '' : `?host=${encodeURIComponent(host)}`}`;
}

/** The default of SERVICE_LEASE_TIMEOUT_MS. */
export const DEFAULT_LEASE_TIMEOUT_MS = 10000;

/**
 * SERVICE_LEASE_TIMEOUT_MS (PostgreSQL store): how long a daemon that stopped answering PostgreSQL
 * (paused, or its machine unreachable) keeps the lease before the server ends its session and a
 * standby may take over. A daemon killed outright frees the lease at once.
 */
export function leaseTimeoutFromEnv(env: Env = process.env): number {
  return intFromEnv(env, 'SERVICE_LEASE_TIMEOUT_MS', DEFAULT_LEASE_TIMEOUT_MS, 1000);
}

/**
 * Where a front end reaches a daemon: its Unix socket (same machine), or a TCP address served with
 * TLS and a shared secret (another machine; daemon/rpc/tcp.ts). Written `/abs/daemon.sock` or
 * `tls://host:port` (`tls://[v6]:port`), as in SERVICE_DAEMONS.
 */
export type DaemonAddress = { kind: 'unix'; path: string } | { kind: 'tls'; host: string; port: number };

export function formatDaemonAddress(a: DaemonAddress): string {
  return a.kind === 'unix' ? a.path : `tls://${formatListen(a)}`;
}

/** One entry of SERVICE_DAEMONS. */
function parseDaemonAddress(raw: string): DaemonAddress {
  const v = raw.trim();
  if (v.startsWith('/')) return { kind: 'unix', path: v };
  const m = /^tls:\/\/(.+)$/i.exec(v);
  const a = m === null || /^:|^\d+$/.test(m[1]!) ? null : hostPort(m[1]!);
  if (a === null)
    throw new SettingsError(
      `SERVICE_DAEMONS must list daemon addresses separated by commas, each an absolute socket path or tls://host:port, got '${v.slice(0, 100)}'`,
    );
  return { kind: 'tls', ...a };
}

/**
 * SERVICE_DAEMONS: comma-separated addresses of several daemons on one PostgreSQL store (one
 * active, the others standbys): socket paths, and `tls://host:port` for daemons on other machines.
 * Front ends connect to the one that is active, and after losing it to the one that is active then.
 * Empty: the daemon of SERVICE_DATA_DIR.
 */
export function daemonsFromEnv(env: Env = process.env): DaemonAddress[] {
  const v = (env.SERVICE_DAEMONS ?? '').trim();
  if (v === '') return [];
  return v.split(',').map(parseDaemonAddress);
}

/** The least a shared secret may hold, in bytes (`openssl rand -hex 32` makes 64). */
export const MIN_SECRET_BYTES = 32;

const TLS_SETTINGS = [
  'SERVICE_DAEMON_TLS_CERT',
  'SERVICE_DAEMON_TLS_KEY',
  'SERVICE_DAEMON_TLS_CA',
  'SERVICE_DAEMON_SECRET_FILE',
] as const satisfies readonly SettingName[];

/**
 * A file a setting names, read whole. `secret`: like ssh with a private key, a file another user
 * could read (or that belongs to another user) is refused, since whoever reads it can act as root.
 */
function settingFile(env: Env, name: SettingName, secret: boolean): Buffer {
  const p = path.resolve((env[name] ?? '').trim());
  let data: Buffer;
  try {
    const st = statSync(p);
    if (!st.isFile()) throw new SettingsError(`${name}: ${p} is not a regular file`);
    if (secret && st.uid !== (process.getuid?.() ?? 0))
      throw new SettingsError(
        `${name}: ${p} belongs to uid ${st.uid}, not to you (uid ${process.getuid?.() ?? 0}); refusing a secret another user controls`,
      );
    if (secret && (st.mode & 0o077) !== 0)
      throw new SettingsError(
        `${name}: ${p} is open to other users (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}); refusing a secret others can read: chmod 600 ${p}`,
      );
    data = readFileSync(p);
  } catch (err) {
    if (err instanceof SettingsError) throw err;
    throw new SettingsError(`${name}: cannot read ${p} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return data;
}

/** SERVICE_DAEMON_SECRET_FILE's secret: the file's bytes without surrounding whitespace, at least MIN_SECRET_BYTES of them. */
function secretFromEnv(env: Env): Buffer {
  const raw = settingFile(env, 'SERVICE_DAEMON_SECRET_FILE', true);
  const text = raw.toString('latin1').trim();
  if (text.length < MIN_SECRET_BYTES)
    throw new SettingsError(
      `SERVICE_DAEMON_SECRET_FILE: ${path.resolve(env.SERVICE_DAEMON_SECRET_FILE!.trim())} holds ${text.length === 0 ? 'no secret' : `a secret of ${text.length} bytes`}; it needs at least ${MIN_SECRET_BYTES} (make one with: openssl rand -hex 32 > file; chmod 600 file)`,
    );
  return Buffer.from(text, 'latin1');
}

/** What a front end needs to reach a daemon at a tls:// address. */
export interface DaemonTlsClientSettings {
  /** SERVICE_DAEMON_TLS_CA: the only CA whose certificates (for the address's host name) are believed. */
  ca: Buffer;
  /** SERVICE_DAEMON_SECRET_FILE's contents. */
  secret: Buffer;
}

/** The TLS listener of a daemon: SERVICE_DAEMON_LISTEN with its certificate, key, CA and secret. */
export interface DaemonTlsServerSettings extends DaemonTlsClientSettings {
  listen: ListenAddress;
  cert: Buffer;
  key: Buffer;
}

function requireSettings(env: Env, names: readonly SettingName[], why: string): void {
  const missing = names.filter((n) => (env[n] ?? '').trim() === '');
  if (missing.length > 0)
    throw new SettingsError(`${why} needs ${names.join(', ')}; missing: ${missing.join(', ')} (see docs/deploy.md)`);
}

/**
 * A front end's settings for the tls:// entries of SERVICE_DAEMONS: SERVICE_DAEMON_TLS_CA and
 * SERVICE_DAEMON_SECRET_FILE. Never a secret in the environment or on a command line: only a file's name.
 */
export function daemonTlsClientFromEnv(env: Env = process.env): DaemonTlsClientSettings {
  requireSettings(env, ['SERVICE_DAEMON_TLS_CA', 'SERVICE_DAEMON_SECRET_FILE'], 'a tls:// address in SERVICE_DAEMONS');
  return { ca: settingFile(env, 'SERVICE_DAEMON_TLS_CA', false), secret: secretFromEnv(env) };
}

/**
 * SERVICE_DAEMON_LISTEN=host:port: the daemon also listens there, with TLS (1.3) and the shared
 * secret, for front ends on other machines. Unset: the Unix socket only. Refused (one line naming
 * what is missing) without SERVICE_DAEMON_TLS_CERT, _KEY, _CA and SERVICE_DAEMON_SECRET_FILE.
 */
export function daemonListenFromEnv(env: Env = process.env): DaemonTlsServerSettings | undefined {
  const v = (env.SERVICE_DAEMON_LISTEN ?? '').trim();
  if (v === '') return undefined;
  const listen = /^\d+$/.test(v) ? null : hostPort(v);
  if (listen === null)
    throw new SettingsError(`SERVICE_DAEMON_LISTEN must be host:port, e.g. 10.0.0.5:7070 (got '${v.slice(0, 100)}')`);
  requireSettings(env, TLS_SETTINGS, 'SERVICE_DAEMON_LISTEN');
  return {
    listen,
    cert: settingFile(env, 'SERVICE_DAEMON_TLS_CERT', false),
    key: settingFile(env, 'SERVICE_DAEMON_TLS_KEY', true),
    ca: settingFile(env, 'SERVICE_DAEMON_TLS_CA', false),
    secret: secretFromEnv(env),
  };
}

/** A connection URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  const u = pgUrl(url);
  if (u === undefined) return '(an unparsable URL)';
  if (u.password !== '') u.password = '***';
  for (const k of [...u.searchParams.keys()]) if (/pass/i.test(k)) u.searchParams.set(k, '***');
  return u.toString();
}

/**
 * A PostgreSQL connection URL as a URL, including libpq's form with no host before the database
 * (`postgres://user@/db?host=/run/postgresql`, a Unix socket), which WHATWG URLs refuse: it is read
 * as host `localhost`, which the `host` parameter overrides in libpq and node-postgres alike.
 */
function pgUrl(v: string): URL | undefined {
  const m = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?(?=[/?#]|$)/i.exec(v);
  try {
    return new URL(m === null ? v : `${m[1]}${m[2] ?? ''}localhost${v.slice(m[0].length)}`);
  } catch {
    return undefined;
  }
}
