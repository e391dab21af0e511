/**
 * Test helpers: a real daemon process per test file on a temp data dir, and the standard personas.
 *
 *   const d = await spawnDaemon(t);
 *   const p = await makePersonas(d.client);
 *   await p.alice.call('fs.write', { path: 'a.md' }, { data: Buffer.from('x') });
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectSocket, type Caller, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT_DIR, 'dist', 'cli', 'main.js');

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
  const deadline = Date.now() + 20000;
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

/** Starts `node dist/cli/main.js daemon` on a fresh data dir; stops it and removes the dir at teardown. */
export async function spawnDaemon(t: Teardown, extraEnv: NodeJS.ProcessEnv = {}, dataDir = tempDir()): Promise<TestDaemon> {
  const env = { ...process.env, SERVICE_DATA_DIR: dataDir, ...extraEnv };
  let errText = '';
  const start = () => {
    const p = spawn(process.execPath, [CLI, 'daemon'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
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
export async function makePersonas(client: DaemonClient): Promise<Personas> {
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
