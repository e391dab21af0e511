/**
 * `mdvfs serve` (and `npm start`): the daemon and the HTTP sidecar as two processes.
 * The sidecar is restarted whenever it dies; the daemon too (the sidecar then reconnects).
 * SIGINT/SIGTERM stop the sidecar first, then the daemon (which flushes on SIGTERM), then exit 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectSocket } from '../daemon/rpc/client.js';
import { defaultDataDir, socketPathFor } from '../daemon/rpc/connect.js';
import { PRIVATE_UMASK, securePrivateDataDir, verifySocket } from '../daemon/rpc/private-dir.js';
import { formatListen, httpSettingsFromEnv, SettingsError, type HttpSettings } from '../daemon/rpc/settings.js';
import type { ListeningMessage } from './listen.js';

const say = (line: string): void => {
  process.stderr.write(`mdvfs: ${line}\n`);
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The CLI entry next to this module (dist/cli/main.js, or the .ts source under a TS loader). */
function cliEntry(): string {
  const here = fileURLToPath(import.meta.url);
  return path.join(path.dirname(here), '..', 'cli', `main${path.extname(here)}`);
}

async function daemonAnswers(dataDir: string): Promise<boolean> {
  try {
    const sock = socketPathFor(dataDir);
    verifySocket(sock); // a socket another user could own is not our daemon
    const c = await connectSocket(sock);
    c.close();
    return true;
  } catch {
    return false;
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
  try {
    settings = httpSettingsFromEnv();
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    say(`${err.message} (${err.code})`);
    process.exit(2);
  }
  let listen = settings.listen;
  // Security: the data dir is 0700 and its files 0600 whoever creates them (the children inherit the umask).
  process.umask(PRIVATE_UMASK);
  try {
    securePrivateDataDir(dataDir);
  } catch (err) {
    say((err as Error).message.replace(/^[A-Z]+: /, ''));
    process.exit(1);
  }
  const cli = cliEntry();
  const env = { ...process.env, SERVICE_DATA_DIR: dataDir };

  let stopping = false;
  let daemon: ChildProcess | null = null;
  let sidecar: ChildProcess | null = null;
  let announced = false;
  const daemonStarts: number[] = [];

  // Children get their own process group: a terminal's Ctrl-C reaches only us, and we stop them in order.
  const startDaemon = (): ChildProcess => {
    daemonStarts.push(Date.now());
    const child = spawn(process.execPath, [...process.execArgv, cli, 'daemon'], { stdio: ['ignore', 'inherit', 'inherit'], env, detached: true });
    child.once('exit', (code, signal) => void onDaemonExit(child, code, signal));
    return child;
  };

  const onDaemonExit = async (child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): Promise<void> => {
    if (stopping || daemon !== child) return;
    daemon = null;
    if (await daemonAnswers(dataDir)) {
      say(`our daemon exited (${signal ?? code}); another daemon serves ${dataDir}, using it`);
      return;
    }
    const recent = daemonStarts.filter((t) => Date.now() - t < 60_000);
    if (recent.length >= 5) {
      say(`the daemon keeps dying (${signal ?? code}); giving up`);
      await shutdown(1);
      return;
    }
    say(`daemon exited (${signal ?? code}); restarting it`);
    await sleep(200);
    if (!stopping) daemon = startDaemon();
  };

  let sidecarBackoff = 200;
  let failedBeforeListening = 0;
  const startSidecar = (): void => {
    const started = Date.now();
    const child = spawn(process.execPath, [...process.execArgv, cli, 'http'], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...env, SERVICE_LISTEN: formatListen(listen) },
      detached: true,
    });
    sidecar = child;
    child.on('message', (m: ListeningMessage) => {
      if (m?.type !== 'listening') return;
      // Keep the port we got (port 0 asks for a free one) so a restarted sidecar comes back on it.
      listen = { host: m.host, port: m.port };
      if (!announced) {
        announced = true;
        say(`listening on http://${formatListen(listen)} (data: ${dataDir})`);
      }
    });
    child.once('exit', (code, signal) => {
      if (stopping || sidecar !== child) return;
      sidecar = null;
      // A sidecar that never got to listen (port taken, bad address) will not do better next time.
      if (!announced && ++failedBeforeListening >= 3) {
        say(`the http sidecar could not start (${signal ?? code}, 3 times); stopping`);
        void shutdown(1);
        return;
      }
      sidecarBackoff = Date.now() - started > 10_000 ? 200 : Math.min(sidecarBackoff * 2, 5000);
      say(`http sidecar exited (${signal ?? code}); restarting in ${sidecarBackoff} ms`);
      setTimeout(() => {
        if (!stopping) startSidecar();
      }, sidecarBackoff);
    });
  };

  const shutdown = async (exitCode: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    const s = sidecar;
    if (s) {
      s.kill('SIGTERM');
      await waitExit(s, 5000);
    }
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

  // Start the daemon unless one already serves this data dir, and wait for its socket.
  if (await daemonAnswers(dataDir)) {
    say(`a daemon already serves ${dataDir}; using it`);
  } else {
    daemon = startDaemon();
    const deadline = Date.now() + 30_000;
    while (!(await daemonAnswers(dataDir))) {
      if (stopping) return;
      if (daemon === null && daemonStarts.length >= 5) return;
      if (Date.now() > deadline) {
        say(`the daemon for ${dataDir} did not start within 30 s`);
        await shutdown(1);
        return;
      }
      await sleep(50);
    }
  }
  startSidecar();
}
