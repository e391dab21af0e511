/**
 * Real programs on a real mount (as root): what people and editors do in a directory must work.
 * Every step also checks what the daemon holds, through its own socket, so the mount cannot pass by
 * only agreeing with its own caches.
 */
import t from 'tap';
import { eventually, mount, okIn, sh, skipWithoutFuse, startDaemon, tempDir } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const m = await mount(t, d);
const root = d.client;

async function daemonText(path: string): Promise<string> {
  return (await root.request('fs.read', { path })).data.toString('utf8');
}

const ok = okIn(m);

void t.test('echo >, >>, cat and ls -l', async (t) => {
  await ok(t, 'mkdir -p notes && echo "# Title" > notes/a.md && echo "line two" >> notes/a.md');
  t.equal(await ok(t, 'cat notes/a.md'), '# Title\nline two\n');
  t.equal(await daemonText('/notes/a.md'), '# Title\nline two\n', 'the daemon has the content after close');
  const ls = await ok(t, 'ls -l notes');
  t.match(ls, /^-rw-r--r-- 1 root root 17 .* a\.md$/m, 'ls -l shows mode, owner, size and name');
  await ok(t, 'echo replaced > notes/a.md');
  t.equal(await daemonText('/notes/a.md'), 'replaced\n', '> truncates and replaces');
});

void t.test('mkdir -p, cp -r, grep -r, find', async (t) => {
  await ok(
    t,
    'mkdir -p proj/docs/deep/er && printf "alpha\\nneedle here\\n" > proj/docs/deep/er/x.md && printf "needle too\\n" > proj/docs/y.md',
  );
  await ok(t, 'cp -r proj proj-copy');
  t.equal(await daemonText('/proj-copy/docs/deep/er/x.md'), 'alpha\nneedle here\n');
  const grep = await ok(t, 'grep -rn needle proj-copy | sort');
  t.equal(grep, 'proj-copy/docs/deep/er/x.md:2:needle here\nproj-copy/docs/y.md:1:needle too\n');
  const find = await ok(t, 'find proj -name "*.md" | sort');
  t.equal(find, 'proj/docs/deep/er/x.md\nproj/docs/y.md\n');
  t.equal(await ok(t, 'find proj -type d | sort'), 'proj\nproj/docs\nproj/docs/deep\nproj/docs/deep/er\n');
});

void t.test('sed -i and vim -es edit and save', async (t) => {
  await ok(t, 'printf "one\\ntwo\\nthree\\n" > edit.md');
  await ok(t, "sed -i 's/two/TWO/' edit.md");
  t.equal(await daemonText('/edit.md'), 'one\nTWO\nthree\n', 'sed -i (temp file + rename) saved');
  await ok(t, "vim -es -u NONE -c '%s/three/THREE/' -c 'wq' edit.md");
  t.equal(await daemonText('/edit.md'), 'one\nTWO\nTHREE\n', 'vim saved');
  t.equal(await ok(t, 'ls -a | grep -c "\\.swp$" || true'), '0\n', 'no swap file left behind');
});

void t.test('mv of files, directories, and over an existing file', async (t) => {
  await ok(t, 'echo a > mv-a.md && echo b > mv-b.md && mkdir -p mvdir/sub && echo c > mvdir/sub/c.md');
  await ok(t, 'mv mv-a.md mv-renamed.md');
  t.equal(await daemonText('/mv-renamed.md'), 'a\n');
  await t.rejects(root.call('fs.stat', { path: '/mv-a.md' }), { code: 'ENOENT' });
  await ok(t, 'mv mv-b.md mv-renamed.md');
  t.equal(await daemonText('/mv-renamed.md'), 'b\n', 'mv over an existing file replaces it');
  await ok(t, 'mv mvdir mvdir2');
  t.equal(await daemonText('/mvdir2/sub/c.md'), 'c\n', 'a directory moves with its contents');
  await ok(t, 'mkdir -p empty-target && mv mvdir2 empty-target/inner');
  t.equal(await daemonText('/empty-target/inner/sub/c.md'), 'c\n');
  await ok(t, 'mkdir -p over-a/x over-b && echo z > over-a/x/z.md && mv -T over-a over-b');
  t.equal(await daemonText('/over-b/x/z.md'), 'z\n', 'a directory replaces an empty directory');
});

void t.test('rm -r, rmdir of a non-empty directory fails', async (t) => {
  await ok(t, 'mkdir -p gone/a/b && echo x > gone/a/b/x.md && echo y > gone/y.md');
  const r = await m.sh('rmdir gone');
  t.not(r.code, 0);
  t.match(r.stderr, /Directory not empty/);
  await ok(t, 'rm -r gone');
  await t.rejects(root.call('fs.stat', { path: '/gone' }), { code: 'ENOENT' });
  t.equal((await m.sh('ls gone')).code, 2, 'ls of the removed directory fails');
});

void t.test('chmod, touch -d, ln -s and readlink', async (t) => {
  await ok(t, 'echo x > perm.md && chmod 600 perm.md');
  t.equal((await root.call('fs.stat', { path: '/perm.md' })).mode, '0600');
  t.match(await ok(t, 'stat -c %a perm.md'), /^600$/m);
  await ok(t, 'chmod g+w,o+r perm.md');
  t.equal((await root.call('fs.stat', { path: '/perm.md' })).mode, '0624');
  await ok(t, 'touch -d "2021-02-03 04:05:06 UTC" perm.md');
  t.equal(await ok(t, 'TZ=UTC stat -c %y perm.md'), '2021-02-03 04:05:06.000000000 +0000\n');
  t.equal(
    (await root.call('fs.stat', { path: '/perm.md' })).modified,
    Date.UTC(2021, 1, 3, 4, 5, 6) / 1000,
    'the daemon has the time',
  );
  await ok(t, 'ln -s perm.md link.md');
  t.equal(await ok(t, 'readlink link.md'), 'perm.md\n');
  t.equal(await ok(t, 'cat link.md'), 'x\n', 'reading through the symlink');
  t.equal((await root.call('fs.readlink', { path: '/link.md' })).target, 'perm.md');
  t.match(await ok(t, 'ls -l link.md'), /^l.* link\.md -> perm\.md$/m);
  const hard = await m.sh('ln perm.md hard.md');
  t.not(hard.code, 0, 'hard links are refused');
  t.match(hard.stderr, /Operation not permitted/);
});

void t.test('df reports the filesystem', async (t) => {
  const out = await ok(t, 'df -P .');
  t.match(out, /^mdvfs\s+\d+\s+\d+\s+\d+\s+\d+%\s+\/.*$/m);
});

void t.test('a 5 MB dd + cmp round trip', async (t) => {
  const scratch = tempDir(t);
  const r = await sh(`head -c 5000000 /dev/urandom > ${scratch}/big.bin`, scratch);
  t.equal(r.code, 0);
  await ok(t, `dd if=${scratch}/big.bin of=big.bin bs=1M status=none`);
  await ok(t, `cmp big.bin ${scratch}/big.bin`);
  t.equal((await root.call('fs.stat', { path: '/big.bin' })).size, 5000000);
  await ok(t, `dd if=big.bin of=${scratch}/back.bin bs=64k status=none && cmp ${scratch}/back.bin ${scratch}/big.bin`);
});

void t.test('an atomic save: write a temp file, then rename it over the original', async (t) => {
  await ok(t, 'echo old > saved.md');
  await ok(t, 'printf "new content\\n" > .saved.md.tmp && mv -f .saved.md.tmp saved.md');
  t.equal(await daemonText('/saved.md'), 'new content\n');
  t.equal(await ok(t, 'ls -a | grep -c saved'), '1\n', 'only the saved file remains');
  // The same through a program that keeps the temp file open while renaming (node's write + rename).
  await ok(
    t,
    `node -e "const fs=require('fs');const fd=fs.openSync('.s2','w');fs.writeSync(fd,'v2\\n');fs.fsyncSync(fd);fs.renameSync('.s2','saved.md');fs.closeSync(fd)"`,
  );
  t.equal(await daemonText('/saved.md'), 'v2\n');
});

void t.test('git init, add, commit and status inside the mount', async (t) => {
  const git = 'git -c user.name=T -c user.email=t@example.com -c init.defaultBranch=main';
  await ok(
    t,
    `mkdir -p repo && cd repo && printf "# Repo\\n" > README.md && mkdir -p docs && echo doc > docs/a.md && ${git} init -q && ${git} add -A && ${git} commit -q -m first`,
  );
  t.equal(await ok(t, 'cd repo && git status --porcelain'), '', 'the work tree is clean after the commit');
  t.match(await ok(t, 'cd repo && git log --oneline'), /first/);
  await ok(t, 'cd repo && echo more >> README.md');
  t.equal(await ok(t, 'cd repo && git status --porcelain'), ' M README.md\n');
  await ok(t, `cd repo && ${git} commit -qam second && git status --porcelain && git fsck --no-progress`);
  t.equal(await ok(t, 'cd repo && git log --format=%s'), 'second\nfirst\n');
});

void t.test('names with spaces and non-ASCII characters', async (t) => {
  await ok(t, 'mkdir -p "dir with space" && echo ü > "dir with space/naïve résumé.md"');
  t.equal(await daemonText('/dir with space/naïve résumé.md'), 'ü\n');
  t.equal(await ok(t, 'ls "dir with space"'), 'naïve résumé.md\n');
  const long = await m.sh(`touch ${'x'.repeat(256)}`);
  t.match(long.stderr, /File name too long/, 'names over 255 bytes fail with ENAMETOOLONG');
});

void t.test('a file deleted while open stays readable through its descriptor', async (t) => {
  const r = await m.sh(
    'echo kept > open-del.md && exec 3< open-del.md && rm open-del.md && cat <&3 && test ! -e open-del.md && echo gone',
  );
  t.equal(r.stdout, 'kept\ngone\n', r.stderr);
  await t.rejects(root.call('fs.stat', { path: '/open-del.md' }), { code: 'ENOENT' });
  t.ok(
    await eventually(
      async () => !/fuse_hidden/.test((await root.call('fs.list', { path: '/' })).entries.map((e) => e.name).join(' ')),
    ),
    'the hidden name is gone after the close',
  );
});

void t.test('no operation above failed with an internal error in the mount', async (t) => {
  t.notMatch(m.stderr(), /unexpected error/, m.stderr());
});
