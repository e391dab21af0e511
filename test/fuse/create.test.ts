/**
 * Creating a file through the mount: when the daemon's answer is known (the mount's last create in
 * that directory succeeded and nothing concerning the directory was reported since), the create is
 * answered without a daemon call and the file reaches the daemon with its first flush, in one call,
 * durable when close(2) returns. A change that could alter the answer (a chmod of the directory)
 * sends the next create to the daemon again, so its refusal is returned by open(2) itself.
 */
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { eventually, mount, okIn, skipWithoutFuse, sleep, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
const m = await mount(t, d, ['--user', 'alice']);
const ok = okIn(m);

/** Resolves with `work`'s value, or with 'blocked' if it has not settled after `ms` (a daemon call waits). */
function unlessBlocked<T>(work: Promise<T>, ms: number): Promise<T | 'blocked'> {
  return Promise.race([work, sleep(ms).then(() => 'blocked' as const)]);
}

void t.test('a create whose answer is known needs no daemon call; close sends it, durable', async (t) => {
  await ok(t, 'mkdir home/alice/notes && printf "one\\n" > home/alice/notes/first.md');
  const file = path.join(m.dir, 'home', 'alice', 'notes', 'second.md');
  d.proc.kill('SIGSTOP'); // any daemon call now waits until SIGCONT
  let fh: fsp.FileHandle | 'blocked' = 'blocked';
  let closing: Promise<void> | undefined;
  let shownIno = 0;
  try {
    fh = await unlessBlocked(fsp.open(file, 'w'), 20000);
    t.not(fh, 'blocked', 'open(O_CREAT|O_TRUNC) returns with the daemon stopped');
    if (fh === 'blocked') return;
    await fh.write('two\n');
    t.equal((await fh.stat()).size, 4, 'fstat sees the buffered size');
    shownIno = (await fh.stat()).ino;
    closing = fh.close(); // the flush waits for the daemon
  } finally {
    d.proc.kill('SIGCONT');
  }
  await closing;
  const st = await root.call('fs.stat', { path: '/home/alice/notes/second.md' });
  t.equal(st.size, 4, 'the daemon holds the file when close returns');
  t.equal((await root.call('fs.read', { path: '/home/alice/notes/second.md' })).etag, st.etag);
  t.equal(st.uid, (await root.call('fs.stat', { path: '/home/alice/notes/first.md' })).uid, 'owned by the principal');
  t.equal(st.mode, '0644', 'with the mode asked for (umask applied)');
  t.equal(
    (await m.sh('stat -c %i home/alice/notes/second.md')).stdout.trim(),
    String(shownIno),
    'after close the mount still shows the inode number the file was created with',
  );
  t.equal(await ok(t, 'cat home/alice/notes/second.md'), 'two\n');
});

void t.test('files created in a row all arrive, renamed or removed while open included', async (t) => {
  await ok(t, 'mkdir home/alice/many && for i in $(seq 1 50); do printf "n$i\\n" > home/alice/many/n$i.md; done');
  const list = await root.call('fs.list', { path: '/home/alice/many' });
  t.equal(list.entries.length, 50, 'every file reached the daemon');
  t.equal((await root.call('fs.read', { path: '/home/alice/many/n50.md' })).size, 4);
  // Renamed while still open (an atomic save that renames before closing), and a file never closed
  // before being removed: the daemon ends with exactly the right names.
  await ok(
    t,
    'exec 3> home/alice/many/tmp; printf saved >&3; mv home/alice/many/tmp home/alice/many/saved.md; printf "+" >&3; exec 3>&-',
  );
  t.equal(await ok(t, 'cat home/alice/many/saved.md'), 'saved+');
  t.equal((await m.sh('cat home/alice/many/tmp')).code, 1, 'the temporary name is gone');
  await ok(t, 'exec 3> home/alice/many/gone; printf x >&3; rm home/alice/many/gone; exec 3>&-');
  const names = (await root.call('fs.list', { path: '/home/alice/many' })).entries.map((e) => e.name);
  t.ok(names.includes('saved.md') && !names.includes('tmp') && !names.includes('gone'), 'the daemon agrees');
  t.equal((await root.call('fs.list', { path: '/home/alice/many' })).entries.length, 51);
});

void t.test('after a change concerning the directory, the create asks the daemon: EACCES at open', async (t) => {
  await ok(t, 'mkdir home/alice/locked && printf "a\\n" > home/alice/locked/a.md');
  await root.call('fs.chmod', { path: '/home/alice/locked', mode: '0555' });
  t.ok(
    await eventually(async () => (await m.sh('stat -c %a home/alice/locked')).stdout.trim() === '555'),
    'the chmod reached the mount',
  );
  // The listing is fetched again after the chmod (it is valid): only the create's own record is stale.
  t.equal(await ok(t, 'ls home/alice/locked'), 'a.md\n');
  const r = await m.sh('printf "b\\n" > home/alice/locked/b.md');
  t.not(r.code, 0, 'the redirection fails');
  t.match(r.stderr, /locked\/b\.md: Permission denied/, 'open(2) returns EACCES');
  await t.rejects(root.call('fs.stat', { path: '/home/alice/locked/b.md' }), { code: 'ENOENT' }, 'nothing was created');
  t.equal((await m.sh('ls home/alice/locked')).stdout, 'a.md\n', 'the mount does not show it either');
});

void t.test('a file created here keeps its inode number once the daemon has it', async (t) => {
  await ok(t, 'mkdir -p home/alice/ino');
  const file = path.join(m.dir, 'home', 'alice', 'ino', 'kept.md');
  const fh = await fsp.open(file, 'w'); // answered by the mount (not O_EXCL): a provisional number
  const first = (await fh.stat()).ino;
  await fh.write('content\n');
  await fh.sync(); // the daemon has the file now, under its own inode number
  t.equal((await fh.stat()).ino, first, 'fstat after fsync');
  t.equal((await fsp.stat(file)).ino, first, 'stat after fsync');
  await fh.close();
  t.equal((await fsp.stat(file)).ino, first, 'stat after close');
  t.equal((await root.request('fs.read', { path: '/home/alice/ino/kept.md' })).data.toString(), 'content\n');
});

void t.test('a SQLite database in the mount takes transaction after transaction', async (t) => {
  await ok(t, 'mkdir -p home/alice/db');
  const file = path.join(m.dir, 'home', 'alice', 'db', 'notes.sqlite');
  // SQLite refuses to write to a database whose st_ino changed since it was opened (moved away):
  // the first commit sends the new file to the daemon, and the second would fail.
  let db = new Database(file);
  db.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)');
  const insert = db.prepare('INSERT INTO notes (body) VALUES (?)');
  for (let i = 0; i < 20; i++) insert.run(`note ${i} ${'x'.repeat(500)}`);
  db.close();
  db = new Database(file);
  t.equal((db.prepare('SELECT count(*) AS n FROM notes').get() as { n: number }).n, 20, 'reopened: every row');
  t.equal((db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check, 'ok');
  db.close();
  const stored = await root.call('fs.stat', { path: '/home/alice/db/notes.sqlite' });
  t.equal(stored.size, (await fsp.stat(file)).size, 'the daemon holds the whole database');
  t.equal((await m.sh('ls home/alice/db')).stdout, 'notes.sqlite\n', 'its journal is gone');
});
