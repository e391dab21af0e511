/**
 * A paused active daemon (SIGSTOP: hung, or cut off by a partition) is not an outage for as long as it
 * stays stopped (issue 31, item 2): front ends given SERVICE_DAEMONS find it silent (heartbeat and a
 * deadline on the handshake) and move to the standby once it has taken the lease, while the paused
 * daemon is still stopped. Before, their requests waited until the old daemon woke.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { runCli, type RunResult } from '../helpers/cli.js';
import { readText, spawnDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { call, errorCode, stdioClient } from '../helpers/mcp.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined);

const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;
/** Whether a process is stopped (state T in /proc). */
const stopped = (pid: number): boolean => / T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\)/, ')'));
/** `p`, or a rejection after `ms`: a front end that still waits for the paused daemon fails here instead of hanging the file. */
const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    p,
    new Promise<never>((_r, reject) =>
      setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms (still waiting for the paused daemon)`)), ms),
    ),
  ]);

t.test('front ends move to the new active daemon while the old one stays stopped', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const lease = { SERVICE_LEASE_TIMEOUT_MS: '3000' };
  const a = await spawnDaemon(t, { SERVICE_STORE: url, ...lease });
  const b = await spawnDaemon(t, { SERVICE_STORE: url, ...lease });
  t.equal(await role(b), 'standby');
  const daemons = `${socketPathFor(a.dataDir)},${socketPathFor(b.dataDir)}`;
  const nowhere = path.join(tempDir(), 'none');
  const env = { SERVICE_DAEMONS: daemons, ...lease };
  const mcp = await stdioClient(t, nowhere, env);
  t.equal(errorCode(await call(mcp.client, 'write_file', { path: '/before.md', content: 'before' })), undefined);

  const pid = a.proc.pid!;
  process.kill(pid, 'SIGSTOP');
  let resumed = false;
  const resume = (): void => {
    if (resumed) return;
    resumed = true;
    process.kill(pid, 'SIGCONT');
  };
  t.teardown(resume); // before spawnDaemon's SIGTERM: a stopped process would not exit
  try {
    await until(async () => (await role(b)) === 'active', 'the standby to take the lease of the paused daemon');
    // The MCP server's connection to the paused daemon: the heartbeat drops it; a call that was
    // in flight then fails, so the call is repeated once.
    const write = async (): Promise<string | undefined> =>
      errorCode(await call(mcp.client, 'write_file', { path: '/during.md', content: 'while paused' }));
    let code = await within(write(), 60_000, 'MCP write_file');
    if (code !== undefined) code = await within(write(), 60_000, 'MCP write_file, again');
    t.equal(code, undefined, 'MCP writes through the new active daemon');
    t.equal(await readText(b.client.as({}), '/during.md'), 'while paused');
    const cli: RunResult = await within(
      runCli({ ...process.env, ...env, SERVICE_DATA_DIR: nowhere }, ['write', '-n', '/cli.md', 'from the cli']),
      60_000,
      'mdvfs write',
    );
    t.equal(cli.code, 0, cli.stderr);
    t.equal(await readText(b.client.as({}), '/cli.md'), 'from the cli', 'a new CLI passes over the paused daemon');
    t.ok(stopped(pid), 'all of it while the old daemon is still stopped');
  } finally {
    resume();
  }
});
