/**
 * The change events of the mount's own unlinks, rmdirs and creates (issue 18): the kernel removed an
 * entry itself when the unlink or rmdir was answered, so its event drops only the directory's
 * attributes, no entry. What must hold all the same: what the kernel shows after each of them is what
 * the daemon holds, and a change made elsewhere to the same names still shows within 1 s.
 */
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { eventually, mount, okIn, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
const m = await mount(t, d, ['--user', 'alice']);
const ok = okIn(m);
const home = '/home/alice';

/** The contract: a change made elsewhere shows in the mount within 1 s. */
const WITHIN_MS = 1000;

void t.test('a file removed through the mount is gone, and one made there again elsewhere shows', async (t) => {
  await ok(t, 'mkdir home/alice/rm && for i in 1 2 3; do echo $i > home/alice/rm/f$i; done');
  await ok(t, 'ls -l home/alice/rm > /dev/null && rm home/alice/rm/f1 home/alice/rm/f2');
  t.equal(await ok(t, 'ls home/alice/rm'), 'f3\n', 'the listing lost both');
  t.equal((await m.sh('cat home/alice/rm/f1')).code, 1, 'the name is gone for the mount');
  await t.rejects(root.call('fs.stat', { path: `${home}/rm/f1` }), /ENOENT|no such/i, 'and for the daemon');
  await root.call('fs.write', { path: `${home}/rm/f1` }, { data: Buffer.from('again\n') });
  t.ok(
    await eventually(async () => (await m.sh('cat home/alice/rm/f1')).stdout === 'again\n', WITHIN_MS, 20),
    'a file written at that name through the daemon shows within 1 s',
  );
  t.equal(await ok(t, 'ls home/alice/rm'), 'f1\nf3\n');
  await ok(t, 'rm home/alice/rm/f1 && echo mine > home/alice/rm/f1');
  t.equal(await ok(t, 'cat home/alice/rm/f1'), 'mine\n', 'removed and made again through the mount');
  const st = await root.call('fs.stat', { path: `${home}/rm/f1` });
  t.equal(st.size, 5, 'the daemon holds the new one');
});

void t.test('a directory removed through the mount is gone, and one made there again elsewhere shows', async (t) => {
  await ok(t, 'mkdir -p home/alice/tree/a/b && echo x > home/alice/tree/a/b/f && ls -lR home/alice/tree > /dev/null');
  await ok(t, 'rm -r home/alice/tree/a');
  t.equal(await ok(t, 'ls -A home/alice/tree'), '', 'gone for the mount');
  await t.rejects(root.call('fs.stat', { path: `${home}/tree/a` }), /ENOENT|no such/i, 'and for the daemon');
  await root.call('fs.write', { path: `${home}/tree/a/b/g`, parents: true }, { data: Buffer.from('g\n') });
  t.ok(
    await eventually(async () => (await m.sh('cat home/alice/tree/a/b/g')).stdout === 'g\n', WITHIN_MS, 20),
    'a tree written there through the daemon shows within 1 s',
  );
  t.equal(await ok(t, 'ls home/alice/tree/a/b'), 'g\n', 'with only what the daemon holds');
});

void t.test('a file removed through the mount while open is still read through its descriptor', async (t) => {
  await ok(t, 'echo kept > home/alice/open.md');
  const fh = await fsp.open(path.join(m.dir, 'home', 'alice', 'open.md'), 'r');
  try {
    await ok(t, 'rm home/alice/open.md');
    t.equal((await fh.readFile()).toString('utf8'), 'kept\n');
    t.equal((await fh.stat()).nlink, 0, 'with no link left');
  } finally {
    await fh.close();
  }
  t.equal((await m.sh('cat home/alice/open.md')).code, 1, 'the name is gone');
});

void t.test('after each file created in a directory, its times and size are the daemon`s', async (t) => {
  await ok(t, 'mkdir home/alice/many');
  const daemonDir = async (): Promise<string> => {
    const st = await root.call('fs.stat', { path: `${home}/many`, nofollow: true });
    return `${st.mtime_ns} ${st.size}`;
  };
  // stat -c '%.9Y %s': the mtime to the nanosecond, as the daemon reports mtime_ns, and the size.
  const mountDir = async (): Promise<string> => {
    const [sec, frac, size] = (await ok(t, "stat -c '%.9Y %s' home/alice/many")).trim().split(/[. ]/);
    return `${BigInt(sec!) * 1_000_000_000n + BigInt(frac!)} ${size}`;
  };
  // Asked after every file is closed, and once more while it is open (the kernel then holds the
  // directory's attributes from before the daemon had the file, until the file's event drops them).
  for (let i = 0; i < 4; i++) {
    await ok(t, `exec 3> home/alice/many/f${i} && stat home/alice/many > /dev/null && echo ${i} >&3 && exec 3>&-`);
    t.equal(await mountDir(), await daemonDir(), `after f${i}`);
  }
  // Several creates with none asked in between.
  await ok(t, 'for i in 4 5 6 7; do echo $i > home/alice/many/f$i; done');
  t.equal(await mountDir(), await daemonDir(), 'after four more');
  await ok(t, 'touch home/alice/many && echo 8 > home/alice/many/f8');
  t.equal(await mountDir(), await daemonDir(), 'after a touch of the directory and one more file');
  t.equal((await ok(t, 'ls home/alice/many | wc -l')).trim(), '9');
});
