/**
 * Helpers for the FUSE tests: a real daemon (`node dist/cli/main.js daemon`) on a temp data dir, a root
 * connection to it for setup, real mounts (`node dist/cli/main.js mount`, a child process, so this test
 * process may touch the mountpoint however it likes), and real programs run through bash.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { connectSocket, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { loadLowLevel } from '../../fuse/lowlevel/native.js';
import { testStoreEnv } from './postgres.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT, 'dist', 'cli', 'main.js');

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export function tempDir(t: Teardown, prefix = 'mdvfs-fuse-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Ends the test file as skipped (with the reason) where FUSE cannot be used. */
export function skipWithoutFuse(t: { plan(n: number, comment?: string): void }): void {
  const unavailable = fuseUnavailable();
  if (unavailable === null) return;
  t.plan(0, `skipped: ${unavailable}`);
  process.exit(0);
}

/** Why real mounts cannot run on this machine, or null when they can (tests skip with this reason). */
export function fuseUnavailable(): string | null {
  if (!existsSync('/dev/fuse')) return 'no /dev/fuse on this machine';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    try {
      accessSync('/dev/fuse', constants.R_OK | constants.W_OK);
    } catch {
      return '/dev/fuse is not accessible to this user (the mount tests run as root)';
    }
  }
  try {
    loadLowLevel();
  } catch (err) {
    return (err as Error).message;
  }
  return null;
}

export interface Daemon {
  dataDir: string;
  /** Root connection (setup, and the "other side" of coherence checks). */
  client: DaemonClient;
  proc: ChildProcess;
}

/** Starts the daemon for a fresh data dir and connects to it as root. */
export async function startDaemon(t: Teardown, env: Record<string, string> = {}): Promise<Daemon> {
  const dataDir = tempDir(t, 'mdvfs-fuse-data-');
  const proc = spawn(process.execPath, [CLI, 'daemon'], {
    env: { ...process.env, ...(await testStoreEnv(dataDir)), ...env, SERVICE_DATA_DIR: dataDir },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (s: string) => {
    err += s;
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  t.teardown(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
  });
  const sock = socketPathFor(dataDir);
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      const client = await connectSocket(sock);
      t.teardown(() => client.close());
      return { dataDir, client, proc };
    } catch (e) {
      if (proc.exitCode !== null || Date.now() > deadline)
        throw new Error(`daemon did not start (${String(e)}); stderr:\n${err}`);
      await sleep(50);
    }
  }
}

export interface ShResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a bash command line (async, never blocking this process), with a generous safety timeout. */
export function sh(cmd: string, cwd: string, env: Record<string, string> = {}): Promise<ShResult> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-c', cmd],
      { cwd, env: { ...process.env, ...env }, timeout: 120000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface Mount {
  dir: string;
  proc: ChildProcess;
  stderr(): string;
  /** Runs a command with the mountpoint as working directory. */
  sh(cmd: string): Promise<ShResult>;
  /** Stops the mount with SIGTERM; resolves with its exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Asserts a command in the mount exits 0 (its stderr in the message when not) and returns its stdout. */
export function okIn(m: Mount): (t: Test, cmd: string) => Promise<string> {
  return async (t, cmd) => {
    const r = await m.sh(cmd);
    t.equal(r.code, 0, `${cmd} exits 0${r.code === 0 ? '' : `: ${r.stderr}`}`);
    return r.stdout;
  };
}

export function isMounted(dir: string): boolean {
  const table = readFileSync('/proc/self/mountinfo', 'utf8');
  return table.split('\n').some((l) => l.split(' ')[4] === dir);
}

/** Mounts the daemon's tree at a fresh temp dir with `mdvfs mount` and waits until it serves. */
export async function mount(t: Teardown, d: { dataDir: string }, args: string[] = []): Promise<Mount> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-mnt-'));
  // The daemon the mount starts again after a restart must use the same store as the test's daemon.
  const store = await testStoreEnv(d.dataDir);
  // MDVFS_TEST_WRITEBACK=1 runs a test file's mounts in `--writeback` mode (docs/posix.md).
  const mode = process.env.MDVFS_TEST_WRITEBACK === '1' && !args.includes('--writeback') ? ['--writeback'] : [];
  const proc = spawn(process.execPath, [CLI, 'mount', dir, ...args, ...mode], {
    env: { ...process.env, ...store, SERVICE_DATA_DIR: d.dataDir },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (s: string) => {
    err += s;
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  t.teardown(async () => {
    await stop();
    // auto_unmount cleans up after a killed mount; make sure before removing the (then empty) dir.
    if (isMounted(dir)) await sh(`fusermount3 -uz '${dir}'`, '/');
    try {
      rmdirSync(dir); // never recursive: if it were still mounted, this must not delete the tree
    } catch {
      // left behind: harmless
    }
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mount did not come up within 30 s; stderr:\n${err}`)), 30000);
    const check = (): void => {
      if (/mounted .* at /.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stderr!.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mount exited (${code}) before mounting; stderr:\n${err}`));
    });
    check();
  });
  return { dir, proc, stderr: () => err, sh: (cmd) => sh(cmd, dir), stop };
}

/** Runs a mount that is expected to fail; resolves with its exit code and stderr. */
export async function mountFailure(
  t: Teardown,
  d: { dataDir: string },
  args: string[],
): Promise<{ code: number | null; stderr: string }> {
  const dir = tempDir(t, 'mdvfs-mnt-bad-');
  const store = await testStoreEnv(d.dataDir);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'mount', dir, ...args],
      { env: { ...process.env, ...store, SERVICE_DATA_DIR: d.dataDir }, timeout: 30000 },
      (err, _out, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr });
      },
    );
  });
}

/** Polls `fn` until it returns true (or `limitMs` passes); returns whether it did. */
export async function eventually(fn: () => boolean | Promise<boolean>, limitMs = 5000, everyMs = 50): Promise<boolean> {
  const end = Date.now() + limitMs;
  for (;;) {
    if (await fn()) return true;
    if (Date.now() > end) return false;
    await sleep(everyMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A Python program run with the mountpoint as working directory: git's way of writing an object,
 * open(O_CREAT|O_WRONLY|O_EXCL, 0444) of home/alice/ro.md, two writes through that descriptor, close.
 */
export const CREATE_0444_PY = `import os
fd = os.open('home/alice/ro.md', os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o444)
os.write(fd, b'first part\\n')
os.write(fd, b'second part\\n')
os.close(fd)
`;
