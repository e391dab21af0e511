/**
 * A private PostgreSQL cluster for tests (Debian's `postgresql` package): `initdb` in a temp dir,
 * listening only on a Unix socket in that dir, stopped and removed at teardown. PostgreSQL refuses
 * to run as root, so under root the cluster runs as the unprivileged system user `mdvfs-pg`
 * (created once if missing, and kept: test files running in parallel share it).
 * A test that cannot get PostgreSQL fails with the reason: this never returns a skip.
 *
 *   const pg = await startPostgres(t);
 *   const url = await pg.createDb();           // a fresh, empty database
 *   spawnDaemon(t, { SERVICE_STORE: url });
 *
 * MDVFS_TEST_STORE=postgres runs test suites against PostgreSQL: spawnDaemon (helpers/daemon.ts)
 * then gives every daemon a fresh database in one cluster per test process (testStoreEnv below).
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const execFileP = promisify(execFile);
const PG_USER = 'mdvfs-pg';
/** The database role the tests (and the daemons under test) connect as. */
const ROLE = 'mdvfs';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface PgCluster {
  /** The directory holding the cluster and its socket. */
  dir: string;
  /** The URL of database `db` in this cluster. */
  url(db: string): string;
  /** Creates a fresh empty database and returns its URL. */
  createDb(): Promise<string>;
  /** Runs one SQL statement on database `db` and returns its rows. */
  query(db: string, sql: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
  /** Stops the server (`pg_ctl stop -m fast`: sessions end, connections are refused) and keeps its files. */
  pause(): Promise<void>;
  /** Starts the paused server again, on the same socket and data. */
  resume(): Promise<void>;
}

/** The directory of initdb and pg_ctl: the newest /usr/lib/postgresql/<v>/bin, else PATH. */
function binDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base).filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
    : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length > 0) return path.join(base, versions[0]!, 'bin');
  for (const d of (process.env.PATH ?? '').split(':'))
    if (d !== '' && existsSync(path.join(d, 'initdb')) && existsSync(path.join(d, 'pg_ctl'))) return d;
  throw new Error(
    'PostgreSQL is not installed: no initdb in /usr/lib/postgresql/*/bin or on PATH (Debian: apt-get install postgresql)',
  );
}

async function ensureUser(): Promise<void> {
  try {
    await execFileP('id', ['-u', PG_USER]);
    return;
  } catch {
    // create it below
  }
  try {
    await execFileP('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', PG_USER]);
  } catch (err) {
    // another test file may have created it at the same moment
    try {
      await execFileP('id', ['-u', PG_USER]);
    } catch {
      throw new Error(
        `cannot create the unprivileged user ${PG_USER} that runs PostgreSQL for the tests: ${(err as Error).message}`,
      );
    }
  }
}

/** Starts a private cluster; stops it and removes its files at teardown. */
export async function startPostgres(t: Teardown): Promise<PgCluster> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await ensureUser();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-pg-'));
  const data = path.join(dir, 'data');
  const ids = asRoot
    ? {
        uid: Number((await execFileP('id', ['-u', PG_USER])).stdout),
        gid: Number((await execFileP('id', ['-g', PG_USER])).stdout),
      }
    : undefined;
  if (ids !== undefined) chownSync(dir, ids.uid, ids.gid);
  // `env -u NODE_OPTIONS`: nothing of tap's loader reaches PostgreSQL's tools.
  const run = async (cmd: string, args: string[]): Promise<void> => {
    const argv = asRoot
      ? ['runuser', '-u', PG_USER, '--', 'env', '-u', 'NODE_OPTIONS', path.join(bin, cmd), ...args]
      : ['env', '-u', 'NODE_OPTIONS', path.join(bin, cmd), ...args];
    try {
      await execFileP(argv[0]!, argv.slice(1), {
        cwd: '/',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' },
      });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`PostgreSQL ${cmd} failed: ${e.stderr?.trim() || e.message}`);
    }
  };
  let running = false;
  const stop = async (): Promise<void> => {
    if (running) {
      running = false;
      await run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() =>
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']),
      );
    }
    rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  await run('initdb', [
    '-D',
    data,
    '-U',
    ROLE,
    '--auth=trust',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-instructions',
    '--no-sync',
  ]);
  const start = (): Promise<void> =>
    run('pg_ctl', [
      '-D',
      data,
      '-l',
      path.join(dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      `-c listen_addresses='' -c unix_socket_directories='${dir}' -c max_connections=200 -c fsync=on -c synchronous_commit=on`,
      'start',
    ]);
  await start();
  running = true;
  const url = (db: string): string => `postgres://${ROLE}@localhost/${db}?host=${encodeURIComponent(dir)}`;
  const query = async (db: string, sql: string, values: unknown[] = []): Promise<Record<string, unknown>[]> => {
    const c = new pg.Client({ connectionString: url(db) });
    await c.connect();
    try {
      return (await c.query(sql, values)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };
  let n = 0;
  return {
    dir,
    url,
    async createDb() {
      const name = `mdvfs_${process.pid}_${++n}`;
      await query('postgres', `CREATE DATABASE ${name}`);
      return url(name);
    },
    query,
    stop,
    async pause() {
      if (!running) return;
      running = false;
      await run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
    },
    async resume() {
      if (running) return;
      await start();
      running = true;
    },
  };
}

let shared: Promise<PgCluster> | undefined;
const dbOf = new Map<string, Promise<string>>();

/**
 * The environment that points the daemon of `dataDir` at the store the test run asks for: nothing
 * for SQLite (the default), or SERVICE_STORE with a database of its own (the same one on every
 * start for that data dir) when MDVFS_TEST_STORE=postgres.
 */
export async function testStoreEnv(dataDir: string): Promise<NodeJS.ProcessEnv> {
  const want = process.env.MDVFS_TEST_STORE ?? '';
  if (want === '' || want === 'sqlite') return {};
  if (want !== 'postgres') throw new Error(`MDVFS_TEST_STORE must be sqlite or postgres, got '${want}'`);
  if (shared === undefined) {
    // One cluster per test process, stopped when the process's root test ends.
    const { default: tap } = await import('tap');
    shared = startPostgres(tap);
  }
  const cluster = shared;
  const key = path.resolve(dataDir);
  let db = dbOf.get(key);
  if (db === undefined) {
    db = cluster.then((c) => c.createDb());
    dbOf.set(key, db);
  }
  return { SERVICE_STORE: await db };
}
