#!/usr/bin/env node
/**
 * `mdvfs-mcp`: the MCP server over stdio, for local agents (Claude Desktop, Cursor, ...).
 *
 * Identity comes from the environment: SERVICE_AS_USER (→ `User <name>`) or SERVICE_TOKEN
 * (→ `Bearer <token>`), optionally SERVICE_WORKSPACE and SERVICE_ON_BEHALF_OF; neither means root
 * (a local, trusted process, like the CLI). A variable set but blank is an error naming it, never root
 * (daemon/rpc/credentials.ts, the parser every front end uses). The identity is verified with the daemon at startup:
 * an unknown user or a bad token is a one-line error on stderr and exit 1, never a fallback to root.
 *
 * stdout carries the protocol and nothing else; every log line goes to stderr.
 */
import { connectDaemon, defaultDataDir } from '../daemon/rpc/connect.js';
import { localCreds } from '../daemon/rpc/credentials.js';
import type { Creds } from '../daemon/rpc/protocol.js';
import { DaemonLink } from '../daemon/rpc/link.js';
import { VERSION } from '../daemon/rpc/version.js';

// Security/protocol: a stray console.log from any module would corrupt the JSON-RPC stream.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

const NO_FLAGS = { user: '', token: '', workspace: '', onBehalfOf: '' };

function fail(message: string): never {
  process.stderr.write(`mdvfs-mcp: ${message}\n`);
  process.exit(1);
}

const HELP = `Usage: mdvfs-mcp [--help] [--version]

The mdvfs MCP server over stdio (for Claude Desktop, Cursor, the MCP Inspector...): JSON-RPC on
stdin/stdout, logs on stderr. It connects to the daemon of SERVICE_DATA_DIR (starting one in the
background if none runs) and takes its identity from the environment:

  SERVICE_AS_USER       act as this user
  SERVICE_TOKEN         act as the holder of this token (an agent's)
  SERVICE_ON_BEHALF_OF  delegate to this user
  SERVICE_WORKSPACE     confine to this workspace (with its secret in SERVICE_TOKEN)
  SERVICE_DATA_DIR      the data dir (default $XDG_DATA_HOME/mdvfs or ~/.local/share/mdvfs)

With no identity set it acts as root. Options:
  -h, --help     print this help and exit
  -V, --version  print the version and exit
`;

/** Answers --help and --version without starting anything; any other argument is a usage error. */
function handleArgs(args: string[]): void {
  for (const a of args) {
    if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    }
    if (a === '--version' || a === '-V') {
      process.stdout.write(`${VERSION}\n`);
      process.exit(0);
    }
  }
  if (args.length > 0) {
    process.stderr.write(
      `mdvfs-mcp: unknown argument '${args[0]!.slice(0, 100)}'; it takes none (settings come from the environment, see --help) (EUSAGE)\n`,
    );
    process.exit(2);
  }
}

async function main(): Promise<void> {
  handleArgs(process.argv.slice(2));
  let creds: Creds;
  try {
    creds = localCreds({}, NO_FLAGS, process.env);
  } catch (err) {
    fail((err as Error).message);
  }
  // The SDK loads while the daemon checks the identity (it dominates startup time).
  const modules = Promise.all([import('./stdio-transport.js'), import('./resources.js'), import('./server.js')]);
  modules.catch(() => undefined);
  const dataDir = defaultDataDir();
  const client = await connectDaemon({ dataDir }).catch((err: unknown) =>
    fail(`cannot reach the daemon for ${dataDir}: ${(err as Error).message}`),
  );
  const caller = new DaemonLink(dataDir, creds, { name: 'mdvfs-mcp' }, client);

  const who = creds.authorization?.startsWith('Bearer ')
    ? 'the token in SERVICE_TOKEN'
    : creds.authorization
      ? `user '${process.env.SERVICE_AS_USER?.trim()}'`
      : 'root';
  const me = await caller.call('auth.whoami', {}).catch((err: unknown) => {
    caller.close();
    fail(
      `cannot act as ${who}${creds.onBehalfOf ? ` on behalf of '${creds.onBehalfOf}'` : ''}: ${(err as Error).message}`,
    );
  });

  const [{ LeanStdioServerTransport }, { ChangeFeed }, { createMcpServer }] = await modules;
  const feed = new ChangeFeed(new DaemonLink(dataDir, {}, { name: 'mdvfs-mcp', spawn: false }));
  const server = createMcpServer({ callerFor: () => caller, feed });
  const transport = new LeanStdioServerTransport();

  let stopping = false;
  const stop = (code: number): void => {
    if (stopping) return;
    stopping = true;
    feed.close();
    void server.close().finally(() => {
      caller.close();
      // exit only once every response written so far has left through the pipe
      process.stdout.write('', () => process.exit(code));
    });
  };

  // Requests still being answered when stdin closes: a client may write its last requests and
  // close stdin at once, and still expects the answers.
  let inFlight = 0;
  let inputEnded = false;
  const maybeStop = (): void => {
    if (inputEnded && inFlight === 0) stop(0);
  };

  // The client going away (stdin closed) ends the server, as for every stdio MCP server.
  const onInputEnd = (): void => {
    inputEnded = true;
    maybeStop();
    setTimeout(() => stop(0), 30_000).unref(); // a stuck request must not keep an orphan alive
  };
  process.stdin.on('end', onInputEnd);
  process.stdin.on('close', onInputEnd);
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  // A daemon restart (e.g. `mdvfs serve` restarted) is not the end of the session: the next call
  // reconnects, and the subscription feed reconnects by itself.
  client.on('close', () => {
    if (!stopping) process.stderr.write('mdvfs-mcp: the daemon connection closed; reconnecting on the next call\n');
  });

  await server.connect(transport);
  const onmessage = transport.onmessage;
  transport.onmessage = (msg) => {
    if ('method' in msg && 'id' in msg) inFlight++;
    onmessage?.(msg);
  };
  const send = transport.send.bind(transport);
  transport.send = async (msg) => {
    try {
      await send(msg);
    } finally {
      if (('result' in msg || 'error' in msg) && 'id' in msg) {
        inFlight--;
        maybeStop();
      }
    }
  };
  const as = me.on_behalf_of === undefined ? me.user : `${me.user} on behalf of ${me.on_behalf_of}`;
  process.stderr.write(
    `mdvfs-mcp: serving ${dataDir} as ${as}${me.workspace ? ` in workspace ${me.workspace.name}` : ''}\n`,
  );
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
