import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { spawnDaemon, makePersonas, text, DAEMON_ENTRY, tempDir } from '../helpers/daemon.js';
import { SqliteStore } from '../../daemon/store/sqlite.js';

/** Starts a daemon on a data dir expecting it to refuse; returns its exit code and stderr. */
function startExpectingRefusal(dataDir: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [DAEMON_ENTRY], {
      env: { ...process.env, SERVICE_DATA_DIR: dataDir, SERVICE_STORE: 'sqlite' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), 20000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

async function corruptedStore(t: Test, mutate: (db: Database.Database) => void): Promise<string> {
  const d = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' }); // this file edits the SQLite file itself
  const p = await makePersonas(d.client);
  await p.alice.call('fs.write', { path: 'a/b/c.md' }, text('x'));
  await p.alice.call('fs.write', { path: 'a/d.md' }, text('y'));
  await d.kill('SIGTERM');
  const db = new Database(path.join(d.dataDir, 'store.db'));
  mutate(db);
  db.close();
  return d.dataDir;
}

t.test('a parent cycle (an unreachable subtree) makes the daemon refuse to start', async (t) => {
  const dir = await corruptedStore(t, (db) => {
    const a = db.prepare("SELECT id FROM inodes WHERE name = 'a'").pluck().get() as number;
    const b = db.prepare("SELECT id FROM inodes WHERE name = 'b'").pluck().get() as number;
    db.prepare('UPDATE inodes SET parent = ? WHERE id = ?').run(b, a); // a ↔ b
  });
  const r = await startExpectingRefusal(dir);
  t.not(r.code, 0);
  t.match(r.stderr, /not reachable from \//);
});

t.test('two entries with one name in a directory make the daemon refuse to start', async (t) => {
  const dir = await corruptedStore(t, (db) => {
    db.prepare("UPDATE inodes SET name = 'b' WHERE name = 'd.md'").run();
  });
  const r = await startExpectingRefusal(dir);
  t.not(r.code, 0);
  t.match(r.stderr, /two entries named 'b'/);
});

t.test(
  'a store left by a daemon killed before its first batch (only the schema row) starts as a fresh one',
  async (t) => {
    // exactly what a first start writes before its first batch: load() records the schema version
    const dir = tempDir();
    const s = new SqliteStore(dir);
    t.equal(s.load().fresh, true);
    s.close();
    const d = await spawnDaemon(t, { SERVICE_STORE: 'sqlite' }, dir);
    t.equal((await d.client.as({}).call('auth.whoami', {})).user, 'root');
    await d.client.as({}).call('fs.write', { path: '/after.md' }, text('ok'));
    t.same((await d.client.call('sys.fsck', {})).problems, []);
  },
);
