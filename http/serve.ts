/**
 * `mdvfs serve` (and `npm start`): the daemon and SERVICE_HTTP_WORKERS HTTP sidecar processes (the
 * workers, node:cluster children sharing the listen address). A worker is restarted whenever it dies; the daemon too (the workers reconnect in place), whoever
 * started it: a daemon found running (started in the background by the CLI, say) is held by this
 * serve (`sys.hold`) and replaced by one of ours when it dies. A data dir another live serve holds
 * is refused at once (one line naming it and that serve's pid, exit 1).
 * Front end only: with SERVICE_DAEMONS and without SERVICE_STORE (a machine that serves no store of
 * its own), serve starts no daemon and runs just the workers, which use the active daemon of the list.
 * SIGINT/SIGTERM stop the workers first, then the daemon (which flushes on SIGTERM), then exit 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import cluster, { type Worker } from 'node:cluster';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { connectSocket, type DaemonClient } from '../daemon/rpc/client.js';
import { announceNewDataDir, defaultDataDir, EXIT_LOCKED, socketPathFor } from '../daemon/rpc/connect.js';
import { PRIVATE_UMASK, securePrivateDataDir, verifySocket } from '../daemon/rpc/private-dir.js';
import {
  daemonsFromEnv,
  EXIT_STORE_CONFIG,
  formatListen,
  httpSettingsFromEnv,
  SettingsError,
  storeFromEnv,
  storeLabel,
  type HttpSettings,
} from '../daemon/rpc/settings.js';
import type { ListeningMessage } from './listen.js';
import { DAEMON_V8_FLAGS } from '../daemon/node-flags.js';

const say = (line: string): void => {
  process.stderr.write(`mdvfs: ${line}\n`);
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The CLI entry next to this module (dist/cli/main.js, or the .ts source under a TS loader). */
function cliEntry(): string {
  const here = fileURLToPath(import.meta.url);
  return path.join(path.dirname(here), '..', 'cli', `main${path.extname(here)}`);
}

/** A connection to the data dir's daemon, or null when none answers. */
async function daemonConnection(dataDir: string): Promise<DaemonClient | null> {
  try {
    const sock = socketPathFor(dataDir);
    verifySocket(sock); // a socket another user could own is not our daemon
    return await connectSocket(sock);
  } catch {
    return null;
  }
}

/**
 * Security: hosted mode: while the store needs bootstrap, the daemon keeps a one-time secret in the
 * data dir (created now if missing) that `POST /auth/bootstrap` needs; say where it is (never what).
 */
async function announceBootstrapSecret(conn: DaemonClient): Promise<void> {
  try {
    const r = await conn.call('auth.bootstrapSecret', {});
    if (r.file !== undefined)
      say(
        `hosted mode: this server has no administrator yet; the one-time bootstrap secret is in ${r.file} (POST /auth/bootstrap {"username": ..., "secret": ...}, or the web UI); it is deleted once used`,
      );
  } catch (err) {
    say(`could not prepare the bootstrap secret: ${(err as Error).message}`);
  }
}

function waitExit(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export async function runServe(): Promise<void> {
  const dataDir = defaultDataDir();
  // Every setting is checked before anything starts: a bad one is one line and exit 2.
  let settings: HttpSettings;
  // The store the daemons this serve starts use (SERVICE_STORE); a daemon found running must use the same.
  let store: string;
  // A front end only: daemons elsewhere (SERVICE_DAEMONS), no store of this machine's own (SERVICE_STORE).
  let frontOnly: boolean;
  try {
    settings = httpSettingsFromEnv();
    store = storeLabel(storeFromEnv());
    frontOnly = daemonsFromEnv().length > 0 && (process.env.SERVICE_STORE ?? '').trim() === '';
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    say(`${err.message} (${err.code})`);
    process.exit(2);
  }
  let listen = settings.listen;
  // Security: the data dir is 0700 and its files 0600 whoever creates them (the children inherit the umask).
  process.umask(PRIVATE_UMASK);
  // A front end only keeps nothing in a data dir: none is made for it.
  const existed = frontOnly || existsSync(dataDir);
  try {
    if (!frontOnly) securePrivateDataDir(dataDir);
  } catch (err) {
    say((err as Error).message.replace(/^[A-Z]+: /, ''));
    process.exit(1);
  }
  if (!existed) announceNewDataDir(dataDir);
  const cli = cliEntry();
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dataDir };
  delete env.MDVFS_STARTED_BY;
  delete env.MDVFS_SERVE_PID;

  let stopping = false;
  let daemon: ChildProcess | null = null;
  let daemonExit: number | null = null;
  let announced = false;
  const daemonStarts: number[] = [];

  // Children get their own process group: a terminal's Ctrl-C reaches only us, and we stop them in order.
  // MDVFS_SERVE_PID: the daemon is held by this serve from birth (no other serve can take it, it never idles out).
  const startDaemon = (): void => {
    daemonStarts.push(Date.now());
    daemonExit = null;
    const child = spawn(process.execPath, [...DAEMON_V8_FLAGS, ...process.execArgv, cli, 'daemon'], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...env, MDVFS_SERVE_PID: String(process.pid) },
      detached: true,
    });
    daemon = child;
    child.once('exit', (code, signal) => {
      if (daemon !== child) return;
      daemon = null;
      daemonExit = code ?? 1;
      // EXIT_LOCKED: another daemon holds the data dir; the supervisor below finds out whose it is.
      if (!stopping && code !== EXIT_LOCKED) say(`daemon exited (${signal ?? code})`);
    });
  };

  /**
   * Makes sure a daemon serves the data dir and that this serve holds it: starts ours when none
   * answers (at most 5 starts a minute), adopts one found running, and refuses (exit 1) a data dir
   * another live serve holds. Resolves with a connection to the daemon, or null when stopping.
   */
  let hadDaemon = false;
  const ensureDaemon = async (): Promise<DaemonClient | null> => {
    let waitedSince = Date.now();
    for (;;) {
      if (stopping) return null;
      const c = await daemonConnection(dataDir);
      if (c !== null) {
        let holder: number;
        let pid: number;
        let theirs: string;
        try {
          ({ pid, store: theirs } = await c.call('sys.status', {}));
          // A daemon on another store (e.g. one a CLI command started without this SERVICE_STORE) is
          // refused before it is held: restarting it after a crash would switch the data under the clients.
          holder = theirs === store ? (await c.call('sys.hold', { pid: process.pid })).held_by : process.pid;
        } catch {
          c.close(); // it went away meanwhile: look again
          await sleep(50);
          continue;
        }
        if (theirs !== store) {
          c.close();
          say(
            `a daemon (pid ${pid}) already serves ${dataDir} from ${theirs}, not from ${store} (SERVICE_STORE); stop it first ('mdvfs stop') or set the same SERVICE_STORE`,
          );
          await shutdown(1);
          return null;
        }
        if (holder !== process.pid) {
          c.close();
          say(
            `${dataDir} is already served by mdvfs serve pid ${holder} (daemon pid ${pid}); stop it first ('mdvfs stop') or set another SERVICE_DATA_DIR`,
          );
          await shutdown(1);
          return null;
        }
        if (daemon === null && daemonStarts.length === 0)
          say(`a daemon (pid ${pid}) already serves ${dataDir}; using it, and restarting one if it dies`);
        else if (daemon === null) say(`daemon pid ${pid} now serves ${dataDir}; using it`);
        hadDaemon = true;
        return c;
      }
      if (daemon === null) {
        // Its store setting cannot work (the daemon said why): restarting it would only say it again.
        if (daemonExit === EXIT_STORE_CONFIG) {
          say(`the daemon cannot use ${store} (SERVICE_STORE; its message is above); stopping`);
          await shutdown(1);
          return null;
        }
        const recent = daemonStarts.filter((t) => Date.now() - t < 60_000);
        if (recent.length >= 5) {
          say(`the daemon keeps dying (exit ${daemonExit ?? '?'}); giving up`);
          await shutdown(1);
          return null;
        }
        if (hadDaemon && daemonExit !== EXIT_LOCKED) say(`no daemon answers for ${dataDir}; starting one`);
        // EXIT_LOCKED: another daemon is coming up on this data dir; give it a moment before trying again.
        if (daemonExit === EXIT_LOCKED) await sleep(200);
        else if (daemonStarts.length > 0) await sleep(200);
        if (stopping) return null;
        startDaemon();
        waitedSince = Date.now();
      } else if (Date.now() - waitedSince > 30_000) {
        say(`the daemon for ${dataDir} did not start within 30 s`);
        await shutdown(1);
        return null;
      }
      await sleep(50);
    }
  };

  // The HTTP workers (SERVICE_HTTP_WORKERS), node:cluster children of this process sharing the listen
  // address. Each worker is its own `mdvfs http` with its own daemon connection; one that dies is
  // restarted. SCHED_NONE: the workers accept from the one shared listening socket themselves. With
  // the default round robin this process accepts and hands each connection over, and a connection
  // handed to a worker that dies meanwhile stays open here with nobody to answer it (the client
  // waits for its own timeout); with SCHED_NONE a dead worker takes only what it had accepted.
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  cluster.setupPrimary({
    exec: cli,
    args: ['http'],
    execArgv: [...process.execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const workers: (Worker | null)[] = Array.from({ length: settings.workers }, () => null);
  const backoff: number[] = workers.map(() => 200);
  let sidecarStarted = false;
  let failedBeforeListening = 0;
  // The address workers ask the cluster for. They must all ask for the same one while any of them
  // lives (the cluster shares one listening socket per address); once port 0 got a port, workers
  // started after all others died ask for that port, so the service comes back where it was.
  let listenAsked = listen;
  const alive = (): number => workers.filter((w) => w !== null).length;
  const startWorker = (slot: number): void => {
    const started = Date.now();
    if (alive() === 0) listenAsked = listen;
    // MDVFS_WORKER (internal): the slot, which names the worker in its metrics (http/metrics.ts).
    const worker = cluster.fork({ ...env, SERVICE_LISTEN: formatListen(listenAsked), MDVFS_WORKER: String(slot + 1) });
    workers[slot] = worker;
    worker.on('message', (m: ListeningMessage) => {
      if (m?.type !== 'listening') return;
      // Keep the port we got (port 0 asks for a free one) so a restarted worker comes back on it.
      listen = { host: m.host, port: m.port };
      if (!announced) {
        announced = true;
        say(
          `listening on http://${formatListen(listen)} (${frontOnly ? 'front end of SERVICE_DAEMONS' : `data: ${dataDir}`}${settings.workers > 1 ? `, ${settings.workers} http workers` : ''})`,
        );
      }
    });
    worker.once('exit', (code, signal) => {
      if (stopping || workers[slot] !== worker) return;
      workers[slot] = null;
      // A worker that never got to listen (port taken, bad address) will not do better next time.
      if (!announced && ++failedBeforeListening >= 3) {
        say(`the http sidecar could not start (${signal ?? code}, 3 times); stopping`);
        void shutdown(1);
        return;
      }
      const wait = (backoff[slot] = Date.now() - started > 10_000 ? 200 : Math.min((backoff[slot] ?? 200) * 2, 5000));
      say(
        `http ${settings.workers > 1 ? `worker ${slot + 1}` : 'sidecar'} exited (${signal ?? code}); restarting in ${wait} ms`,
      );
      setTimeout(() => {
        if (!stopping) startWorker(slot);
      }, wait);
    });
  };
  const startSidecar = (): void => {
    for (let slot = 0; slot < workers.length; slot++) startWorker(slot);
  };

  const shutdown = async (exitCode: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await Promise.all(
      workers.map((w) => {
        if (w === null) return;
        w.process.kill('SIGTERM');
        return waitExit(w.process, 5000);
      }),
    );
    const d = daemon;
    if (d) {
      d.kill('SIGTERM');
      await waitExit(d, 30_000);
    }
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  process.on('SIGHUP', () => void shutdown(0));

  if (frontOnly) {
    // No daemon here: the workers find the active one of SERVICE_DAEMONS and follow it (http/main.ts).
    sidecarStarted = true;
    startSidecar();
    return;
  }
  // Supervise: hold a connection to the daemon; when it closes (the daemon died, whoever started
  // it), bring one back. The workers reconnect to it in place (http/main.ts).
  for (;;) {
    const conn = await ensureDaemon();
    if (conn === null) return;
    if (!sidecarStarted && !stopping) {
      if (settings.mode === 'hosted') await announceBootstrapSecret(conn);
      sidecarStarted = true;
      startSidecar();
    }
    await new Promise<void>((resolve) => conn.once('close', () => resolve()));
    if (stopping) return;
  }
}
