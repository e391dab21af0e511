/**
 * `mdvfs status` and `mdvfs stop`: the daemon of SERVICE_DATA_DIR as a process. Neither starts a
 * daemon; both say plainly when none runs.
 */
import type { DaemonClient } from '../daemon/rpc/client.js';
import { connectDaemon, defaultDataDir, processAlive } from '../daemon/rpc/connect.js';
import type { DaemonStatus } from '../daemon/rpc/protocol.js';
import { CliError } from './errors.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function running(dataDir: string): Promise<DaemonClient | null> {
  try {
    return await connectDaemon({ dataDir, spawn: false, daemons: [] }); // this data dir's own daemon, whatever SERVICE_DAEMONS lists
  } catch {
    return null;
  }
}

function duration(secs: number): string {
  const d = Math.floor(secs / 86400);
  const h = Math.floor((secs % 86400) / 3600);
  const m = Math.floor((secs % 3600) / 60);
  const s = secs % 60;
  return [d ? `${d}d` : '', h ? `${h}h` : '', m ? `${m}m` : '', `${s}s`].filter(Boolean).join(' ');
}

function startedBy(st: DaemonStatus): string {
  if (st.served_by !== undefined) return `kept up by mdvfs serve (pid ${st.served_by})`;
  if (st.started_by === 'foreground') return 'in the foreground (mdvfs daemon)';
  const how = st.started_by === 'serve' ? 'by an mdvfs serve that is gone' : 'in the background by a client';
  return `${how}; ${st.idle_exit > 0 ? `exits after ${st.idle_exit} s with no clients` : 'does not exit when idle (SERVICE_IDLE_EXIT=0)'}`;
}

/** The status of the daemon running for `dataDir`, or null when none runs (nothing is started). */
async function statusOf(dataDir: string): Promise<DaemonStatus | null> {
  const client = await running(dataDir);
  if (client === null) return null;
  try {
    return await client.call('sys.status', {});
  } finally {
    client.close();
  }
}

/** `mdvfs status [--json]`: exit 0 when a daemon runs, 1 when none does. */
export async function runStatus(opts: { json?: boolean }): Promise<void> {
  const dataDir = defaultDataDir();
  const st = await statusOf(dataDir);
  if (st === null) {
    if (opts.json) process.stdout.write(`${JSON.stringify({ running: false, data_dir: dataDir })}\n`);
    else process.stdout.write(`no daemon runs for ${dataDir}\n`);
    process.exitCode = 1;
    return;
  }
  // `clients` counts the daemon's other clients: this command's own connection is left out.
  const others = Math.max(0, st.clients - 1);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ running: true, ...st, clients: others })}\n`);
    return;
  }
  process.stdout.write(
    [
      `daemon:   pid ${st.pid}, up ${duration(st.uptime)}, version ${st.version}`,
      `started:  ${startedBy(st)}`,
      `data dir: ${st.data_dir}`,
      `socket:   ${st.socket}`,
      ...(st.listen === undefined ? [] : [`listen:   ${st.listen} (TLS and the shared secret)`]),
      `users: ${st.users}, files: ${st.files}, commits: ${st.commits}, clients: ${others}`,
      ...(st.role === undefined
        ? []
        : [
            `role:     ${st.role}, epoch ${st.epoch ?? 0}${
              st.role === 'standby'
                ? `, lag ${st.lag ?? 0} change(s), active daemon ${st.active ?? 'unknown'}`
                : `, committed change ${st.committed_seq ?? 0}`
            }`,
            ...(st.role === 'standby'
              ? [`stream:   applied change ${st.applied_seq ?? 0} of ${st.head_seq ?? 0}`]
              : []),
          ]),
      '',
    ].join('\n'),
  );
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (processAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/** SIGTERM to `pid`, then waits until it is gone (ETIMEDOUT after `ms`). */
async function terminate(pid: number, ms: number, what: string): Promise<void> {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    // gone meanwhile
  }
  if (!(await waitGone(pid, ms))) throw new CliError('ETIMEDOUT', `${what} did not stop within ${ms / 1000} s`);
}

/** `mdvfs stop`: SIGTERM (which flushes) to the serve that keeps the daemon up, then to the daemon. */
export async function runStop(): Promise<void> {
  const dataDir = defaultDataDir();
  const st = await statusOf(dataDir);
  if (st === null) {
    process.stderr.write(`mdvfs: no daemon runs for ${dataDir}; nothing to stop\n`);
    return;
  }
  if (st.served_by !== undefined) {
    // The serve would start a new daemon at once: stop it (it stops its sidecar and its daemon).
    process.stderr.write(`mdvfs: stopping mdvfs serve (pid ${st.served_by}) of ${dataDir}\n`);
    await terminate(st.served_by, 40_000, `mdvfs serve (pid ${st.served_by})`);
  }
  if (processAlive(st.pid)) await terminate(st.pid, 30_000, `the daemon (pid ${st.pid}) of ${dataDir}`);
  process.stderr.write(`mdvfs: stopped the daemon (pid ${st.pid}) of ${dataDir}\n`);
}
