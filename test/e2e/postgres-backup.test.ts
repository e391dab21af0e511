/**
 * Backups and restore with `mdvfs migrate` both ways (issue 31): a SQLite store moved into PostgreSQL,
 * a backup of the live PostgreSQL store into a new data dir (its daemon keeps serving) and into
 * another database, each served again and compared with the original: tree (content, modes, owners,
 * times, inode numbers), users, groups, tokens, workspaces, history and the pending attribution.
 */
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../helpers/cli.js';
import {
  authSnapshot,
  makePersonas,
  readText,
  spawnDaemon,
  tempDir,
  text,
  treeSnapshot,
  type TestDaemon,
} from '../helpers/daemon.js';
import { startPostgres } from '../helpers/postgres.js';

/** What a served store holds, as its users see it. */
async function snapshot(d: TestDaemon): Promise<string> {
  const root = d.client.as({});
  const log = (await root.call('vcs.log', {})).commits.map((c) => `${c.hash} ${c.author} ${c.message}`);
  const status = await root.call('vcs.status', {});
  return JSON.stringify({ tree: await treeSnapshot(root), auth: await authSnapshot(root), log, status });
}

/** Who made the pending changes: what a commit on that store records. */
async function pendingBy(d: TestDaemon): Promise<string[][]> {
  const root = d.client.as({});
  const c = await root.call('vcs.commit', { message: 'who wrote what' });
  return (await root.call('vcs.show', { rev: c.hash })).changes.map((x) => [x.path, x.by]).sort();
}

t.test(
  'a store goes SQLite → PostgreSQL → (live backup) SQLite and PostgreSQL, and every copy is the same',
  async (t) => {
    const pg = await startPostgres(t);
    const url = await pg.createDb();
    const copyUrl = await pg.createDb();
    const src = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' });
    const p = await makePersonas(src.client);
    await p.alice.call('fs.write', { path: 'a/b/c.md', mode: '0640' }, text('c'));
    await p.alice.call('fs.symlink', { target: 'b/c.md', path: 'a/link' });
    await p.alice.call('fs.write', { path: 'a/hist.md' }, text('kept only by history'));
    await p.root.call('fs.mkdir', { path: '/srv/ws', parents: true });
    const ws = await p.root.call('ws.create', { name: 'space', root_path: '/srv/ws' });
    const secret = (await p.root.call('ws.token', { id: ws.id, name: 'w1', agent_token: p.tokens.agent })).secret;
    const commit = await p.root.call('vcs.commit', { message: 'snapshot' });
    await p.alice.call('fs.delete', { path: 'a/hist.md' });
    await p.bob.call('fs.write', { path: '/tmp/bob.md' }, text('pending, by bob'));
    const original = await snapshot(src);
    await src.kill('SIGTERM');

    const m = await runCli(process.env, ['migrate', '--from', src.dataDir, '--to', url]);
    t.equal(m.code, 0, m.stderr);
    const live = await spawnDaemon(t, { SERVICE_STORE: url });
    t.equal(await snapshot(live), original, 'SQLite → PostgreSQL: the same store');

    // Backups of the live store: its daemon keeps serving meanwhile.
    const dir = path.join(tempDir(), 'backup');
    const b = await runCli(process.env, ['migrate', '--from', url, '--to', dir]);
    t.equal(b.code, 0, b.stderr);
    t.match(b.stdout, /migrate: ok .* to .*backup/);
    await live.client.as({}).call('fs.write', { path: '/after-backup.md' }, text('not in the backup'));
    t.equal(await readText(live.client.as({}), '/after-backup.md'), 'not in the backup', 'the live daemon served on');
    const c = await runCli(process.env, ['migrate', '--from', url, '--to', copyUrl]);
    t.equal(c.code, 0, c.stderr);

    const restored = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' }, dir);
    t.equal(await snapshot(restored), original, 'PostgreSQL → SQLite (a portable backup): the same store');
    const copy = await spawnDaemon(t, { SERVICE_STORE: copyUrl });
    const copied = JSON.parse(await snapshot(copy)) as { tree: string };
    t.match(copied.tree, /after-backup\.md/, 'PostgreSQL → PostgreSQL: a later snapshot, with the later write');
    t.equal(
      (await restored.client.as({ authorization: `Bearer ${p.tokens.admin}` }).call('auth.whoami', {})).user,
      'admin',
      'tokens authenticate against the backup',
    );
    t.equal(
      (await restored.client.as({ authorization: `Bearer ${secret}`, workspace: ws.id }).call('auth.whoami', {}))
        .workspace?.id,
      ws.id,
      'workspace secrets too',
    );
    t.equal(
      (
        await restored.client.as({}).request('vcs.cat', { rev: commit.hash, path: '/home/alice/a/hist.md' })
      ).data.toString(),
      'kept only by history',
      'history is in the backup',
    );
    t.same(
      await pendingBy(restored),
      [
        ['/home/alice/a/hist.md', 'alice'],
        ['/tmp/bob.md', 'bob'],
      ],
      'who made the pending changes came along',
    );
  },
);

t.test('migrate refuses what it cannot copy into, and leaves it as it was', async (t) => {
  const pg = await startPostgres(t);
  const url = await pg.createDb();
  const live = await spawnDaemon(t, { SERVICE_STORE: url });
  await live.client.as({}).call('fs.write', { path: '/x.md' }, text('x'));
  const taken = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' });
  await taken.kill('SIGTERM');
  const r = await runCli(process.env, ['migrate', '--from', url, '--to', taken.dataDir]);
  t.not(r.code, 0, 'not into a data dir that holds a store');
  t.match(r.stderr, /already holds a store/);
  const same = await runCli(process.env, ['migrate', '--from', taken.dataDir, '--to', taken.dataDir]);
  t.not(same.code, 0);
  t.match(same.stderr, /data dir/);
  const busy = await runCli(process.env, ['migrate', '--from', taken.dataDir, '--to', url]);
  t.not(busy.code, 0, 'not into a database a daemon leads');
  t.match(busy.stderr, /EBUSY|another mdvfs daemon|not empty/);
  const junk = path.join(tempDir(), 'junk');
  mkdirSync(junk, { mode: 0o700 });
  writeFileSync(path.join(junk, 'store.db'), 'not a database', { mode: 0o600 });
  const bad = await runCli(process.env, ['migrate', '--from', url, '--to', junk]);
  t.not(bad.code, 0, 'not into a file that is not a store');
  t.equal(await readText(live.client.as({}), '/x.md'), 'x', 'the source is untouched');
});
