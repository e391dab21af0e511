/**
 * The mount trusts what it cached (content, attributes, listings) until the daemon reports a change
 * that concerns it, however long ago it was read: a second pass over unchanged files makes no daemon
 * call. Security: cached content is only ever what the daemon let this principal read, and it is
 * dropped when anything that could change that answer happens: a change of the file, a chmod/chown/
 * rename of a directory above it, or a change of groups and tokens (which touches no path).
 */
import { spawn } from 'node:child_process';
import t, { type Test } from 'tap';
import { connectSocket, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { CLI, eventually, mount, sh, skipWithoutFuse, sleep, startDaemon, type Mount } from '../helpers/fuse.js';
import { testStoreEnv } from '../helpers/postgres.js';

skipWithoutFuse(t);

const top = t; // the file's own test: subtests shadow `t`
const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
await root.call('admin.groupAdd', { name: 'team' });
await root.call('admin.groupMemberAdd', { user: 'alice', group: 'team' });
const write = (path: string, text: string, mode = '0644') =>
  root.call('fs.write', { path, mode }, { data: Buffer.from(text) });
const m = await mount(t, d, ['--user', 'alice']);

/** Longer than the kernel's attribute and entry timeouts (1 s): later requests reach the mount. */
const CACHE_EXPIRY_MS = 1100;
/** The contract: a change made elsewhere shows in the mount within 1 s. */
const WITHIN_MS = 1000;

async function cat(mnt: Mount, file: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return mnt.sh(`cat ${file}`);
}

/** `cat` reads `file` (twice, the second from the mount's cache) and the content is `text`. */
async function readsTwice(t: Test, file: string, text: string): Promise<void> {
  t.equal((await cat(m, file)).stdout, text, `${file} reads`);
  await sleep(CACHE_EXPIRY_MS);
  t.equal((await cat(m, file)).stdout, text, `${file} reads again`);
}

async function refusedSoon(t: Test, file: string, why: string): Promise<void> {
  const refused = await eventually(async () => /Permission denied/.test((await cat(m, file)).stderr), WITHIN_MS, 20);
  t.ok(refused, `${why}: reading ${file} fails with EACCES within 1 s`);
}

void t.test('a second pass over unchanged files needs no daemon call', async (t) => {
  const files = 50;
  for (let i = 0; i < files; i++) await write(`/warm/d${i % 5}/f${i}.md`, `note ${i}\nneedle-${i}\n`);
  const grep = 'grep -rc needle warm | sort | tr "\\n" " "';
  const first = await m.sh(grep);
  t.equal(first.code, 0);
  t.equal(first.stdout.trim().split(' ').length, files, 'every file is found');
  await sleep(CACHE_EXPIRY_MS); // the kernel's caches have expired: every lookup, listing and open reaches the mount
  d.proc.kill('SIGSTOP'); // a daemon call would now wait (until the mount's 120 s request timeout)
  try {
    // Run from outside the mount (a working directory inside it costs an access(2) check, never cached).
    const second = await sh(
      `timeout 20 grep -rc needle '${m.dir}/warm' | sed 's|^${m.dir}/||' | sort | tr "\\n" " "`,
      '/',
    );
    t.equal(second.stdout, first.stdout, 'the second pass finds the same, with the daemon stopped');
    const stat = await sh(`timeout 20 stat -c %s '${m.dir}/warm/d0/f0.md'`, '/');
    t.equal(stat.stdout, `${'note 0\nneedle-0\n'.length}\n`, 'stat answers from the cache too');
  } finally {
    d.proc.kill('SIGCONT');
  }
  await write('/warm/d0/f0.md', 'changed\nneedle-new\n');
  t.ok(
    await eventually(async () => (await cat(m, 'warm/d0/f0.md')).stdout === 'changed\nneedle-new\n', WITHIN_MS, 20),
    'a write through the daemon shows within 1 s',
  );
  await write('/warm/d1/added.md', 'needle-added\n');
  t.ok(
    await eventually(async () => (await m.sh('ls warm/d1')).stdout.includes('added.md'), WITHIN_MS, 20),
    'a new file is listed within 1 s',
  );
});

void t.test(
  'files written through the mount read back with no daemon call, unless the mode forbids reading',
  async (t) => {
    await root.call('fs.mkdir', { path: '/written', mode: '0777' });
    // wo.md: alice's own file, write-only for her (0666 & ~0577): the daemon must still refuse reading it.
    const made = await m.sh(
      `printf 'one\\n' > written/a.md && printf 'two\\n' > written/b.md && (umask 0577; printf 'secret\\n' > written/wo.md)`,
    );
    t.equal(made.code, 0, made.stderr);
    d.proc.kill('SIGSTOP'); // a daemon call would now wait (until the mount's 120 s request timeout)
    try {
      const back = await sh(`timeout -s KILL 20 cat '${m.dir}/written/a.md' '${m.dir}/written/b.md'`, '/');
      t.equal(back.stdout, 'one\ntwo\n', 'what the mount wrote reads back with the daemon stopped');
    } finally {
      d.proc.kill('SIGCONT');
    }
    t.match(
      (await cat(m, 'written/wo.md')).stderr,
      /Permission denied/,
      'a file its mode keeps from reading is refused',
    );
  },
);

void t.test('renames and chmods of files in the mount keep the directory listing, right', async (t) => {
  await root.call('fs.mkdir', { path: '/moved', mode: '0777' });
  // rsync's way with every file: a temporary name, its mode and times set, then renamed over the final
  // name. The directory's own attributes (its mtime changed) are fetched again at the end.
  const made = await m.sh(
    `cd moved && ls >/dev/null && printf 'one\\n' > .a.tmp && chmod 0640 .a.tmp && touch -d @1700000000 .a.tmp && mv .a.tmp a.md && printf 'old\\n' > b.md && printf 'new\\n' > .b.tmp && mv .b.tmp b.md && stat . >/dev/null`,
  );
  t.equal(made.code, 0, made.stderr);
  const dir = `${m.dir}/moved`;
  const seen: string[] = [];
  d.proc.kill('SIGSTOP'); // a daemon call would now wait (until the mount's 120 s request timeout)
  try {
    // One command per `timeout`, from outside the mount: a killed command leaves no child waiting.
    for (const cmd of [
      `ls -a '${dir}'`,
      `test ! -e '${dir}/.a.tmp'`,
      `test ! -e '${dir}/.b.tmp'`,
      `stat -c '%a %Y' '${dir}/a.md'`,
    ])
      seen.push(`${(await sh(`timeout -s KILL 20 ${cmd} | tr "\\n" " "`, '/')).stdout}`);
  } finally {
    d.proc.kill('SIGCONT');
  }
  t.same(seen, ['. .. a.md b.md ', '', '', '640 1700000000 '], 'listed and looked up with the daemon stopped');
  t.equal((await cat(m, 'moved/b.md')).stdout, 'new\n', 'the file renamed over another reads as the new one');
  const listed = await root.call('fs.list', { path: '/moved' });
  t.same(
    listed.entries.map((e) => `${e.name} ${e.mode}`),
    ['a.md 0640', 'b.md 0644'],
    'the daemon has the same',
  );
});

void t.test('a chmod or touch of a directory in the mount fetches its listing again', async (t) => {
  await root.call('fs.mkdir', { path: '/dirattr' });
  await root.call('fs.chown', { path: '/dirattr', owner: 'alice' });
  for (const n of ['a', 'b']) await write(`/dirattr/${n}.md`, `${n}\n`);
  // rsync's way with every directory it makes: its mode and times set, then the files' names looked up.
  const made = await m.sh('ls dirattr >/dev/null && chmod 0750 dirattr && touch -d @1700000000 dirattr');
  t.equal(made.code, 0, made.stderr);
  const dir = `${m.dir}/dirattr`;
  const seen: string[] = [];
  d.proc.kill('SIGSTOP'); // a daemon call would now wait (until the mount's 120 s request timeout)
  try {
    // One command per `timeout`, from outside the mount: a killed command leaves no child waiting.
    for (const cmd of [`stat -c %s '${dir}/a.md'`, `test ! -e '${dir}/new.md' && echo free`, `ls '${dir}'`])
      seen.push(`${(await sh(`timeout -s KILL 20 sh -c "${cmd}" | tr "\\n" " "`, '/')).stdout}`);
  } finally {
    d.proc.kill('SIGCONT');
  }
  t.same(seen, ['2 ', 'free ', 'a.md b.md '], 'looked up and listed with the daemon stopped');
  await root.call('fs.chmod', { path: '/dirattr', mode: '0700' });
  await root.call('fs.chown', { path: '/dirattr', owner: 'root' });
  await refusedSoon(t, 'dirattr/a.md', 'a directory chmodded and given away through the daemon');
});

void t.test('chmod of the file drops its cached content', async (t) => {
  await write('/c1/f.md', 'one\n');
  await readsTwice(t, 'c1/f.md', 'one\n');
  await root.call('fs.chmod', { path: '/c1/f.md', mode: '0600' });
  await refusedSoon(t, 'c1/f.md', 'file chmod 0600');
});

void t.test('chmod and chown of a directory above drop the cached content below it', async (t) => {
  await write('/c2/sub/deep/f.md', 'two\n');
  await readsTwice(t, 'c2/sub/deep/f.md', 'two\n');
  await root.call('fs.chmod', { path: '/c2/sub', mode: '0700' });
  await refusedSoon(t, 'c2/sub/deep/f.md', 'ancestor chmod 0700');
  await root.call('fs.chmod', { path: '/c2/sub', mode: '0755' });
  t.ok(
    await eventually(async () => (await cat(m, 'c2/sub/deep/f.md')).stdout === 'two\n', WITHIN_MS, 20),
    'readable again after chmod back',
  );
  await readsTwice(t, 'c2/sub/deep/f.md', 'two\n');
  await root.call('fs.chmod', { path: '/c2/sub', mode: '0770' });
  const { uid } = await root.call('fs.stat', { path: '/home/alice' });
  await root.call('fs.chown', { path: '/c2/sub', owner: uid });
  t.equal((await cat(m, 'c2/sub/deep/f.md')).stdout, 'two\n', 'owner of the directory: readable');
  await root.call('fs.chown', { path: '/c2/sub', owner: 0 });
  await refusedSoon(t, 'c2/sub/deep/f.md', 'ancestor chown away from alice');
});

void t.test('a directory listing is refused once its mode forbids it', async (t) => {
  await write('/c3/dir/f.md', 'three\n');
  t.equal((await m.sh('ls c3/dir')).stdout, 'f.md\n');
  await sleep(CACHE_EXPIRY_MS);
  t.equal((await m.sh('ls c3/dir')).stdout, 'f.md\n', 'listed again (from the cache)');
  await root.call('fs.chmod', { path: '/c3/dir', mode: '0711' });
  t.ok(
    await eventually(async () => /Permission denied/.test((await m.sh('ls c3/dir')).stderr), WITHIN_MS, 20),
    'ls fails with EACCES within 1 s',
  );
});

void t.test('leaving the group that granted access drops the cached content', async (t) => {
  await root.call('fs.mkdir', { path: '/c4', mode: '0755' });
  await write('/c4/team.md', 'for the team\n', '0640');
  await root.call('fs.chown', { path: '/c4/team.md', group: 'team' });
  await readsTwice(t, 'c4/team.md', 'for the team\n');
  await root.call('admin.groupMemberDel', { user: 'alice', group: 'team' });
  await refusedSoon(t, 'c4/team.md', 'removed from the group');
  await root.call('admin.groupMemberAdd', { user: 'alice', group: 'team' });
  t.ok(
    await eventually(async () => (await cat(m, 'c4/team.md')).stdout === 'for the team\n', WITHIN_MS, 20),
    'readable again once back in the group',
  );
});

void t.test('renaming or removing a directory above drops what was cached below it', async (t) => {
  await write('/c5/old/f.md', 'five\n');
  await readsTwice(t, 'c5/old/f.md', 'five\n');
  await root.call('fs.move', { src: '/c5/old', dst: '/c5/new' });
  t.ok(
    await eventually(async () => /No such file/.test((await cat(m, 'c5/old/f.md')).stderr), WITHIN_MS, 20),
    'the old path is gone within 1 s',
  );
  t.equal((await cat(m, 'c5/new/f.md')).stdout, 'five\n', 'the new path reads');
  await readsTwice(t, 'c5/new/f.md', 'five\n');
  await root.call('fs.delete', { path: '/c5/new', recursive: true });
  t.ok(
    await eventually(async () => /No such file/.test((await cat(m, 'c5/new/f.md')).stderr), WITHIN_MS, 20),
    'a removed tree is gone within 1 s',
  );
});

void t.test(
  'files created in the mount: answered from what the create returned, foreign changes still seen',
  async (t) => {
    const made = await m.sh(
      'mkdir -p home/alice/mk/sub && for i in 1 2 3; do printf "file %d\\n" $i > home/alice/mk/sub/f$i.md; done && stat -c "%s %a" home/alice/mk/sub/f3.md && ls home/alice/mk/sub',
    );
    t.equal(made.code, 0, made.stderr);
    t.equal(made.stdout, '7 644\nf1.md\nf2.md\nf3.md\n', 'size and mode of a new file; the listing has every new file');
    t.equal(
      (await root.request('fs.read', { path: '/home/alice/mk/sub/f2.md' })).data.toString(),
      'file 2\n',
      'the content is in the daemon',
    );
    // Someone else creates a file in the directory whose listing the mount keeps up to date itself:
    // the mount must not answer "no such file" from that listing once the change is reported.
    await write('/home/alice/mk/sub/other.md', 'from elsewhere\n');
    t.ok(
      await eventually(
        async () => (await cat(m, 'home/alice/mk/sub/other.md')).stdout === 'from elsewhere\n',
        WITHIN_MS,
        20,
      ),
      'a file created elsewhere reads within 1 s',
    );
    t.equal((await m.sh('ls home/alice/mk/sub')).stdout, 'f1.md\nf2.md\nf3.md\nother.md\n', 'and is listed');
    await root.call('fs.unlink', { path: '/home/alice/mk/sub/f1.md' });
    t.ok(
      await eventually(
        async () => (await m.sh('ls home/alice/mk/sub')).stdout === 'f2.md\nf3.md\nother.md\n',
        WITHIN_MS,
        20,
      ),
      'a file removed elsewhere leaves the listing within 1 s',
    );
    await write('/home/alice/mk/sub/f2.md', 'rewritten elsewhere\n');
    t.ok(
      await eventually(
        async () => (await cat(m, 'home/alice/mk/sub/f2.md')).stdout === 'rewritten elsewhere\n',
        WITHIN_MS,
        20,
      ),
      'a file the mount wrote, rewritten elsewhere, reads the new content within 1 s',
    );
    await root.call('fs.chmod', { path: '/home/alice/mk/sub/f3.md', mode: '0200' });
    t.ok(
      await eventually(
        async () => /Permission denied/.test((await cat(m, 'home/alice/mk/sub/f3.md')).stderr),
        WITHIN_MS,
        20,
      ),
      'a file the mount wrote is not read from its buffer once unreadable',
    );
    t.equal((await m.sh('echo replaced > home/alice/mk/sub/f3.md')).code, 0, 'still writable');
    t.match(
      (await cat(m, 'home/alice/mk/sub/f3.md')).stderr,
      /Permission denied/,
      'what the mount itself wrote to a write-only file is not read back from its cache',
    );
  },
);

void t.test('directories made on the way by a write elsewhere show in cached listings within 1 s', async (t) => {
  await write('/pd/a.md', 'a\n');
  t.equal((await m.sh('ls pd')).stdout, 'a.md\n');
  await sleep(CACHE_EXPIRY_MS);
  t.equal((await m.sh('ls pd')).stdout, 'a.md\n', 'listed again (from the cache)');
  await write('/pd/new/deep/f.md', 'deep\n'); // fs.write makes the missing parents
  t.ok(
    await eventually(async () => (await m.sh('ls pd')).stdout === 'a.md\nnew\n', WITHIN_MS, 20),
    'the new directory is listed within 1 s',
  );
  t.equal((await cat(m, 'pd/new/deep/f.md')).stdout, 'deep\n', 'and its file reads');
});

void t.test(
  'a dropped daemon connection drops the caches: changes made before the mount reconnects are not missed',
  async (t) => {
    await write('/r1/f.md', 'before\n');
    await readsTwice(t, 'r1/f.md', 'before\n');
    const gone = new Promise((resolve) => d.proc.once('exit', resolve));
    d.proc.kill('SIGTERM');
    await gone;
    // A new daemon for the same data dir, changed at once: the mount is not subscribed to it yet.
    const next = spawn(process.execPath, [CLI, 'daemon'], {
      env: { ...process.env, ...(await testStoreEnv(d.dataDir)), SERVICE_DATA_DIR: d.dataDir },
      stdio: 'ignore',
    });
    t.teardown(() => {
      next.kill('SIGTERM');
    });
    let c: DaemonClient | undefined;
    await eventually(async () => {
      c = await connectSocket(socketPathFor(d.dataDir)).catch(() => undefined);
      return c !== undefined;
    }, 30000);
    t.teardown(() => c?.close());
    // Whichever daemon won the data dir (ours, or one the mount's reconnect started in the background)
    // serves the later tests; it is stopped when the whole file ends.
    const { pid } = await c!.call('sys.ping', {});
    top.teardown(() => {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    });
    await c!.call('fs.chmod', { path: '/r1/f.md', mode: '0600' });
    // From outside the mount: a working directory inside it would cost an access(2) call, which reconnects.
    t.match((await sh(`cat '${m.dir}/r1/f.md'`, '/')).stderr, /Permission denied/, 'the mount asks the new daemon');
  },
);

void t.test('the mount root stays reachable after a create at the top level (root mount)', async (t) => {
  const rm = await mount(t, d);
  t.equal(
    (await sh(`ls '${rm.dir}' > /dev/null && echo x > '${rm.dir}/top.md'`, '/')).code,
    0,
    'list the root, create a file in it',
  );
  const st = await sh(`stat -c %F '${rm.dir}' && cat '${rm.dir}/top.md'`, '/');
  t.equal(st.stdout, 'directory\nx\n', st.stderr);
});
