/**
 * Front ends given several daemons on one PostgreSQL database (SERVICE_DAEMONS) use the active one
 * and follow it across a kill -9: the CLI, mdvfs-mcp over stdio, and REST through two `mdvfs serve`.
 */
import t from 'tap';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { runCli } from '../helpers/cli.js';
import { readText, spawnDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { servePids } from '../helpers/http.js';
import { call, errorCode, startServe, stdioClient, text as toolText } from '../helpers/mcp.js';
import { until } from '../helpers/poll.js';
import { startPostgres } from '../helpers/postgres.js';
import { makePki, tlsAddress } from '../helpers/tls.js';

const cluster = startPostgres(t);
cluster.catch(() => undefined); // each test awaits it and fails with the reason

const role = async (d: TestDaemon): Promise<string | undefined> => (await d.client.call('sys.status', {})).role;

t.test('front ends given SERVICE_DAEMONS use the active daemon and follow it after a failover', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const a = await spawnDaemon(t, { SERVICE_STORE: url });
  const b = await spawnDaemon(t, { SERVICE_STORE: url });
  t.equal(await role(b), 'standby');
  // The standby first: it is skipped.
  const daemons = `${socketPathFor(b.dataDir)},${socketPathFor(a.dataDir)}`;
  // No data dir of their own: the list is all they use.
  const nowhere = path.join(tempDir(), 'none');
  const cliEnv = { ...process.env, SERVICE_DAEMONS: daemons, SERVICE_DATA_DIR: nowhere };
  const w = await runCli(cliEnv, ['write', '-n', '/cli.md', 'from the cli']);
  t.equal(w.code, 0, w.stderr);
  t.equal(await readText(a.client.as({}), '/cli.md'), 'from the cli', 'the CLI wrote through the active daemon');
  const mcp = await stdioClient(t, nowhere, { SERVICE_DAEMONS: daemons });
  t.equal(
    errorCode(await call(mcp.client, 'write_file', { path: '/mcp.md', content: 'from mcp' })),
    undefined,
    'MCP writes through the active daemon',
  );
  await a.kill('SIGKILL');
  await until(async () => (await role(b)) === 'active', 'the standby to take over');
  t.equal(
    toolText(await call(mcp.client, 'read_file', { path: '/mcp.md' })).includes('from mcp'),
    true,
    'the MCP server reconnected to the new active daemon',
  );
  t.equal(errorCode(await call(mcp.client, 'write_file', { path: '/mcp2.md', content: 'after failover' })), undefined);
  t.equal(await readText(b.client.as({}), '/mcp2.md'), 'after failover');
  const r = await runCli(cliEnv, ['cat', '/cli.md']);
  t.equal(r.stdout, 'from the cli', 'the CLI finds the new active daemon');
  const none = await runCli({ ...cliEnv, SERVICE_DAEMONS: socketPathFor(a.dataDir) }, ['cat', '/cli.md']);
  t.not(none.code, 0, 'no active daemon in the list: a clear error');
  t.match(none.stderr, /no active daemon among SERVICE_DAEMONS/);
  t.notOk(existsSync(nowhere), 'no data dir was made for them');
});

t.test(
  'two mdvfs serve on one database: REST through either keeps working across a kill -9 of the active daemon',
  async (t) => {
    const pg = await cluster;
    const url = await pg.createDb();
    const dirA = tempDir();
    const dirB = tempDir();
    t.teardown(() => {
      rmSync(dirA, { recursive: true, force: true });
      rmSync(dirB, { recursive: true, force: true });
    });
    const env = { SERVICE_STORE: url, SERVICE_DAEMONS: `${socketPathFor(dirA)},${socketPathFor(dirB)}` };
    const sa = await startServe(t, { dataDir: dirA, env });
    await until(() => existsSync(socketPathFor(dirA)), 'the first daemon');
    const sb = await startServe(t, { dataDir: dirB, env });
    const put = async (base: string, p: string, body: string): Promise<number> =>
      (await fetch(`${base}/fs/${p}`, { method: 'PUT', body })).status;
    const get = async (base: string, p: string): Promise<string | number> => {
      const r = await fetch(`${base}/fs/${p}`);
      return r.status === 200 ? await r.text() : r.status;
    };
    t.equal(
      await put(sb.base, 'via-b.md', 'through serve B'),
      200,
      "serve B's sidecar writes through the active daemon (serve A's)",
    );
    t.equal(await get(sa.base, 'via-b.md'), 'through serve B');
    const daemonA = servePids(sa.proc.pid!).daemon;
    t.ok(daemonA !== undefined, "serve A's daemon");
    process.kill(daemonA!, 'SIGKILL');
    // Both sidecars lose their daemon connection, are restarted by their serve, and find the new active daemon.
    await until(
      async () => (await get(sa.base, 'via-b.md')) === 'through serve B',
      'REST through serve A after the failover',
      60000,
    );
    await until(
      async () => (await get(sb.base, 'via-b.md')) === 'through serve B',
      'REST through serve B after the failover',
      60000,
    );
    t.equal(await put(sa.base, 'after.md', 'after the failover'), 200);
    const b = await connectSocket(socketPathFor(dirB));
    t.teardown(() => b.close());
    t.equal((await b.call('sys.status', {})).role, 'active', "serve B's daemon is the active one now");
    t.equal(await readText(b.as({}), '/after.md'), 'after the failover');
    await until(async () => {
      const c = await connectSocket(socketPathFor(dirA));
      try {
        return (await c.call('sys.status', {})).role === 'standby';
      } finally {
        c.close();
      }
    }, "serve A's restarted daemon to wait as a standby");
  },
);

t.test('over TLS: front ends given two tls:// addresses follow the active daemon across a kill -9', async (t) => {
  const pg = await cluster;
  const url = await pg.createDb();
  const pki = makePki(t);
  const a = await spawnDaemon(t, { SERVICE_STORE: url, ...pki.daemonEnv() });
  const b = await spawnDaemon(t, { SERVICE_STORE: url, ...pki.daemonEnv() });
  t.equal(await role(b), 'standby');
  const [addrA, addrB] = [await tlsAddress(a.client), await tlsAddress(b.client)];
  t.not(addrA, addrB);
  // The standby first, and no data dir nor socket of their own: the tls:// addresses are all they use.
  const nowhere = path.join(tempDir(), 'none');
  const front = pki.frontEnv(`${addrB},${addrA}`);
  const cliEnv = { ...process.env, SERVICE_DATA_DIR: nowhere, ...front };
  const w = await runCli(cliEnv, ['write', '-n', '/tls.md', 'over tls']);
  t.equal(w.code, 0, w.stderr);
  t.equal(await readText(a.client.as({}), '/tls.md'), 'over tls', 'the CLI wrote through the active daemon');
  const mcp = await stdioClient(t, nowhere, front);
  t.equal(errorCode(await call(mcp.client, 'write_file', { path: '/mcp.md', content: 'from mcp' })), undefined);
  await a.kill('SIGKILL');
  await until(async () => (await role(b)) === 'active', 'the standby to take over');
  const r = await runCli(cliEnv, ['cat', '/tls.md']);
  t.equal(r.stdout, 'over tls', 'the CLI finds the new active daemon over TLS');
  t.equal(
    errorCode(await call(mcp.client, 'write_file', { path: '/mcp2.md', content: 'after failover' })),
    undefined,
    'the MCP server reconnected over TLS to the new active daemon',
  );
  t.equal(await readText(b.client.as({}), '/mcp2.md'), 'after failover');
  t.equal(await readText(b.client.as({}), '/mcp.md'), 'from mcp');
  t.notOk(existsSync(nowhere), 'no data dir was made for them');
});
