/**
 * `mdvfs mount --writeback`: an unlink the daemon is known to accept (its last unlink in the same
 * directory was accepted and nothing concerning the directory was reported since) is answered at once
 * and sent behind the answer. What must hold: everything removed reaches the daemon, a name removed
 * and made again comes out as made, and whatever could change the daemon's answer (a sticky
 * directory, a chmod made elsewhere) makes the mount ask again, so a refusal is still a refusal.
 */
import t from 'tap';
import { eventually, mount, okIn, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
const asAlice = root.as({ authorization: 'User alice' });
// Alice's mount works in /w, a directory of hers.
await root.call('fs.mkdir', { path: '/w' });
await root.call('fs.chown', { path: '/w', owner: 'alice' });
const m = await mount(t, d, ['--writeback', '--user', 'alice']);
const ok = okIn({ ...m, sh: (cmd: string) => m.sh(`cd w && ${cmd}`) });
const sh = (cmd: string): ReturnType<typeof m.sh> => m.sh(`cd w && ${cmd}`);

async function exists(path: string): Promise<boolean> {
  try {
    await root.call('fs.stat', { path });
    return true;
  } catch {
    return false;
  }
}

async function daemonText(path: string): Promise<string | null> {
  try {
    return (await root.request('fs.read', { path })).data.toString('utf8');
  } catch {
    return null;
  }
}

void t.test('rm -rf of files the daemon holds removes every one of them from the daemon', async (t) => {
  for (let i = 0; i < 300; i++)
    await asAlice.call(
      'fs.write',
      { path: `/w/rm/d${i % 3}/f${i}.md`, parents: true },
      { data: Buffer.from(`${i}\n`) },
    );
  t.equal((await ok(t, 'find rm -type f | wc -l')).trim(), '300', 'the mount lists them');
  await ok(t, 'rm -rf rm');
  t.equal((await sh('ls rm')).code, 2, 'the directory is gone for the mount');
  t.notOk(await exists('/w/rm'), 'and for the daemon: rmdir waited for the unlinks in it');
});

void t.test('a name removed and made again at once holds what was made', async (t) => {
  await ok(t, 'mkdir -p again && for i in 1 2 3 4 5 6; do echo old$i > again/f$i; done');
  await ok(t, 'for i in 1 2 3 4 5 6; do rm again/f$i && echo new$i > again/f$i; done');
  await ok(t, 'rm again/f1 && mkdir again/f1 && echo inside > again/f1/x');
  for (let i = 2; i <= 6; i++)
    t.ok(await eventually(async () => (await daemonText(`/w/again/f${i}`)) === `new${i}\n`, 5000, 20), `f${i} is new`);
  t.ok(
    await eventually(async () => (await daemonText('/w/again/f1/x')) === 'inside\n', 5000, 20),
    'a directory made where a file was removed',
  );
  t.equal(await ok(t, 'cat again/f6'), 'new6\n');
});

void t.test('a sticky directory makes every unlink ask the daemon', async (t) => {
  await root.call('fs.mkdir', { path: '/w/tmpdir' });
  await root.call('fs.chmod', { path: '/w/tmpdir', mode: 0o1777 });
  await root.call('fs.write', { path: '/w/tmpdir/roots.md' }, { data: Buffer.from('root\n') });
  await ok(t, 'echo a > tmpdir/a1 && echo a > tmpdir/a2 && rm tmpdir/a1 && rm tmpdir/a2');
  const r = await sh('rm -f tmpdir/roots.md');
  t.not(r.code, 0, 'removing root`s file from a sticky directory fails');
  t.match(r.stderr, /not permitted|Permission denied/);
  t.ok(await exists('/w/tmpdir/roots.md'), 'and the daemon still has it');
  t.equal(await ok(t, 'cat tmpdir/roots.md'), 'root\n', 'so does the mount');
});

void t.test('a chmod made elsewhere makes the next unlink ask the daemon again', async (t) => {
  for (let i = 1; i <= 3; i++)
    await asAlice.call('fs.write', { path: `/w/ro/f${i}`, parents: true }, { data: Buffer.from(`${i}\n`) });
  await ok(t, 'rm ro/f1 && rm ro/f2');
  await asAlice.call('fs.chmod', { path: '/w/ro', mode: 0o555 });
  t.ok(
    await eventually(async () => (await sh('stat -c %a ro')).stdout.trim() === '555', 5000, 20),
    'the mount saw the chmod',
  );
  const r = await sh('rm -f ro/f3');
  t.not(r.code, 0, 'the unlink in a directory no longer writable fails');
  t.match(r.stderr, /Permission denied/);
  t.equal(await daemonText('/w/ro/f3'), '3\n', 'and the file stays');
  t.equal(m.stderr().match(/refused after it was answered/g), null, 'nothing was answered that the daemon refused');
});
