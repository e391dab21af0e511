/**
 * Issue 30 (low): every identity change (user, group, token, workspace, secret) rewrote every
 * identity row on the event loop (41-75 ms at 6,000 secrets, growing with their number). Now a
 * change writes only the rows it changed. Counted by SQLite triggers the test adds to the store of a
 * real `mdvfs serve`, while identity changes are made over REST. (The PostgreSQL store shares the
 * diff, daemon/store/store.ts AuthRowDiff; test/e2e/postgres-store.test.ts covers its statements.)
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { client, startService, tempDataDir } from '../helpers/http.js';

if (process.env.MDVFS_TEST_STORE === 'postgres') {
  t.plan(0, 'counts rows with SQLite triggers');
  process.exit(0);
}

const TABLES = ['users', 'groups_', 'workspaces', 'ws_tokens'];

t.test('an identity change writes the rows it changed, not every row', async (t) => {
  const dataDir = tempDataDir(t);
  let svc = await startService(t, { dataDir });
  const root = client(svc);
  for (let i = 0; i < 40; i++)
    t.equal((await root.post('/admin/users', { name: `u${i}`, is_agent: true })).status, 200);
  await svc.stop();

  // Every row written to the identity tables, counted by triggers.
  const file = path.join(dataDir, 'store.db');
  const db = new Database(file, { timeout: 30000 });
  db.exec('CREATE TABLE test_writes (n INTEGER NOT NULL); INSERT INTO test_writes VALUES (0);');
  for (const table of TABLES)
    for (const ev of ['INSERT', 'UPDATE', 'DELETE'])
      db.exec(
        `CREATE TRIGGER test_${table}_${ev} AFTER ${ev} ON ${table} BEGIN UPDATE test_writes SET n = n + 1; END;`,
      );
  db.close();
  // The daemon holds the store exclusively: rows are counted while no daemon runs.
  const writes = (): number => {
    const r = new Database(file, { readonly: true, timeout: 30000 });
    try {
      return (r.prepare('SELECT n FROM test_writes').get() as { n: number }).n;
    } finally {
      r.close();
    }
  };
  /** The rows one identity change writes, in a service of its own (a restart loads what was written). */
  const rowsWritten = async (change: (c: ReturnType<typeof client>) => Promise<number>): Promise<number> => {
    const before = writes();
    svc = await startService(t, { dataDir });
    t.equal(await change(client(svc)), 200);
    await svc.stop();
    return writes() - before;
  };

  const user = await rowsWritten(async (c) => (await c.post('/admin/users', { name: 'zed' })).status);
  t.ok(user <= 2, `adding a user writes its user and group rows (${user}), not the 40 others'`);
  const token = await rowsWritten(async (c) => (await c.post('/admin/users/u7/tokens')).status);
  t.ok(token <= 2, `a new token rewrites one user row (${token})`);
  const del = await rowsWritten(async (c) => (await c.del('/admin/users/u3')).status);
  t.ok(del <= 2, `deleting a user deletes its rows (${del})`);
  // Workspaces and their secrets (text keys): one written, one revoked.
  let ws = '';
  let secretId = '';
  const made = await rowsWritten(async (c) => {
    const agentToken: string = (await c.post('/admin/users/u9/tokens')).json.token;
    ws = (await c.post('/workspaces', { name: 'proj', root_path: '/srv/proj' })).json.id;
    const r = await c.post(`/workspaces/${ws}/tokens`, { name: 'ci', agent_token: agentToken });
    secretId = r.json.token_id;
    return r.status;
  });
  t.ok(made <= 3, `a workspace and a secret: their rows and the agent's (${made})`);
  const revoked = await rowsWritten(async (c) => (await c.del(`/workspaces/${ws}/tokens/${secretId}`)).status);
  t.equal(revoked, 1, 'revoking a secret deletes its row');

  // What was written is what a restart loads.
  svc = await startService(t, { dataDir });
  const names = ((await client(svc).get('/admin/users')).json.users as { name: string }[]).map((u) => u.name);
  t.ok(names.includes('zed') && !names.includes('u3') && names.includes('u7'), 'the changes survive a restart');
  t.equal(names.length, 1 + 40 + 1 - 1);
  const groups = ((await client(svc).get('/admin/groups')).json.groups as { name: string }[]).map((g) => g.name);
  t.ok(groups.includes('zed') && !groups.includes('u3'), 'so do the groups');
  const tokens = (await client(svc).get(`/workspaces/${ws}/tokens`)).json.tokens as unknown[];
  t.same(tokens, [], 'and the revocation');
});
