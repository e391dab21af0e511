/**
 * Pending attribution survives a daemon restart (issue 15): an agent writes on behalf of alice, the
 * daemon process is killed and started again, alice commits, and the commit still names the agent,
 * with the SQLite store and with PostgreSQL (a private cluster).
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { makePersonas, spawnDaemon, text, type TestDaemon } from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';
import { coreFrom } from '../helpers/core.js';

async function agentWorkSurvives(t: Test, d: TestDaemon): Promise<void> {
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/shared', parents: true, mode: '1777' });
  await p.alice.call('fs.write', { path: '/shared/a.md', mode: '0666' }, text('a v1\n'));
  await p.root.call('vcs.commit', { message: 'base' });
  await p.agentForAlice.call('fs.write', { path: '/shared/a.md' }, text('agent v2\n'));
  await p.agentForAlice.call('fs.write', { path: '/shared/plan.md' }, text('plan\n'));
  await p.alice.call('fs.write', { path: 'mine.md' }, text('mine\n'));

  await d.kill('SIGKILL');
  await d.restart();
  const alice = d.client.as({ authorization: 'User alice' });
  const root = d.client.as({});
  const c = await alice.call('vcs.commit', { message: 'accept the agent' });
  const show = await root.call('vcs.show', { rev: c.hash });
  t.same(
    show.changes,
    [
      { path: '/home/alice/mine.md', op: 'added', by: 'alice' },
      { path: '/shared/a.md', op: 'modified', by: 'agent', on_behalf_of: 'alice' },
      { path: '/shared/plan.md', op: 'added', by: 'agent', on_behalf_of: 'alice' },
    ],
    'the agent is still credited after the restart',
  );
  // the marks of what was committed are gone: another restart and a change by alice credits alice
  await d.kill('SIGKILL');
  await d.restart();
  const alice2 = d.client.as({ authorization: 'User alice' });
  await alice2.call('fs.write', { path: '/shared/plan.md' }, text('alice edits\n'));
  const c2 = await alice2.call('vcs.commit', { message: 'alice edits' });
  t.same((await d.client.as({}).call('vcs.show', { rev: c2.hash })).changes, [
    { path: '/shared/plan.md', op: 'modified', by: 'alice' },
  ]);
  // an undo after a restart finds the agent's pending changes too
  await d.client
    .as({ authorization: `Bearer ${p.tokens.agent}`, onBehalfOf: 'alice' })
    .call('fs.write', { path: '/shared/a.md' }, text('agent again\n'));
  await d.kill('SIGKILL');
  await d.restart();
  const u = await d.client.as({ authorization: 'User alice' }).call('vcs.undo', { actor: 'agent' });
  t.same(u.paths, ['/shared/a.md']);
}

/**
 * A commit forgets the marks of its own scope only, in the store as in memory (one range per
 * commit): a workspace's commit keeps those of directories whose names merely start like its root.
 */
async function commitForgetsItsScope(t: Test, d: TestDaemon): Promise<void> {
  const p = await makePersonas(d.client);
  for (const dir of ['/srv/ws', '/srv/ws-2', '/srv/ws0'])
    await p.root.call('fs.mkdir', { path: dir, parents: true, mode: '1777' });
  const w = await p.root.call('ws.create', { name: 'proj', root_path: '/srv/ws' });
  const { secret } = await p.root.call('ws.token', { id: w.id, name: 'ci', agent_token: p.tokens.agent });
  await p.root.call('vcs.commit', { message: 'base' });
  for (const f of ['/srv/ws/in.md', '/srv/ws-2/out.md', '/srv/ws0/out.md'])
    await p.agentForAlice.call('fs.write', { path: f }, text('by the agent\n'));
  const ws = d.client.as({ authorization: `Bearer ${secret}`, workspace: w.id });
  t.equal((await ws.call('vcs.commit', { message: 'the workspace' })).changes, 1);

  await d.kill('SIGKILL');
  await d.restart();
  const root = d.client.as({});
  const c = await root.call('vcs.commit', { message: 'everything' });
  t.same(
    (await root.call('vcs.show', { rev: c.hash })).changes,
    [
      { path: '/srv/ws/in.md', op: 'added', by: 'root' },
      { path: '/srv/ws-2/out.md', op: 'added', by: 'agent', on_behalf_of: 'alice' },
      { path: '/srv/ws0/out.md', op: 'added', by: 'agent', on_behalf_of: 'alice' },
    ],
    "the workspace's commit forgot its own marks and kept its neighbours'",
  );
}

t.test('SQLite store', async (t) => {
  await agentWorkSurvives(t, await spawnDaemon(t, { SERVICE_STORE: 'sqlite' }));
  await commitForgetsItsScope(t, await spawnDaemon(t, { SERVICE_STORE: 'sqlite' }));
});

t.test('in one batch, a commit drops the marks set before it and keeps those set after it', async (t) => {
  const { core } = await coreFrom(t);
  const root = core.registry.authenticate({}, { anonymous: 'root', userAuth: true });
  // one turn: the three land in the same pending batch
  core.vfs.write(root, '/before.md', Buffer.from('a'));
  core.vcs.commit(root, { id: '', root: '/' }, 'everything so far');
  core.vfs.write(root, '/after.md', Buffer.from('b'));
  core.store.flushNow();
  t.same([...core.store.markRows().keys()], ['/after.md']);
});

t.test('a SQLite store from before pending_attribution was WITHOUT ROWID keeps its marks', async (t) => {
  const d = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' });
  const p = await makePersonas(d.client);
  await p.root.call('fs.mkdir', { path: '/shared', parents: true, mode: '1777' });
  await p.root.call('vcs.commit', { message: 'base' });
  await p.agentForAlice.call('fs.write', { path: '/shared/plan.md' }, text('plan\n'));
  await d.kill('SIGKILL');
  const file = path.join(d.dataDir, 'store.db');
  const tableSql = (db: Database.Database): string =>
    db.prepare("SELECT sql FROM sqlite_master WHERE name = 'pending_attribution'").pluck().get() as string;
  // the table as stores before this change had it: a rowid table with a text primary key
  const old = new Database(file);
  t.match(tableSql(old), /WITHOUT ROWID/, 'a new store makes the table WITHOUT ROWID');
  old.exec(`CREATE TABLE pa_old (path TEXT PRIMARY KEY, by_user TEXT NOT NULL, on_behalf_of TEXT, seq INTEGER NOT NULL, subtree INTEGER NOT NULL);
    INSERT INTO pa_old SELECT * FROM pending_attribution; DROP TABLE pending_attribution;
    ALTER TABLE pa_old RENAME TO pending_attribution;`);
  t.notMatch(tableSql(old), /WITHOUT ROWID/);
  t.ok((old.prepare('SELECT count(*) FROM pending_attribution').pluck().get() as number) > 0);
  old.close();

  await d.restart();
  const c = await d.client.as({ authorization: 'User alice' }).call('vcs.commit', { message: 'accept' });
  t.same((await d.client.as({}).call('vcs.show', { rev: c.hash })).changes, [
    { path: '/shared/plan.md', op: 'added', by: 'agent', on_behalf_of: 'alice' },
  ]);
  await d.kill('SIGKILL');
  const after = new Database(file, { readonly: true });
  t.match(tableSql(after), /WITHOUT ROWID/, 'the daemon moved the rows to the new table');
  after.close();
});

t.test('PostgreSQL store', async (t) => {
  const pg = await startPostgres(t);
  await agentWorkSurvives(t, await spawnDaemon(t, { SERVICE_STORE: await pg.createDb() }));
  await commitForgetsItsScope(t, await spawnDaemon(t, { SERVICE_STORE: await pg.createDb() }));
});
