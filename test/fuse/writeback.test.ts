/**
 * `mdvfs mount --writeback`: the kernel sends no open and no flush, so a warm read costs no request,
 * and written data reaches the daemon after close(2) returned (at the release of a created file, or
 * a short idle time after the last write of a file opened without a request). Real tools on a real
 * mount; every check of what was written asks the daemon through its own socket.
 */
import t, { type Test } from 'tap';
import {
  CREATE_0444_PY,
  eventually,
  mount,
  okIn,
  skipWithoutFuse,
  sleep,
  startDaemon,
  type Mount,
} from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
const asAlice = root.as({ authorization: 'User alice' });
const m = await mount(t, d, ['--writeback']);
const ok = okIn(m);

async function daemonText(path: string): Promise<string | null> {
  try {
    return (await root.request('fs.read', { path })).data.toString('utf8');
  } catch {
    return null;
  }
}

/** Polls the daemon until `path` holds `text`; returns the milliseconds that took, or -1 after 5 s. */
async function arrives(path: string, text: string, since = Date.now()): Promise<number> {
  const seen = await eventually(async () => (await daemonText(path)) === text, 5000, 10);
  return seen ? Date.now() - since : -1;
}

/** The 1-second visibility rule: REST sees what a closed descriptor wrote within 1 s. */
async function within1s(t: Test, path: string, text: string, since: number, what: string): Promise<void> {
  const ms = await arrives(path, text, since);
  t.ok(ms >= 0 && ms < 1000, `${what}: in the daemon ${ms} ms after close`);
}

void t.test('the mount says it runs in writeback mode', async (t) => {
  t.match(m.stderr(), /mounted .* \(writeback\)/);
});

void t.test('REST sees a file written through the mount within 1 s of close', async (t) => {
  await ok(t, 'mkdir -p wb');
  let since = Date.now();
  await ok(t, 'echo created > wb/new.md');
  await within1s(t, '/wb/new.md', 'created\n', since, 'a new file (released after close)');
  await root.call('fs.write', { path: '/wb/old.md' }, { data: Buffer.from('old\n') });
  t.equal(await ok(t, 'cat wb/old.md'), 'old\n');
  since = Date.now();
  await ok(t, 'echo more >> wb/old.md');
  await within1s(t, '/wb/old.md', 'old\nmore\n', since, 'an existing file opened with no request (idle time)');
  since = Date.now();
  await ok(t, 'echo replaced > wb/old.md');
  await within1s(t, '/wb/old.md', 'replaced\n', since, 'an existing file replaced');
  t.equal(await ok(t, 'cat wb/old.md wb/new.md'), 'replaced\ncreated\n', 'and the mount reads it back');
});

void t.test('a change through REST shows in the mount within 1 s, while the mount still holds the file', async (t) => {
  await root.call('fs.write', { path: '/wb/outside.md', parents: true }, { data: Buffer.from('v1\n') });
  t.equal(await ok(t, 'cat wb/outside.md'), 'v1\n');
  await root.call('fs.write', { path: '/wb/outside.md' }, { data: Buffer.from('version two, longer\n') });
  // Within 1 s, and before the mount closes its own descriptor of the file (2 s after the cat).
  await sleep(1000);
  t.equal(await ok(t, 'cat wb/outside.md'), 'version two, longer\n', 'the new, longer content (not the old size)');
});

void t.test('what was written goes to the daemon before any daemon call about its path', async (t) => {
  // Files the daemon has already (not creates, which were always sent first).
  await root.call('fs.write', { path: '/wb/before-mv.md' }, { data: Buffer.from('old\n') });
  await root.call('fs.write', { path: '/wb/before-chmod.md' }, { data: Buffer.from('old\n') });
  await ok(t, 'echo moved >> wb/before-mv.md && mv wb/before-mv.md wb/after-mv.md');
  t.equal(await daemonText('/wb/after-mv.md'), 'old\nmoved\n', 'a rename right after the close moves the content');
  await ok(t, 'echo chmodded >> wb/before-chmod.md && chmod 600 wb/before-chmod.md');
  t.equal(await daemonText('/wb/before-chmod.md'), 'old\nchmodded\n', 'so does a chmod');
});

void t.test('O_TRUNC on an existing file truncates it, and >> appends', async (t) => {
  await root.call('fs.write', { path: '/wb/trunc.md', parents: true }, { data: Buffer.from('a long old content\n') });
  t.equal(await ok(t, 'cat wb/trunc.md'), 'a long old content\n');
  await ok(t, ': > wb/trunc.md');
  t.equal(await daemonText('/wb/trunc.md'), '', 'an O_TRUNC open with no write empties the file at once');
  t.equal(await ok(t, 'stat -c %s wb/trunc.md'), '0\n');
  await ok(t, 'printf short > wb/trunc.md');
  t.ok((await arrives('/wb/trunc.md', 'short')) >= 0, 'a shorter content leaves nothing of the old one');
  await ok(t, 'printf " and more" >> wb/trunc.md && printf "!\\n" >> wb/trunc.md');
  t.equal(await ok(t, 'cat wb/trunc.md'), 'short and more!\n');
  t.ok((await arrives('/wb/trunc.md', 'short and more!\n')) >= 0, '>> appends at the end');
  await ok(t, 'truncate -s 5 wb/trunc.md');
  t.equal(await daemonText('/wb/trunc.md'), 'short', 'truncate(1)');
});

void t.test("two descriptors of one file see each other's writes", async (t) => {
  await root.call('fs.write', { path: '/wb/two.md' }, { data: Buffer.from('0123456789\n') });
  const py = `import os
w = os.open('wb/two.md', os.O_WRONLY)
r = os.open('wb/two.md', os.O_RDONLY)
os.pwrite(w, b'AB', 2)
a = os.pread(r, 11, 0)
os.pwrite(w, b'Z', 9)
w2 = os.open('wb/two.md', os.O_RDWR)
b = os.pread(w2, 11, 0)
os.pwrite(w2, b'Q', 0)
c = os.pread(r, 11, 0)
print(a.decode().strip(), b.decode().strip(), c.decode().strip())
for fd in (w, r, w2): os.close(fd)
`;
  t.equal(await ok(t, `python3 -c "${py}"`), '01AB456789 01AB45678Z Q1AB45678Z\n');
  t.ok((await arrives('/wb/two.md', 'Q1AB45678Z\n')) >= 0, 'the daemon gets the result');
});

void t.test('a file deleted while open stays readable through its descriptor', async (t) => {
  const r = await m.sh('echo kept > wb/open-del.md && exec 3< wb/open-del.md && rm wb/open-del.md && cat <&3');
  t.equal(r.stdout, 'kept\n', r.stderr);
  t.equal(await daemonText('/wb/open-del.md'), null, 'the daemon has no such file');
});

void t.test('vim and sed -i edit and save', async (t) => {
  await ok(t, 'printf "one\\ntwo\\nthree\\n" > wb/edit.md');
  await ok(t, "sed -i 's/two/TWO/' wb/edit.md");
  t.ok((await arrives('/wb/edit.md', 'one\nTWO\nthree\n')) >= 0, 'sed -i (temp file + rename) saved');
  await ok(t, "vim -es -u NONE -c '%s/three/THREE/' -c 'wq' wb/edit.md");
  t.ok((await arrives('/wb/edit.md', 'one\nTWO\nTHREE\n')) >= 0, 'vim saved');
  t.equal(await ok(t, 'cat wb/edit.md'), 'one\nTWO\nTHREE\n');
  t.equal(await ok(t, 'ls -a wb | grep -c "\\.swp$" || true'), '0\n', 'no swap file left behind');
});

async function gitRound(t: Test, mm: Mount, dir: string): Promise<void> {
  const git = 'git -c user.name=T -c user.email=t@example.com -c init.defaultBranch=main';
  const run = okIn(mm);
  await run(
    t,
    `mkdir -p ${dir} && cd ${dir} && printf "# R\\n" > README.md && mkdir docs && echo doc > docs/a.md && ${git} init -q && ${git} add -A && ${git} commit -q -m first`,
  );
  t.equal(await run(t, `cd ${dir} && git fsck --no-progress --strict 2>&1`), '', 'git fsck is clean');
  t.equal(await run(t, `cd ${dir} && git status --porcelain`), '', 'the work tree is clean');
  await run(t, `cd ${dir} && echo more >> README.md && ${git} commit -qam second && git fsck --no-progress`);
  t.equal(await run(t, `cd ${dir} && git log --format=%s`), 'second\nfirst\n');
  const object = (await run(t, `cd ${dir} && find .git/objects -type f -path "*/[0-9a-f][0-9a-f]/*" | head -1`)).trim();
  t.equal(await run(t, `cd ${dir} && stat -c %a ${object}`), '444\n', "git's loose objects are 0444");
  // What the daemon holds is a repository too: its HEAD names the second commit.
  const head = (await run(t, `cd ${dir} && git rev-parse HEAD`)).trim();
  t.ok((await arrives(`/${dir}/.git/refs/heads/main`, `${head}\n`)) >= 0, 'the daemon has the new HEAD');
}

void t.test('git init, add, commit and fsck as root', (t) => gitRound(t, m, 'repo'));

void t.test('as a regular user: git, 0444 files, and a revocation through REST', async (t) => {
  const ma = await mount(t, d, ['--user', 'alice', '--writeback']);
  const run = okIn(ma);
  await t.test('git as alice', (t) => gitRound(t, ma, 'home/alice/repo'));

  await t.test('open(O_CREAT|O_WRONLY|O_EXCL, 0444), write, close', async (t) => {
    await run(t, `python3 -c "${CREATE_0444_PY}"`);
    t.ok((await arrives('/home/alice/ro.md', 'first part\nsecond part\n')) >= 0, 'the content reached the daemon');
    t.equal((await root.call('fs.stat', { path: '/home/alice/ro.md' })).mode, '0444');
    // The creator's descriptor (its grant) is kept while it writes, and closed LOOSE_CLOSE_MS after.
    await sleep(3000);
    const again = await ma.sh('echo append >> home/alice/ro.md');
    t.match(again.stderr, /Permission denied/, 'a later write to the 0444 file fails (at write(2))');
    t.equal(await daemonText('/home/alice/ro.md'), 'first part\nsecond part\n', 'nothing changed');
  });

  await t.test('a chmod through REST is enforced on the next read and write', async (t) => {
    await asAlice.call('fs.write', { path: '/home/alice/revoked.md' }, { data: Buffer.from('readable\n') });
    t.equal(await run(t, 'cat home/alice/revoked.md'), 'readable\n');
    t.equal(await run(t, 'cat home/alice/revoked.md'), 'readable\n', 'warm: from the kernel');
    await run(t, 'echo appended >> home/alice/revoked.md');
    await asAlice.call('fs.chmod', { path: '/home/alice/revoked.md', mode: '0000' });
    const cat = await ma.sh('cat home/alice/revoked.md');
    t.not(cat.code, 0, 'cat fails after chmod 000');
    t.match(cat.stderr, /Permission denied/);
    const write = await ma.sh('echo more >> home/alice/revoked.md');
    t.match(write.stderr, /Permission denied/, 'and so does a write');
    await asAlice.call('fs.chmod', { path: '/home/alice/revoked.md', mode: '0644' });
    t.equal(
      await run(t, 'cat home/alice/revoked.md'),
      'readable\nappended\n',
      'readable again, with what was appended before the chmod',
    );
  });

  await t.test('a chmod of the live file closes its past in .history too (issue 15)', async (t) => {
    await root.call('fs.write', { path: '/srv/past.md', mode: '0644' }, { data: Buffer.from('then\n') });
    const c = await root.call('vcs.commit', { message: 'a file alice may read' });
    const old = `.history/${c.hash}/srv/past.md`;
    t.equal(await run(t, `cat ${old}`), 'then\n');
    t.equal(await run(t, `cat ${old}`), 'then\n', 'warm: from the kernel, or the descriptor the mount keeps');
    await root.call('fs.chmod', { path: '/srv/past.md', mode: '0600' });
    const cat = await ma.sh(`cat ${old}`);
    t.match(cat.stderr, /Permission denied/, 'the old version is refused at once, as the live file is');
    t.notMatch(cat.stdout, /then/, 'nothing of it is read');
  });
  t.notMatch(ma.stderr(), /unexpected error|not saved/, ma.stderr());
});

void t.test('a file read first is still refused to writers on a read-only mount, and in .history', async (t) => {
  await root.call('fs.write', { path: '/ro/kept.md' }, { data: Buffer.from('kept\n') });
  const c = await root.call('vcs.commit', { message: 'a file to read, then append to' });
  const ro = await mount(t, d, ['--read-only', '--writeback']);
  // The read opens the mount's inner descriptor of the file; the append then comes with no open at all.
  const append = await ro.sh('cat ro/kept.md >/dev/null && echo more >> ro/kept.md');
  t.match(append.stderr, /Read-only file system/, 'the append fails with EROFS');
  const old = `.history/${c.hash}/ro/kept.md`;
  const past = await m.sh(`cat ${old} >/dev/null && echo more >> ${old}`);
  t.match(past.stderr, /Read-only file system/, 'so does one to a file of a commit');
  await sleep(500); // longer than the mount waits before sending what was written
  t.equal(await daemonText('/ro/kept.md'), 'kept\n', 'the daemon has the file unchanged');
});

void t.test('fsync makes written data durable: the mount killed with SIGKILL right after', async (t) => {
  const mk = await mount(t, d, ['--writeback']);
  await root.call('fs.write', { path: '/wb/durable-old.md' }, { data: Buffer.from('before\n') });
  const py = `import os, sys
a = os.open('wb/durable-old.md', os.O_WRONLY | os.O_APPEND)
os.write(a, b'after\\n')
os.fsync(a)
b = os.open('wb/durable-new.md', os.O_CREAT | os.O_WRONLY, 0o644)
os.write(b, b'new\\n')
os.fsync(b)
print('synced', flush=True)
os.kill(int(os.environ['MOUNT_PID']), 9)
`;
  const r = await mk.sh(`MOUNT_PID=${mk.proc.pid} python3 -c "${py}"`);
  t.equal(r.stdout, 'synced\n', r.stderr);
  await mk.stop();
  t.equal(await daemonText('/wb/durable-old.md'), 'before\nafter\n', 'an existing file (fsync with no handle)');
  t.equal(await daemonText('/wb/durable-new.md'), 'new\n', 'a created file');
});

void t.test('a write the daemon refuses after close is logged, and the file shows what the daemon holds', async (t) => {
  const small = await startDaemon(t, { SERVICE_MAX_FILE_SIZE: '1000000' });
  const sm = await mount(t, small, ['--writeback']);
  await small.client.call('fs.write', { path: '/kept.md' }, { data: Buffer.from('kept\n') });
  t.equal((await sm.sh('cat kept.md')).stdout, 'kept\n');
  const r = await sm.sh('head -c 1100000 /dev/zero >> kept.md');
  t.equal(r.code, 0, 'the close returns before the daemon has the data');
  t.ok(
    await eventually(() => /kept\.md: written data not saved, the daemon refused it: EFBIG/.test(sm.stderr())),
    `one line names the path and the error: ${sm.stderr()}`,
  );
  t.equal((await sm.sh('stat -c %s kept.md')).stdout, '5\n', 'the size is the daemon’s');
  t.equal((await sm.sh('cat kept.md')).stdout, 'kept\n', 'and so is the content');
  const created = await sm.sh('head -c 1100000 /dev/zero > too-big.bin');
  t.equal(created.code, 0);
  t.ok(await eventually(() => /too-big\.bin: written data not saved/.test(sm.stderr())), 'a created file too');
  t.equal((await small.client.call('fs.stat', { path: '/too-big.bin' })).size, 0, 'the daemon has it empty');
  t.equal((await sm.sh('stat -c %s too-big.bin')).stdout, '0\n', 'and so does the mount');
  t.equal((await sm.sh('echo still > fine.md && cat fine.md')).stdout, 'still\n', 'the mount goes on');
  t.notMatch(sm.stderr(), /unexpected error/);
});

void t.test('no operation above failed with an internal error in the mount', async (t) => {
  t.notMatch(m.stderr(), /unexpected error|not saved/, m.stderr());
});
