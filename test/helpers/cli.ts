/**
 * Helpers for the CLI tests: run the built `mdvfs` as a subprocess against a temp data dir (the
 * first command starts the background daemon; teardown stops it), and drive `mdvfs shell` through
 * a real pseudo-terminal like a person would.
 *
 *   const cli = await cliEnv(t);
 *   const r = await cli.run(['ls', '-l'], { user: 'alice' });
 *   t.equal(r.code, 0);
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectDaemon } from '../../daemon/rpc/connect.js';
import type { DaemonClient } from '../../daemon/rpc/client.js';
import { testStoreEnv } from './postgres.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
// MDVFS_TEST_DIST lets a developer test another build (e.g. the unfixed one), as the other helpers do.
export const CLI = path.join(process.env.MDVFS_TEST_DIST ?? path.join(ROOT, 'dist'), 'cli', 'main.js');

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  out: Buffer;
}

export interface RunOptions {
  user?: string;
  token?: string;
  input?: string | Buffer;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export interface CliEnv {
  dataDir: string;
  env: NodeJS.ProcessEnv;
  run(args: string[], opts?: RunOptions): Promise<RunResult>;
  /** A direct daemon connection (root) for setup and for checking what the CLI did. */
  client(): Promise<DaemonClient>;
  /** The pid of the background daemon the CLI started. */
  daemonPid(): Promise<number>;
}

export function tempDir(t: Teardown, prefix = 'mdvfs-cli-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Runs `node dist/cli/main.js ...args` and collects its exit code and output. */
export function runCli(env: NodeJS.ProcessEnv, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const e: NodeJS.ProcessEnv = { ...env, ...opts.env };
  if (opts.user !== undefined) e.SERVICE_AS_USER = opts.user;
  if (opts.token !== undefined) e.SERVICE_TOKEN = opts.token;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], {
      env: e,
      cwd: opts.cwd ?? ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on('data', (b: Buffer) => out.push(b));
    p.stderr.on('data', (b: Buffer) => err.push(b));
    p.on('error', reject);
    p.on('close', (code) => {
      const o = Buffer.concat(out);
      resolve({ code, stdout: o.toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), out: o });
    });
    p.stdin.end(opts.input);
  });
}

/** A fresh data dir; the daemon the CLI auto-starts for it is stopped at teardown. */
export async function cliEnv(t: Teardown, extraEnv: NodeJS.ProcessEnv = {}): Promise<CliEnv> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-cli-'));
  // The shell keeps its history under XDG_STATE_HOME: one per test, never the real home's.
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-cli-state-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SERVICE_DATA_DIR: dataDir,
    XDG_STATE_HOME: stateDir,
    ...(await testStoreEnv(dataDir)),
    ...extraEnv,
  };
  for (const k of ['SERVICE_AS_USER', 'SERVICE_TOKEN', 'SERVICE_ON_BEHALF_OF', 'SERVICE_WORKSPACE', 'SERVICE_URL'])
    if (!(k in extraEnv)) delete env[k];
  let client: DaemonClient | undefined;
  const getClient = async (): Promise<DaemonClient> => {
    if (client) return client;
    // Under the test runner this module is TypeScript, so let the built CLI start the daemon.
    const c = await connectDaemon({ dataDir, spawn: false }).catch(async () => {
      await runCli(env, ['whoami']);
      return connectDaemon({ dataDir, spawn: false });
    });
    client = c;
    return c;
  };
  const daemonPid = async (): Promise<number> => {
    const pidFile = path.join(dataDir, 'daemon.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0) return pid;
    }
    return (await (await getClient()).call('sys.ping', {})).pid;
  };
  t.teardown(async () => {
    let pid: number | undefined;
    try {
      pid = await daemonPid();
    } catch {
      // no daemon was ever started
    }
    client?.close();
    if (pid !== undefined && alive(pid)) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + 5000;
      while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });
  return {
    dataDir,
    env,
    run: (args, opts) => runCli(env, args, opts),
    client: getClient,
    daemonPid,
  };
}

/** Polls `fn` until it returns true or `ms` pass; returns whether it became true. */
export async function until(fn: () => Promise<boolean> | boolean, ms = 2000, every = 25): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await fn()) return true;
    } catch {
      // not yet
    }
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, every));
  }
}

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r/g;

/** Terminal output without escape sequences and carriage returns. */
export function plain(s: string): string {
  return s.replace(ANSI, '');
}

export interface ShellPty {
  /** Everything the terminal showed so far, escape sequences removed. */
  screen(): string;
  /** Output since the last `mark()`. */
  sinceMark(): string;
  mark(): void;
  write(s: string): void;
  /** Waits until the output since the last mark matches; fails with the screen in the message. */
  expect(what: string | RegExp, ms?: number): Promise<string>;
  exited: Promise<{ exitCode: number; signal?: number }>;
  kill(): void;
}

/** Starts `mdvfs shell` in a pseudo-terminal (node-pty). */
export async function spawnShell(t: Teardown, env: NodeJS.ProcessEnv, args: string[] = []): Promise<ShellPty> {
  const pty = await import('node-pty');
  const p = pty.spawn(process.execPath, [CLI, 'shell', ...args], {
    name: 'xterm-256color',
    cols: 120,
    rows: 40,
    cwd: ROOT,
    env: env as Record<string, string>,
  });
  let raw = '';
  let markAt = 0;
  p.onData((d) => {
    raw += d;
  });
  const exited = new Promise<{ exitCode: number; signal?: number }>((resolve) => p.onExit((e) => resolve(e)));
  let done = false;
  void exited.then(() => (done = true));
  t.teardown(() => {
    if (!done) p.kill();
  });
  const self: ShellPty = {
    screen: () => plain(raw),
    sinceMark: () => plain(raw.slice(markAt)),
    mark: () => {
      markAt = raw.length;
    },
    write: (s) => p.write(s),
    async expect(what, ms = 10000) {
      const ok = await until(
        () => (typeof what === 'string' ? self.sinceMark().includes(what) : what.test(self.sinceMark())),
        ms,
      );
      if (!ok) throw new Error(`terminal never showed ${String(what)}; it shows:\n${self.sinceMark()}`);
      return self.sinceMark();
    },
    exited,
    kill: () => p.kill(),
  };
  return self;
}
