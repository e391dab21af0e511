/**
 * Helpers for the black-box HTTP tests: start the real `mdvfs serve` (built, from dist/) on a free
 * port with a temp data dir, and talk to it with raw node:http requests (so paths reach the server
 * exactly as written: `..`, `//`, `%2F`, `%00`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testStoreEnv } from './postgres.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The built tree under test (MDVFS_TEST_DIST points elsewhere, e.g. a private build while others rebuild dist/). */
export const DIST = process.env.MDVFS_TEST_DIST ?? path.join(ROOT, 'dist');
export const CLI = path.join(DIST, 'cli', 'main.js');

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Service {
  base: string;
  host: string;
  port: number;
  dataDir: string;
  proc: ChildProcess;
  /** Everything the service printed on stderr so far. */
  stderr(): string;
  /** SIGTERM (or another signal) to serve; resolves with how it exited. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function tempDataDir(t: Teardown, prefix = 'mdvfs-http-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Direct children of a process (from /proc, so no `ps` is needed). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // a zombie still answers kill(0); treat it as dead
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The daemon and the sidecar started by a serve process. */
export function servePids(servePid: number): { daemon?: number; http?: number } {
  const r: { daemon?: number; http?: number } = {};
  for (const pid of childPids(servePid)) {
    const c = cmdline(pid);
    if (/ daemon\s*$/.test(c)) r.daemon = pid;
    else if (/ http\s*$/.test(c)) r.http = pid;
  }
  return r;
}

/** Daemons (from any starter) serving `dataDir`, found by their environment. */
export function daemonPidsFor(dataDir: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`, 'utf8').split('\0');
      if (!env.includes(`SERVICE_DATA_DIR=${dataDir}`)) continue;
      if (/daemon/.test(cmdline(Number(d)))) out.push(Number(d));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

export interface StartOptions {
  dataDir?: string;
  port?: number;
  env?: Record<string, string>;
}

/** Starts `node dist/cli/main.js serve` and waits for its "listening on" line. */
export async function startService(t: Teardown, opts: StartOptions = {}): Promise<Service> {
  const dataDir = opts.dataDir ?? tempDataDir(t);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...(await testStoreEnv(dataDir)),
    ...opts.env,
    SERVICE_DATA_DIR: dataDir,
    SERVICE_LISTEN: `127.0.0.1:${opts.port ?? 0}`,
  };
  const proc = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (s: string) => {
    err += s;
  });
  proc.stdout!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    return exited;
  };
  t.teardown(async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const kids = servePids(proc.pid!);
    proc.kill('SIGTERM');
    const timer = setTimeout(() => {
      for (const pid of [proc.pid!, kids.daemon, kids.http])
        if (pid !== undefined && alive(pid)) process.kill(pid, 'SIGKILL');
    }, 15000);
    await exited;
    clearTimeout(timer);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 60 s; stderr:\n${err}`)), 60000);
    const check = () => {
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        proc.stderr!.off('data', check);
        resolve(Number(m[1]));
      }
    };
    proc.stderr!.on('data', check);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`serve exited (${signal ?? code}) before listening; stderr:\n${err}`));
    });
  });
  return { base: `http://127.0.0.1:${port}`, host: '127.0.0.1', port, dataDir, proc, stderr: () => err, stop, exited };
}

export interface Res {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface ReqOptions {
  /** Authorization header value, e.g. `User alice` or `Bearer tok`. */
  auth?: string;
  workspace?: string;
  onBehalfOf?: string;
  headers?: Record<string, string>;
  /** An object is sent as JSON (with Content-Type application/json unless given). */
  body?: string | Buffer | object;
}

/** One raw HTTP request; the path is sent exactly as given. */
export function request(svc: { port: number }, method: string, rawPath: string, opts: ReqOptions = {}): Promise<Res> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.auth !== undefined) headers.authorization = opts.auth;
  if (opts.workspace !== undefined) headers['x-service-workspace'] = opts.workspace;
  if (opts.onBehalfOf !== undefined) headers['x-service-on-behalf-of'] = opts.onBehalfOf;
  let payload: Buffer | undefined;
  if (Buffer.isBuffer(opts.body)) payload = opts.body;
  else if (typeof opts.body === 'string') payload = Buffer.from(opts.body);
  else if (opts.body !== undefined) {
    payload = Buffer.from(JSON.stringify(opts.body));
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
  }
  if (payload !== undefined) headers['content-length'] = String(payload.length);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: svc.port, method, path: rawPath, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          const text = body.toString('utf8');
          let json: unknown;
          if (/json/.test(String(res.headers['content-type']))) {
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A client bound to one service and (optionally) one identity. */
export function client(svc: { port: number }, base: Omit<ReqOptions, 'body' | 'headers'> = {}) {
  const go = (method: string, p: string, opts: ReqOptions = {}) => request(svc, method, p, { ...base, ...opts });
  return {
    get: (p: string, o?: ReqOptions) => go('GET', p, o),
    put: (p: string, body?: string | Buffer, o?: ReqOptions) =>
      go('PUT', p, { ...o, ...(body === undefined ? {} : { body }) }),
    post: (p: string, body?: object | string, o?: ReqOptions) =>
      go('POST', p, { ...o, ...(body === undefined ? {} : { body }) }),
    del: (p: string, o?: ReqOptions) => go('DELETE', p, o),
    req: go,
  };
}

export type Client = ReturnType<typeof client>;

export { until } from './poll.js';

/**
 * A service with the usual cast: `admin` (bootstrap, wheel), users `alice` and `bob`, and agent
 * `bot` with a token. Root is the client with no Authorization header.
 */
export async function withCast(t: Teardown, opts: StartOptions = {}) {
  const svc = await startService(t, opts);
  const root = client(svc);
  const boot = await root.post('/auth/bootstrap', { username: 'admin' });
  if (boot.status !== 200) throw new Error(`bootstrap failed: ${boot.status} ${boot.text}`);
  const adminToken: string = boot.json.token;
  for (const [name, is_agent] of [
    ['alice', false],
    ['bob', false],
    ['bot', true],
  ] as const) {
    const r = await root.post('/admin/users', { name, is_agent });
    if (r.status !== 200) throw new Error(`user ${name}: ${r.status} ${r.text}`);
  }
  const tok = await root.post('/admin/users/bot/tokens');
  if (tok.status !== 200) throw new Error(`token: ${tok.status} ${tok.text}`);
  const botToken: string = tok.json.token;
  return {
    svc,
    root,
    admin: client(svc, { auth: `Bearer ${adminToken}` }),
    alice: client(svc, { auth: 'User alice' }),
    bob: client(svc, { auth: 'User bob' }),
    bot: client(svc, { auth: `Bearer ${botToken}` }),
    adminToken,
    botToken,
  };
}
