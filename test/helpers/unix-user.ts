/**
 * A second local Unix account for attacks that need one (reading another user's data dir,
 * squatting a socket path). Created with `useradd`, removed at teardown; tests skip with the
 * reason when that is impossible (not root, no useradd).
 *
 *   const evil = await localUser(t);
 *   if (typeof evil === 'string') return t.skip(evil);
 *   const r = await evil.run('cat', [file]);
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface RunAs {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface LocalUser {
  name: string;
  uid: number;
  gid: number;
  /** Runs a command as this user (runuser), collecting its exit code and output. */
  run(cmd: string, args: string[]): Promise<RunAs>;
  /** Starts a long-running command as this user, in its own process group (killed at teardown). */
  spawn(cmd: string, args: string[]): ChildProcess;
}

/** Creates a throwaway local user, or returns why that is impossible here. */
export async function localUser(t: Teardown): Promise<LocalUser | string> {
  if (process.getuid?.() !== 0) return 'needs root to create a second local user';
  const name = `mdvfst${randomBytes(4).toString('hex')}`;
  let lastErr = '';
  // useradd takes /etc/passwd's lock: other test files may hold it for a moment.
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      await execFileP('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name]);
      lastErr = '';
      break;
    } catch (err) {
      lastErr = (err as Error).message;
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'useradd is not available';
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  if (lastErr !== '') return `useradd failed: ${lastErr}`;
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    // Its processes first: userdel refuses a user that still runs something.
    for (const p of children) {
      try {
        process.kill(-p.pid!, 'SIGKILL'); // runuser does not pass SIGKILL on: the whole group goes
      } catch {
        // already gone
      }
      p.stdout?.destroy();
      p.stderr?.destroy();
    }
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        await execFileP('userdel', [name]);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  });
  const uid = Number((await execFileP('id', ['-u', name])).stdout.trim());
  const gid = Number((await execFileP('id', ['-g', name])).stdout.trim());
  const spawnAs = (cmd: string, args: string[], detached = false): ChildProcess =>
    // `env -u NODE_OPTIONS`: tap injects its own --import hooks into every child's NODE_OPTIONS, from
    // a checkout the other user may not be able to read (a clone under a 0700 temp dir).
    spawn('runuser', ['-u', name, '--', 'env', '-u', 'NODE_OPTIONS', cmd, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: '/',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      detached,
    });
  return {
    name,
    uid,
    gid,
    spawn: (cmd, args) => {
      const p = spawnAs(cmd, args, true);
      children.push(p);
      return p;
    },
    run: (cmd, args) =>
      new Promise((resolve, reject) => {
        const p = spawnAs(cmd, args);
        let stdout = '';
        let stderr = '';
        p.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
        p.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
        p.on('error', reject);
        p.on('close', (code) => resolve({ code, stdout, stderr }));
      }),
  };
}
