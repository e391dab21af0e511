#!/usr/bin/env node
/**
 * `mdvfs-mcp`: the MCP server over stdio, for local agents (Claude Desktop, Cursor, ...).
 *
 * Identity comes from the environment: SERVICE_AS_USER (→ `User <name>`) or SERVICE_TOKEN
 * (→ `Bearer <token>`), optionally SERVICE_WORKSPACE and SERVICE_ON_BEHALF_OF; neither means root
 * (a local, trusted process, like the CLI). The identity is verified with the daemon at startup:
 * an unknown user or a bad token is a one-line error on stderr and exit 1, never a fallback to root.
 *
 * stdout carries the protocol and nothing else; every log line goes to stderr.
 */
import { connectDaemon, defaultDataDir } from '../daemon/rpc/connect.js';
import type { Creds } from '../daemon/rpc/protocol.js';

// Security/protocol: a stray console.log from any module would corrupt the JSON-RPC stream.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

function fail(message: string): never {
  process.stderr.write(`mdvfs-mcp: ${message}\n`);
  process.exit(1);
}

/** The caller's credentials from the environment. */
function credsFromEnv(env: NodeJS.ProcessEnv): Creds {
  const user = env.SERVICE_AS_USER?.trim();
  const token = env.SERVICE_TOKEN?.trim();
  if (user && token) throw new Error('set SERVICE_AS_USER or SERVICE_TOKEN, not both');
  const creds: Creds = { origin: 'local' };
  if (user) creds.authorization = `User ${user}`;
  if (token) creds.authorization = `Bearer ${token}`;
  const workspace = env.SERVICE_WORKSPACE?.trim();
  if (workspace) creds.workspace = workspace;
  const onBehalfOf = env.SERVICE_ON_BEHALF_OF?.trim();
  if (onBehalfOf) creds.onBehalfOf = onBehalfOf;
  return creds;
}

async function main(): Promise<void> {
  let creds: Creds;
  try {
    creds = credsFromEnv(process.env);
  } catch (err) {
    fail((err as Error).message);
  }
  // The SDK loads while the daemon checks the identity (it dominates startup time).
  const modules = Promise.all([import('@modelcontextprotocol/sdk/server/stdio.js'), import('./resources.js'), import('./server.js')]);
  modules.catch(() => undefined);
  const dataDir = defaultDataDir();
  const client = await connectDaemon({ dataDir }).catch((err: unknown) => fail(`cannot reach the daemon for ${dataDir}: ${(err as Error).message}`));
  const caller = client.as(creds);

  const who = creds.authorization?.startsWith('Bearer ') ? 'the token in SERVICE_TOKEN' : creds.authorization ? `user '${process.env.SERVICE_AS_USER?.trim()}'` : 'root';
  const me = await caller.call('auth.whoami', {}).catch((err: unknown) => {
    client.close();
    fail(`cannot act as ${who}${creds.onBehalfOf ? ` on behalf of '${creds.onBehalfOf}'` : ''}: ${(err as Error).message}`);
  });

  const [{ StdioServerTransport }, { ChangeFeed }, { createMcpServer }] = await modules;
  const feed = new ChangeFeed(() => connectDaemon({ dataDir, spawn: false }));
  const server = createMcpServer({ callerFor: () => caller, feed });
  const transport = new StdioServerTransport();

  let stopping = false;
  const stop = (code: number): void => {
    if (stopping) return;
    stopping = true;
    feed.close();
    void server.close().finally(() => {
      client.close();
      process.exit(code);
    });
  };
  // The client going away (stdin closed) ends the server, as for every stdio MCP server.
  process.stdin.on('end', () => stop(0));
  process.stdin.on('close', () => stop(0));
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  client.on('close', () => {
    if (!stopping) process.stderr.write('mdvfs-mcp: the daemon connection closed\n');
    stop(1);
  });

  await server.connect(transport);
  const as = me.on_behalf_of === undefined ? me.user : `${me.user} on behalf of ${me.on_behalf_of}`;
  process.stderr.write(`mdvfs-mcp: serving ${dataDir} as ${as}${me.workspace ? ` in workspace ${me.workspace.name}` : ''}\n`);
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
