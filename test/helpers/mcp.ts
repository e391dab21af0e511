/**
 * Helpers for the MCP tests: the real `mdvfs serve` (built, from dist/) on a free port with a temp
 * data dir, the real `mdvfs-mcp` over stdio, the SDK's real Client on both transports, and a root
 * connection to the daemon's socket for setting up users (the daemon's own interface, no mocks).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectSocket, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { testStoreEnv } from './postgres.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
// MDVFS_TEST_DIST lets a developer test a private build while others rebuild dist/.
const DIST = process.env.MDVFS_TEST_DIST ?? path.join(ROOT, 'dist');
export const CLI = path.join(DIST, 'cli', 'main.js');
export const MCP_STDIO = path.join(DIST, 'mcp', 'stdio.js');
export const INSPECTOR = path.join(ROOT, 'node_modules', '.bin', 'mcp-inspector');

export const TOOL_NAMES = [
  'read_file',
  'write_file',
  'edit_file',
  'list_directory',
  'get_file_info',
  'search_files',
  'find_files',
  'create_directory',
  'delete_file',
  'move_file',
  'commit',
  'get_history',
  'revert',
  'undo',
] as const;

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export function tempDir(t: Teardown, prefix = 'mdvfs-mcp-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface Service {
  base: string;
  url: URL; // .../mcp
  port: number;
  dataDir: string;
  proc: ChildProcess;
  stderr(): string;
}

/** Starts `node dist/cli/main.js serve` on 127.0.0.1:0 and waits for its "listening on" line. */
export async function startServe(
  t: Teardown,
  opts: { dataDir?: string; env?: Record<string, string> } = {},
): Promise<Service> {
  const dataDir = opts.dataDir ?? tempDir(t);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...(await testStoreEnv(dataDir)),
    ...opts.env,
    SERVICE_DATA_DIR: dataDir,
    SERVICE_LISTEN: '127.0.0.1:0',
  };
  // Own process group, so teardown can stop serve and the daemon and sidecar it started.
  const proc = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let err = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (s: string) => {
    err += s;
  });
  proc.stdout!.resume();
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  t.teardown(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    const timer = setTimeout(() => {
      try {
        process.kill(-proc.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 10000);
    await exited;
    clearTimeout(timer);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 60 s; stderr:\n${err}`)), 60000);
    const check = (): void => {
      const m = /listening on http:\/\/[^\s]+:(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        proc.stderr!.off('data', check);
        resolve(Number(m[1]));
      }
    };
    proc.stderr!.on('data', check);
    check();
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`serve exited (${signal ?? code}) before listening; stderr:\n${err}`));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  return { base, url: new URL('/mcp', base), port, dataDir, proc, stderr: () => err };
}

/** A root connection to the data dir's daemon (for setup: users, tokens, chmod). */
export async function rootDaemon(t: Teardown, dataDir: string): Promise<DaemonClient> {
  const c = await connectSocket(socketPathFor(dataDir));
  t.teardown(() => c.close());
  return c;
}

export interface Cast {
  svc: Service;
  daemon: DaemonClient;
  botToken: string;
}

/** A service with users alice and bob and the agent bot (with a token). */
export async function withCast(t: Teardown, opts: { env?: Record<string, string> } = {}): Promise<Cast> {
  const svc = await startServe(t, opts);
  const daemon = await rootDaemon(t, svc.dataDir);
  await daemon.call('admin.userAdd', { name: 'alice' });
  await daemon.call('admin.userAdd', { name: 'bob' });
  await daemon.call('admin.userAdd', { name: 'bot', is_agent: true });
  const { token } = await daemon.call('admin.token', { name: 'bot' });
  return { svc, daemon, botToken: token };
}

export interface Identity {
  authorization?: string;
  workspace?: string;
  onBehalfOf?: string;
}

export function headersFor(id: Identity): Record<string, string> {
  const h: Record<string, string> = {};
  if (id.authorization !== undefined) h.Authorization = id.authorization;
  if (id.workspace !== undefined) h['X-Service-Workspace'] = id.workspace;
  if (id.onBehalfOf !== undefined) h['X-Service-On-Behalf-Of'] = id.onBehalfOf;
  return h;
}

/** The SDK's Client over Streamable HTTP, initialized (a session), closed at teardown. */
export async function httpClient(
  t: Teardown,
  svc: Service,
  id: Identity = {},
  opts: { sessionId?: string } = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(svc.url, {
    requestInit: { headers: headersFor(id) },
    ...(opts.sessionId === undefined ? {} : { sessionId: opts.sessionId }),
  });
  const client = new Client({ name: 'mdvfs-test', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close().catch(() => undefined));
  return { client, transport };
}

/** The SDK's Client over stdio against the built `mdvfs-mcp`, closed at teardown. */
export async function stdioClient(
  t: Teardown,
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ client: Client; transport: StdioClientTransport; stderr(): string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MCP_STDIO],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', SERVICE_DATA_DIR: dataDir, ...env },
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (b: Buffer) => {
    err += b.toString('utf8');
  });
  const client = new Client({ name: 'mdvfs-test', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close().catch(() => undefined));
  return { client, transport, stderr: () => err };
}

/** Runs the built mdvfs-mcp to completion (for startup failures): exit code, stdout, stderr. */
export function runStdio(
  dataDir: string,
  env: Record<string, string>,
  stdin = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [MCP_STDIO], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', SERVICE_DATA_DIR: dataDir, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    p.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    p.on('error', reject);
    p.on('exit', (code) => resolve({ code, stdout: out, stderr: err }));
    p.stdin.end(stdin);
  });
}

export type ToolResult = CallToolResult;

/** Calls a tool and returns the result (isError results included). */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** The text of a result's first content block. */
export function text(r: ToolResult): string {
  const c = r.content[0];
  return c && c.type === 'text' ? c.text : '';
}

/** The structured content of a successful result (throws with the error text otherwise). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function data(r: ToolResult): any {
  if (r.isError) throw new Error(`tool failed: ${text(r)}`);
  return r.structuredContent;
}

/** The daemon error code carried by an isError result. */
export function errorCode(r: ToolResult): string | undefined {
  if (!r.isError) return undefined;
  const meta = r._meta as { code?: string } | undefined;
  return meta?.code;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/** One raw JSON-RPC request to /mcp (no SDK), with exactly the headers given. */
export function rawMcp(
  svc: { port: number },
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const h: Record<string, string> = { accept: 'application/json, text/event-stream', ...headers };
  if (payload) {
    h['content-type'] ??= 'application/json';
    h['content-length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: svc.port, method, path: '/mcp', headers: h, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

export const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

export { until } from './poll.js';
