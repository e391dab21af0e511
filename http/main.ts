/**
 * `mdvfs http`: the HTTP sidecar (REST + MCP) for the daemon of SERVICE_DATA_DIR; `mdvfs serve`
 * runs SERVICE_HTTP_WORKERS of them as node:cluster workers sharing one listen address.
 * Standalone it starts a background daemon when none runs; under `mdvfs serve` (an IPC channel
 * to the parent) it only connects, because serve owns the daemon. With SERVICE_DAEMONS it never
 * starts a daemon: it uses the active one of the list.
 *
 * If the daemon connection drops (the daemon died or was restarted, a failover), the sidecar keeps
 * its listener and reconnects in place (daemon/rpc/reconnecting.ts): requests wait briefly for the
 * new link, then get 503 + Retry-After. It never exits for that, so the port stays open.
 */
import type { AddressInfo } from 'node:net';
import type { DaemonClient } from '../daemon/rpc/client.js';
import { connectDaemon, defaultDataDir } from '../daemon/rpc/connect.js';
import { ReconnectingClient } from '../daemon/rpc/reconnecting.js';
import { VfsError } from '../daemon/errors.js';
import { createApp, logFields } from './app.js';
import { daemonConnected } from './metrics.js';
import { setupLog } from '../daemon/rpc/log.js';
import { clientErrorResponse } from './errors.js';
import {
  daemonsFromEnv,
  formatListen,
  httpSettingsFromEnv,
  SettingsError,
  type HttpSettings,
} from '../daemon/rpc/settings.js';
import type { ListeningMessage } from './listen.js';

/** How long one reconnect attempt looks for the active daemon of SERVICE_DAEMONS before the backoff. */
const ACTIVE_SEARCH_MS = 2000;

/** Errors no retry mends: a bad setting (a TLS file, say), a socket another user could own. */
const fatal = (err: unknown): boolean =>
  err instanceof SettingsError || (err instanceof VfsError && err.code === 'EACCES');

async function connectUnderServe(dataDir: string): Promise<DaemonClient> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await connectDaemon({ dataDir, spawn: false });
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Why SERVICE_LISTEN could not be used, as one line naming the address, with our error code. */
export function listenFailure(addr: string, err: NodeJS.ErrnoException): string {
  switch (err.code ?? '') {
    case 'EADDRINUSE':
      return `cannot listen on ${addr}: the address is already in use (EBUSY)`;
    case 'EACCES':
      return `cannot listen on ${addr}: permission denied for that port (EACCES)`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `cannot listen on ${addr}: the host name does not resolve; check SERVICE_LISTEN (EINVAL)`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${addr}: no interface of this machine has that address; check SERVICE_LISTEN (EINVAL)`;
    default:
      return `cannot listen on ${addr}: ${err.code ?? err.message} (EIO)`;
  }
}

export async function runHttp(): Promise<void> {
  const dataDir = defaultDataDir();
  let settings: HttpSettings;
  try {
    settings = httpSettingsFromEnv();
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    process.stderr.write(`mdvfs http: ${err.message} (${err.code})\n`);
    process.exit(2);
  }
  const { listen } = settings;
  setupLog('http', settings.logLevel);
  const underServe = typeof process.send === 'function';
  const listed = daemonsFromEnv().length > 0;
  // Reconnects: never start a daemon under serve (it owns the daemon) nor with SERVICE_DAEMONS (a
  // front end of daemons elsewhere); standalone, only for a request waiting (not after `mdvfs stop`
  // by itself: the mount's rule, daemon/rpc/link.ts).
  const connect = (demand: boolean): Promise<DaemonClient> =>
    connectDaemon({
      dataDir,
      spawn: demand && !underServe && !listed,
      // A daemon started here gets the usual time to come up (one start, not one per attempt).
      ...(listed ? { timeoutMs: ACTIVE_SEARCH_MS } : {}),
    });
  let first: DaemonClient | null;
  if (listed) {
    // A front end of SERVICE_DAEMONS listens even while no daemon is active (503 until one is).
    try {
      first = await connect(false);
    } catch (err) {
      if (fatal(err)) {
        process.stderr.write(`mdvfs http: ${(err as Error).message}\n`);
        process.exit(err instanceof SettingsError ? 2 : 1);
      }
      logFields({ level: 'warn', msg: 'no active daemon yet; listening and retrying', err: (err as Error).message });
      first = null;
    }
  } else first = underServe ? await connectUnderServe(dataDir) : await connectDaemon({ dataDir });
  const client = new ReconnectingClient(first, { connect, isFatal: fatal, log: logFields });
  client.on('fatal', () => process.exit(1));
  if (first !== null) daemonConnected();
  client.on('connected', daemonConnected);

  let stopping = false;

  const app = createApp(client, { settings });
  const server = app.listen(listen.port, listen.host);
  server.on('error', (err: NodeJS.ErrnoException) => {
    process.stderr.write(`mdvfs http: ${listenFailure(formatListen(listen), err)}\n`);
    process.exit(1);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && err.code?.startsWith('HPE_')) socket.end(clientErrorResponse(err));
    else socket.destroy();
  });
  server.on('listening', () => {
    const addr = server.address() as AddressInfo;
    if (underServe) {
      const msg: ListeningMessage = { type: 'listening', host: listen.host, port: addr.port };
      process.send?.(msg);
    } else {
      process.stderr.write(
        `mdvfs: http listening on http://${formatListen({ host: listen.host, port: addr.port })} (data: ${dataDir})\n`,
      );
    }
  });

  const stop = () => {
    if (stopping) return;
    stopping = true;
    server.close(() => {
      client.close();
      process.exit(0);
    });
    server.closeIdleConnections();
    // In-flight requests get a moment to finish; their writes are acknowledged by the daemon either way.
    setTimeout(() => {
      server.closeAllConnections();
      client.close();
      process.exit(0);
    }, 2000).unref();
  };
  process.on('SIGTERM', stop);
  // Under serve a terminal's Ctrl-C reaches the workers too (they share serve's process group):
  // serve stops them in order (SIGTERM), so they wait for that.
  process.on('SIGINT', underServe ? () => undefined : stop);
  // Under serve: if serve itself dies (even by SIGKILL), the IPC channel closes and we stop too.
  if (underServe) process.on('disconnect', stop);
}
