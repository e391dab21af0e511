/**
 * POSIX behaviour that archive and copy tools rely on (`rsync -a`, `tar x`, `cp -a`, git, SQLite),
 * through a real mount: `touch -h` sets a symlink's own times, explicit times keep their nanoseconds,
 * a time changed elsewhere shows in the mount, directories count their links, root gives files to
 * any numeric uid/gid, and files of git-pack/SQLite size are taken (EFBIG only beyond the limit).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { mount, okIn, skipWithoutFuse, sleep, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const m = await mount(t, d);
const root = d.client;
const ok = okIn(m);

/** Longer than any 1 s cache of the mount: what shows after it came through a change event. */
const SETTLE_MS = 1100;

void t.test('touch -h sets the times of the symlink, never of its target', async (t) => {
  await ok(t, 'echo target > th-target.md && ln -s th-target.md th-link');
  const before = await root.call('fs.stat', { path: '/th-target.md' });
  await ok(t, 'touch -h -d @1000000000 th-link');
  const link = await root.call('fs.stat', { path: '/th-link', nofollow: true });
  t.equal(link.mtime_ns, '1000000000000000000', 'the link has the time (daemon)');
  t.equal(
    (await root.call('fs.stat', { path: '/th-target.md' })).mtime_ns,
    before.mtime_ns,
    'the target kept its own (daemon)',
  );
  t.equal((await ok(t, 'stat -c %Y th-link')).trim(), '1000000000', 'the link has it (mount)');
  t.not((await ok(t, 'stat -L -c %Y th-link')).trim(), '1000000000', 'the target has not (mount)');
});

void t.test('explicit times keep their nanoseconds (touch -d, cp -p)', async (t) => {
  await ok(t, "echo ns > ns.md && touch -d '2012-06-06 07:08:09.123456789 UTC' ns.md");
  const st = await root.call('fs.stat', { path: '/ns.md' });
  t.equal(st.mtime_ns, '1338966489123456789', 'the daemon holds every digit');
  t.equal((await ok(t, 'stat -c %.9Y ns.md')).trim(), '1338966489.123456789', 'and the mount shows them');
  const local = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-posix-'));
  t.teardown(() => void m.sh(`rm -rf ${local}`));
  const src = path.join(local, 'src.md');
  writeFileSync(src, 'source\n');
  await ok(t, `touch -d '2015-01-02 03:04:05.987654321 UTC' ${src}`);
  for (let i = 0; i < 5; i++) {
    await ok(t, `cp -p ${src} cp-${i}.md`);
    t.equal(
      (await ok(t, `stat -c %.9Y cp-${i}.md`)).trim(),
      '1420167845.987654321',
      `cp -p copy ${i} has the source's mtime exactly`,
    );
  }
});

void t.test('a time changed through the daemon shows in the mount (a change event)', async (t) => {
  await ok(t, 'echo t > ev.md && stat ev.md > /dev/null');
  await root.call('fs.utimens', { path: '/ev.md', mtime: '1234567890000000000' });
  await sleep(SETTLE_MS);
  t.equal((await ok(t, 'stat -c %Y ev.md')).trim(), '1234567890');
});

void t.test('a directory has 2 links plus one per subdirectory', async (t) => {
  await ok(t, 'mkdir -p nl/a nl/b nl/c/deep && touch nl/f.md');
  t.equal((await ok(t, 'stat -c %h nl')).trim(), '5', 'nl: a, b and c');
  t.equal((await ok(t, 'stat -c %h nl/a')).trim(), '2', 'an empty directory');
  await ok(t, 'rmdir nl/a && mv nl/c nl/b/');
  t.equal((await ok(t, 'stat -c %h nl nl/b')).trim(), '3\n3', 'after rmdir and a move');
  t.equal(
    (await ok(t, 'find nl -type d | sort')).trim(),
    'nl\nnl/b\nnl/b/c\nnl/b/c/deep',
    'find trusts the counts and still finds every directory',
  );
});

void t.test('root gives files to any numeric uid and gid (tar x, rsync -a, cp -a)', async (t) => {
  await ok(t, 'echo o > own.md && chown 54321:65432 own.md');
  t.equal((await ok(t, 'stat -c %u:%g own.md')).trim(), '54321:65432', 'the mount shows them');
  const st = await root.call('fs.stat', { path: '/own.md' });
  t.same([st.uid, st.gid], [54321, 65432], 'the daemon holds them');
  await ok(t, 'ln -s own.md own-link && chown -h 777:778 own-link');
  t.same(
    (({ uid, gid }) => [uid, gid])(await root.call('fs.stat', { path: '/own-link', nofollow: true })),
    [777, 778],
    'chown -h: the link itself',
  );
  const local = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-posix-tar-'));
  t.teardown(() => void m.sh(`rm -rf ${local}`));
  await ok(
    t,
    `mkdir -p ${local}/src/sub && echo a > ${local}/src/sub/a.md && chown -R 4242:4343 ${local}/src && tar -C ${local} -cf ${local}/t.tar src`,
  );
  await ok(t, `mkdir untar && tar -C untar -xpf ${local}/t.tar`);
  t.equal(
    (await ok(t, 'stat -c %u:%g untar/src untar/src/sub/a.md')).trim(),
    '4242:4343\n4242:4343',
    'tar x as root keeps the owners',
  );
});

void t.test('a file the size of a git pack or an SQLite database is taken whole', async (t) => {
  const local = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-posix-big-'));
  t.teardown(() => void m.sh(`rm -rf ${local}`));
  await ok(
    t,
    `head -c 24000000 /dev/urandom > ${local}/big.bin && cp ${local}/big.bin big.bin && cmp ${local}/big.bin big.bin`,
  );
  t.equal((await root.call('fs.stat', { path: '/big.bin' })).size, 24000000, 'the daemon holds all of it');
});

void t.test(
  'beyond SERVICE_MAX_FILE_SIZE a file fails at close with EFBIG, and the message names the limit',
  async (t) => {
    const small = await startDaemon(t, { SERVICE_MAX_FILE_SIZE: '1000000' });
    const sm = await mount(t, small);
    const r = await sm.sh('head -c 1100000 /dev/zero > too-big.bin');
    t.not(r.code, 0);
    t.match(r.stderr, /File too large/);
    await t.rejects(
      small.client
        .call('fs.stat', { path: '/too-big.bin' })
        .then((s) => (s.size === 1100000 ? s : Promise.reject(new Error('short')))),
      'the daemon did not take it',
    );
    await t.rejects(small.client.call('fs.write', { path: '/too-big.bin' }, { data: Buffer.alloc(1100000) }), {
      code: 'EFBIG',
      message: /1000000 bytes \(SERVICE_MAX_FILE_SIZE\)/,
    });
  },
);

void t.test('growing a file past what the mount buffers is EFBIG, by truncate as by write', async (t) => {
  for (const cmd of ['truncate -s 20G huge.bin', 'dd if=/dev/zero of=huge.bin bs=1M count=1 seek=2048']) {
    const r = await m.sh(cmd);
    t.not(r.code, 0, cmd);
    t.match(r.stderr, /File too large/, cmd);
  }
  await ok(t, 'truncate -s 1M huge.bin && rm huge.bin');
});

void t.test('appends from concurrent processes all arrive: none lost, none overwritten by zeros', async (t) => {
  // Each `>>` is an open, a write at the end and a close that sends the file; another process's open
  // then fetches the file while this one's close may still be sending it.
  const writers = ['a', 'b', 'c'].map((w) => `(for i in $(seq 300); do echo ${w}$i >> appended.md; done) &`);
  await ok(t, `${writers.join(' ')} wait`);
  const text = await ok(t, 'cat appended.md');
  const lines = text.split('\n').slice(0, -1);
  t.equal(lines.length, 900, 'every line');
  for (const w of ['a', 'b', 'c'])
    t.same(
      lines.filter((l) => l.startsWith(w)),
      Array.from({ length: 300 }, (_, i) => `${w}${i + 1}`),
      `${w}: whole, in order`,
    );
  t.equal((await root.request('fs.read', { path: '/appended.md' })).data.toString(), text, 'the daemon holds the same');
});

void t.test('appends to a large file that readers hold open all arrive', async (t) => {
  // Over 8 MiB: a reader's open fetches parts as they are read, and a writer joining it needs them all.
  const big = Buffer.from(randomBytes(7_500_000).toString('base64'));
  await root.call('fs.write', { path: '/large-appended.md' }, { data: big });
  const writers = ['a', 'b'].map((w) => `(for i in $(seq 40); do echo ${w}$i >> large-appended.md; done) &`);
  const reader = '(for i in $(seq 40); do tail -c 20 large-appended.md > /dev/null; done) &';
  await ok(t, `${writers.join(' ')} ${reader} wait`);
  const stored = (await root.request('fs.read', { path: '/large-appended.md' })).data;
  t.ok(stored.subarray(0, big.length).equals(big), 'the original bytes are kept');
  const lines = stored.subarray(big.length).toString().split('\n').slice(0, -1);
  t.equal(lines.length, 80, 'every appended line');
  t.same(
    lines.filter((l) => !/^[ab]\d+$/.test(l)),
    [],
    'each one whole',
  );
});

void t.test('no operation above failed with an internal error in the mount', async (t) => {
  t.notMatch(m.stderr(), /unexpected error/, m.stderr());
});
