/**
 * File times through a real mount: `touch -d`, `touch -m`, `touch -a` and `cp -p` each set exactly the
 * times they name, and the daemon holds them.
 */
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { mount, okIn, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const m = await mount(t, d);
const root = d.client;

const ok = okIn(m);

/** atime and mtime as the mount shows them (Unix seconds), and as the daemon holds them. */
async function times(t: Test, file: string): Promise<{ mount: [number, number]; daemon: [number, number] }> {
  const out = (await ok(t, `stat -c '%X %Y' ${file}`)).trim().split(' ').map(Number);
  const st = await root.call('fs.stat', { path: `/${file}` });
  return { mount: [out[0]!, out[1]!], daemon: [Math.floor(st.accessed), Math.floor(st.modified)] };
}

const A = Date.UTC(2011, 0, 2, 3, 4, 5) / 1000;
const M = Date.UTC(2012, 5, 6, 7, 8, 9) / 1000;
const Z = Date.UTC(2013, 9, 10, 11, 12, 13) / 1000;

void t.test('touch -d sets both times; touch -m and touch -a change only their own', async (t) => {
  await ok(t, 'echo x > t.md');
  await ok(t, `touch -d @${A} t.md`);
  t.same(await times(t, 't.md'), { mount: [A, A], daemon: [A, A] }, 'touch -d: both times');
  await ok(t, `touch -m -d @${M} t.md`);
  t.same(await times(t, 't.md'), { mount: [A, M], daemon: [A, M] }, 'touch -m: mtime only, atime kept');
  await ok(t, `touch -a -d @${Z} t.md`);
  t.same(await times(t, 't.md'), { mount: [Z, M], daemon: [Z, M] }, 'touch -a: atime only, mtime kept');
  const before = Math.floor(Date.now() / 1000) - 1;
  await ok(t, 'touch -m t.md');
  const now = await times(t, 't.md');
  t.equal(now.daemon[0], Z, 'touch -m (now) keeps the atime');
  t.ok(now.daemon[1] >= before, `touch -m (now) sets mtime to the present (${now.daemon[1]} >= ${before})`);
});

void t.test('cp -p and touch -r keep distinct atime and mtime', async (t) => {
  const local = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-times-'));
  t.teardown(() => void m.sh(`rm -rf ${local}`));
  const src = path.join(local, 'src.md');
  writeFileSync(src, 'kept times\n');
  utimesSync(src, A, M);
  await ok(t, `cp -p ${src} copied.md`);
  t.same(await times(t, 'copied.md'), { mount: [A, M], daemon: [A, M] }, 'cp -p: atime and mtime of the source');
  await ok(t, 'echo y > ref-target.md');
  utimesSync(src, A, M); // cp read the source, which moved its atime (relatime)
  await ok(t, `touch -r ${src} ref-target.md`);
  t.same((await times(t, 'ref-target.md')).daemon, [A, M], 'touch -r: times of the reference file');
});

void t.test(
  'a writer who does not own the file may set "now" only (utimensat rules, decided by the daemon)',
  async (t) => {
    await root.call('admin.userAdd', { name: 'wendy' });
    await root.call('fs.write', { path: '/open.md', mode: '0666' }, { data: Buffer.from('w\n') });
    await root.call('fs.utimens', { path: '/open.md', atime: A * 1000, mtime: M * 1000 });
    const w = await mount(t, d, ['--user', 'wendy']);
    const touched = await w.sh('touch open.md');
    t.equal(touched.code, 0, `touch (both now) is allowed: ${touched.stderr}`);
    const afterTouch = await root.call('fs.stat', { path: '/open.md' });
    t.ok(afterTouch.modified > M + 3600, 'and moved mtime to the present');
    await root.call('fs.utimens', { path: '/open.md', atime: A * 1000, mtime: M * 1000 });
    const m2 = await w.sh('touch -m open.md');
    t.equal(m2.code, 0, `touch -m (now) is allowed: ${m2.stderr}`);
    t.ok((await root.call('fs.stat', { path: '/open.md' })).modified > M + 3600, 'touch -m moved mtime to the present');
    const explicit = await w.sh(`touch -m -d @${Z} open.md`);
    t.not(explicit.code, 0, 'an explicit time is refused');
    t.match(explicit.stderr, /Operation not permitted/, 'with EPERM');
    t.not(Math.floor((await root.call('fs.stat', { path: '/open.md' })).modified), Z, 'and not applied');
  },
);
