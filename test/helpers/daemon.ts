/**
 * Test helpers: a real daemon process per test file on a temp data dir, and the standard personas.
 *
 *   const d = await spawnDaemon(t);
 *   const p = await makePersonas(d.client);
 *   await p.alice.call('fs.write', { path: 'a.md' }, { data: Buffer.from('x') });
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectSocket, type Caller, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import type { Creds } from '../../daemon/rpc/protocol.js';
import { testStoreEnv } from './postgres.js';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT_DIR, 'dist', 'cli', 'main.js');
/** The daemon's own entry point: the same `runDaemon` as `mdvfs daemon`, without loading the whole CLI. */
export const DAEMON_ENTRY = path.join(ROOT_DIR, 'dist', 'daemon', 'main.js');

interface Teardown {
  teardown(fn: () => void | Promise<void>): void;
}

export interface TestDaemon {
  dataDir: string;
  client: DaemonClient;
  proc: ChildProcess;
  env: NodeJS.ProcessEnv;
  /** SIGKILL (or another signal), wait for exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Start again on the same data dir and reconnect `client`. */
  restart(): Promise<void>;
  stderr(): string;
}

export function tempDir(prefix = 'mdvfs-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

async function waitForSocket(sock: string, proc: ChildProcess, err: () => string): Promise<DaemonClient> {
  const deadline = Date.now() + 60000; // a bound on a hang, not a speed check: a loaded CI machine may take long to start a process
  for (;;) {
    try {
      return await connectSocket(sock);
    } catch {
      if (proc.exitCode !== null) throw new Error(`daemon exited with ${proc.exitCode}: ${err()}`);
      if (Date.now() > deadline) throw new Error(`daemon did not start: ${err()}`);
      await new Promise((r) => setTimeout(r, 30));
    }
  }
}

/**
 * A process's exit code, once it exited and its output was read to the end: 'close', not 'exit',
 * since the exit and the last lines on its stderr pipe reach this process as separate events.
 */
export function exitOf(proc: ChildProcess): Promise<number | null> {
  const exited = proc.exitCode !== null || proc.signalCode !== null;
  if (exited && (proc.stderr === null || proc.stderr.closed)) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.once('close', (code) => resolve(code)));
}

/** Starts the daemon (`dist/daemon/main.js`, what `mdvfs daemon` runs) on a fresh data dir; stops it and removes the dir at teardown. */
export async function spawnDaemon(
  t: Teardown,
  extraEnv: NodeJS.ProcessEnv = {},
  dataDir = tempDir(),
): Promise<TestDaemon> {
  const env = { ...process.env, SERVICE_DATA_DIR: dataDir, ...(await testStoreEnv(dataDir)), ...extraEnv };
  let errText = '';
  const start = () => {
    const p = spawn(process.execPath, [DAEMON_ENTRY], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    p.stderr!.on('data', (b: Buffer) => (errText += b.toString()));
    return p;
  };
  const d: TestDaemon = {
    dataDir,
    env,
    proc: start(),
    client: undefined as unknown as DaemonClient,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      d.client.close();
      if (d.proc.exitCode !== null || d.proc.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        d.proc.once('exit', () => resolve());
        d.proc.kill(signal);
      });
    },
    async restart() {
      d.proc = start();
      d.client = await waitForSocket(socketPathFor(dataDir), d.proc, () => errText);
    },
    stderr: () => errText,
  };
  d.client = await waitForSocket(socketPathFor(dataDir), d.proc, () => errText);
  t.teardown(async () => {
    await d.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  });
  return d;
}

export interface Personas {
  root: Caller;
  admin: Caller; // wheel member
  alice: Caller;
  bob: Caller; // shares group "team" with alice
  carol: Caller; // in group "other" only
  agent: Caller; // an agent user
  agentForAlice: Caller; // the agent on behalf of alice
  tokens: { admin: string; agent: string };
}

/** Creates admin (wheel), alice, bob, carol, an agent; groups team (alice, bob) and other (carol). */
export async function makePersonas(client: { as(creds: Creds): Caller }): Promise<Personas> {
  const root = client.as({});
  await root.call('admin.userAdd', { name: 'admin' });
  await root.call('admin.groupMemberAdd', { user: 'admin', group: 'wheel' });
  for (const name of ['alice', 'bob', 'carol']) await root.call('admin.userAdd', { name });
  await root.call('admin.userAdd', { name: 'agent', is_agent: true });
  await root.call('admin.groupAdd', { name: 'team' });
  await root.call('admin.groupAdd', { name: 'other' });
  await root.call('admin.groupMemberAdd', { user: 'alice', group: 'team' });
  await root.call('admin.groupMemberAdd', { user: 'bob', group: 'team' });
  await root.call('admin.groupMemberAdd', { user: 'carol', group: 'other' });
  // alice consents to the agent acting for her (a delegation grant: DESIGN.md §4)
  await root.call('auth.delegationAdd', { agent: 'agent', user: 'alice' });
  const adminTok = (await root.call('admin.token', { name: 'admin' })).token;
  const agentTok = (await root.call('admin.token', { name: 'agent' })).token;
  return {
    root,
    admin: client.as({ authorization: `Bearer ${adminTok}` }),
    alice: client.as({ authorization: 'User alice' }),
    bob: client.as({ authorization: 'User bob' }),
    carol: client.as({ authorization: 'User carol' }),
    agent: client.as({ authorization: `Bearer ${agentTok}` }),
    agentForAlice: client.as({ authorization: `Bearer ${agentTok}`, onBehalfOf: 'alice' }),
    tokens: { admin: adminTok, agent: agentTok },
  };
}

export const text = (s: string): { data: Buffer } => ({ data: Buffer.from(s) });

/** Reads a file as a string. */
export async function readText(c: Caller, p: string): Promise<string> {
  return (await c.request('fs.read', { path: p })).data.toString('utf8');
}

export function cleanup(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Everything observable about a subtree, as root sees it: every entry's stat (mode, owners, size,
 * times, content etag, link target) in name order. Two equal snapshots mean nothing changed.
 */
export async function treeSnapshot(root: Caller, dir = '/'): Promise<string> {
  const out: string[] = [];
  const walk = async (p: string): Promise<void> => {
    const l = await root.call('fs.list', { path: p });
    for (const e of l.entries) {
      const child = p === '/' ? `/${e.name}` : `${p}/${e.name}`;
      const s = await root.call('fs.stat', { path: child, nofollow: true });
      out.push(
        JSON.stringify([
          child,
          s.kind,
          s.mode,
          s.uid,
          s.gid,
          s.size,
          s.etag ?? null,
          s.target ?? null,
          s.mtime_ns,
          s.ctime_ns,
          s.inode_id,
        ]),
      );
      if (e.is_dir) await walk(child);
    }
  };
  const top = await root.call('fs.stat', { path: dir, nofollow: true });
  out.push(JSON.stringify([dir, top.kind, top.mode, top.uid, top.gid, top.mtime_ns, top.ctime_ns]));
  if (top.kind === 'directory') await walk(dir);
  return out.join('\n');
}

/** Users, groups and workspaces as root sees them. */
export async function authSnapshot(root: Caller): Promise<string> {
  const u = await root.call('admin.userList', {});
  const g = await root.call('admin.groupList', {});
  const w = await root.call('ws.list', {});
  return JSON.stringify([u, g, w]);
}

export const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** The etag the daemon gives content: SHA-256 over `blob <length>\0<bytes>` (git's object scheme). */
export function blobId(content: Buffer | string): string {
  const b = typeof content === 'string' ? Buffer.from(content) : content;
  return createHash('sha256').update(`blob ${b.length}\0`).update(b).digest('hex');
}
