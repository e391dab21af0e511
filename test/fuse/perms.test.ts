/**
 * The mount acts as one principal and the daemon decides what it may do. Mounted as bob: alice's
 * private files and read-only directories refuse him with EACCES, his own files appear owned by the
 * local user running the mount. Bad credentials never produce a mount.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mount, mountFailure, skipWithoutFuse, startDaemon, tempDir } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
const alice = await root.call('admin.userAdd', { name: 'alice' });
const bob = await root.call('admin.userAdd', { name: 'bob' });
const asAlice = root.as({ authorization: 'User alice' });
await asAlice.call('fs.write', { path: '/home/alice/private.md' }, { data: Buffer.from('secret\n') });
await root.call('fs.mkdir', { path: '/shared', mode: '0755' });
await root.call('fs.write', { path: '/shared/readme.md', mode: '0644' }, { data: Buffer.from('read me\n') });
const localUid = process.getuid!();

void t.test('mounted as bob', async (t) => {
  const m = await mount(t, d, ['--user', 'bob']);

  const cat = await m.sh('cat home/alice/private.md');
  t.not(cat.code, 0, "reading alice's private file fails");
  t.match(cat.stderr, /Permission denied/, 'with EACCES');
  t.match((await m.sh('ls home/alice')).stderr, /Permission denied/, "listing alice's home fails with EACCES");

  t.equal((await m.sh('cat shared/readme.md')).stdout, 'read me\n', 'a world-readable file reads fine');
  await root.call('fs.chmod', { path: '/shared/readme.md', mode: '0600' });
  t.match(
    (await m.sh('cat shared/readme.md')).stderr,
    /Permission denied/,
    'a chmod through the daemon takes effect at once',
  );
  await root.call('fs.chmod', { path: '/shared/readme.md', mode: '0644' });
  t.equal((await m.sh('cat shared/readme.md')).stdout, 'read me\n');
  const create = await m.sh('echo x > shared/new.md');
  t.match(create.stderr, /Permission denied/, 'creating a file in a read-only directory fails with EACCES');
  const append = await m.sh('echo x >> shared/readme.md');
  t.match(append.stderr, /Permission denied/, "appending to root's 0644 file fails with EACCES");
  t.match((await m.sh('mkdir shared/sub')).stderr, /Permission denied/);
  t.match((await m.sh('rm shared/readme.md')).stderr, /Permission denied/);
  t.match((await m.sh('mv shared/readme.md shared/moved.md')).stderr, /Permission denied/);
  t.match((await m.sh('chmod 777 shared/readme.md')).stderr, /Operation not permitted|Permission denied/);
  t.equal(
    (await root.request('fs.read', { path: '/shared/readme.md' })).data.toString(),
    'read me\n',
    'nothing changed',
  );
  await t.rejects(root.call('fs.stat', { path: '/shared/new.md' }), { code: 'ENOENT' });

  const mine = await m.sh('echo mine > home/bob/mine.md && stat -c "%u %g %a" home/bob/mine.md');
  t.equal(mine.code, 0, 'bob writes in his home');
  t.equal(mine.stdout, `${localUid} ${process.getgid!()} 644\n`, "bob's file appears owned by the local user");
  const st = await root.call('fs.stat', { path: '/home/bob/mine.md' });
  t.equal(st.uid, bob.uid, 'the daemon records bob as the owner');
  t.equal((await m.sh('stat -c %u home/alice')).stdout, `${alice.uid}\n`, "alice's home shows alice's uid");
  t.equal(
    (await m.sh('test -w home/bob/mine.md && ! test -w shared/readme.md && echo ok')).stdout,
    'ok\n',
    'access(2) answers for bob',
  );
});

void t.test(
  ".history applies the same read rule as the live tree (issue 15): bob cannot read alice's files at a commit",
  async (t) => {
    await asAlice.call('fs.write', { path: '/home/alice/diary.md' }, { data: Buffer.from('dear diary\n') });
    await root.call('fs.write', { path: '/shared/open.md', mode: '0644' }, { data: Buffer.from('v1\n') });
    const c = await root.call('vcs.commit', { message: "alice's diary and an open file" });
    const m = await mount(t, d, ['--user', 'bob']);
    const h = `.history/${c.hash}`;
    t.equal((await m.sh(`cat ${h}/shared/open.md`)).stdout, 'v1\n', 'a file bob may read now reads at the commit');
    const diary = await m.sh(`cat ${h}/home/alice/diary.md`);
    t.not(diary.code, 0, "alice's file at the commit does not read");
    t.notMatch(diary.stdout, /dear diary/, 'nothing of it reaches bob');
    t.match((await m.sh(`ls ${h}/home/alice`)).stderr, /Permission denied|No such file/, "nor does alice's home list");
    t.notMatch(
      (await m.sh(`grep -r diary ${h} 2>/dev/null`)).stdout,
      /dear diary/,
      'grep -r over the commit finds nothing of it',
    );
    // A chmod now closes the past too: no reading through history what may not be read today.
    await root.call('fs.chmod', { path: '/shared/open.md', mode: '0600' });
    t.match(
      (await m.sh(`cat ${h}/shared/open.md`)).stderr,
      /Permission denied|No such file/,
      'after a chmod, the old version refuses too',
    );
    await root.call('fs.chmod', { path: '/shared/open.md', mode: '0644' });
  },
);

void t.test(
  '.history hides the commits bob may not see (issue 30): not listed, ENOENT by name, as the log',
  async (t) => {
    // root's file was private in the commit and is public only now: bob could not read it then
    await root.call('fs.write', { path: '/shared/was-private.md', mode: '0600' }, { data: Buffer.from('then\n') });
    const hidden = await root.call('vcs.commit', { message: 'a private file' });
    await root.call('fs.chmod', { path: '/shared/was-private.md', mode: '0644' });
    const m = await mount(t, d, ['--user', 'bob']);
    const seen = (await root.as({ authorization: 'User bob' }).call('vcs.log', {})).commits.map((c) => c.hash);
    t.notOk(seen.includes(hidden.hash), "the commit is not in bob's log");
    const ls = (await m.sh('ls .history')).stdout.split('\n').filter((x) => x !== '');
    t.same(ls.sort(), [...seen].sort(), '.history lists exactly the commits of his log');
    for (const p of [`.history/${hidden.hash}`, `.history/${hidden.hash}/shared/readme.md`]) {
      const r = await m.sh(`cat ${p}`);
      t.match(r.stderr, /No such file/, `${p}: no such commit for bob`);
      t.notMatch(r.stdout, /read me|then/);
    }
    t.match((await m.sh(`ls .history/${hidden.hash.slice(0, 6)}`)).stderr, /No such file/, 'nor by a prefix');
  },
);

void t.test('mounted with a token file (never on the command line)', async (t) => {
  const { token } = await root.call('admin.token', { name: 'bob' });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-tok-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  const m = await mount(t, d, ['--token-file', file]);
  t.notMatch(m.stderr(), token, 'the token is not logged');
  t.notMatch(m.stderr(), /warning/, 'no warning for a private token file');
  t.match((await m.sh('cat home/alice/private.md')).stderr, /Permission denied/);
  t.equal((await m.sh('echo t > home/bob/t.md')).code, 0);
  t.equal((await root.call('fs.stat', { path: '/home/bob/t.md' })).uid, bob.uid);
});

void t.test('mounted as root on behalf of alice', async (t) => {
  const m = await mount(t, d, ['--on-behalf-of', 'alice']);
  t.equal((await m.sh('cat home/alice/private.md')).stdout, 'secret\n');
  t.equal((await m.sh('echo new > home/alice/delegated.md')).code, 0);
  t.equal(
    (await root.call('fs.stat', { path: '/home/alice/delegated.md' })).uid,
    alice.uid,
    'new files belong to the delegate',
  );
  t.match((await m.sh('ls home/bob')).stderr, /Permission denied/, 'and the delegate must be allowed too');
});

void t.test("an agent's mount on behalf of alice: only with her grant, until she revokes it", async (t) => {
  const helper = await root.call('admin.userAdd', { name: 'helper', is_agent: true });
  await root.call('admin.groupMemberAdd', { user: 'helper', group: 'alice' });
  await asAlice.call('fs.chmod', { path: '/home/alice', mode: '0770' });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-tok-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  writeFileSync(file, `${helper.token!}\n`, { mode: 0o600 });
  const refused = await mountFailure(t, d, ['--token-file', file, '--on-behalf-of', 'alice']);
  t.equal(refused.code, 1, 'no mount without her grant');
  t.match(refused.stderr, /no delegation grant: alice has not granted helper/);
  const asRoot = await mountFailure(t, d, ['--token-file', file, '--on-behalf-of', 'root']);
  t.match(asRoot.stderr, /nobody acts on behalf of root but root/);

  await asAlice.call('auth.delegationAdd', { agent: 'helper' });
  const m = await mount(t, d, ['--token-file', file, '--on-behalf-of', 'alice']);
  t.equal((await m.sh('mkdir -p home/alice/notes && echo one > home/alice/notes/n.md')).code, 0);
  t.equal((await m.sh('echo two > home/alice/notes/n.md')).code, 0, 'it re-writes what it wrote for her');
  t.equal((await m.sh('mv home/alice/notes/n.md home/alice/notes/m.md')).code, 0, 'and renames it');
  const st = await root.call('fs.stat', { path: '/home/alice/notes/m.md' });
  t.equal(st.uid, alice.uid, 'hers');
  t.equal(st.mode, '0664', 'with group write');
  await asAlice.call('auth.delegationDel', { agent: 'helper' });
  // the shell may not even start in the mount now (spawn EPERM): either way, refused
  const after = await m.sh('echo three > home/alice/notes/other.md').catch((err: Error) => ({ code: err.message }));
  t.not(after.code, 0, 'revoked: the next request is refused');
  await t.rejects(root.call('fs.stat', { path: '/home/alice/notes/other.md' }), { code: 'ENOENT' });
});

void t.test('read-only mount', async (t) => {
  const m = await mount(t, d, ['--read-only']);
  t.equal((await m.sh('cat shared/readme.md')).stdout, 'read me\n');
  t.match((await m.sh('echo x > shared/ro.md')).stderr, /Read-only file system/);
  t.match((await m.sh('echo x >> shared/readme.md')).stderr, /Read-only file system/);
  t.match((await m.sh('rm shared/readme.md')).stderr, /Read-only file system/);
  t.match((await m.sh('mkdir ro-dir')).stderr, /Read-only file system/);
});

void t.test('bad credentials: no mount, exit 1, a clear message', async (t) => {
  const user = await mountFailure(t, d, ['--user', 'nosuchuser']);
  t.equal(user.code, 1);
  t.match(user.stderr, /cannot mount as user nosuchuser/);
  const tokenFile = path.join(tempDir(t), 'token');
  writeFileSync(tokenFile, 'mdvfs_not_a_real_token\n', { mode: 0o600 });
  const token = await mountFailure(t, d, ['--token-file', tokenFile]);
  t.equal(token.code, 1);
  t.match(token.stderr, /cannot mount as the given token/);
  t.notMatch(token.stderr, /mdvfs_not_a_real_token/, 'the token is not echoed');
  // Issue 30 (low): a token on the command line is visible in ps; --token is refused, naming the alternatives.
  const flag = await mountFailure(t, d, ['--token', 'mdvfs_not_a_real_token']);
  t.equal(flag.code, 2);
  t.match(flag.stderr, /--token is no longer accepted.*set SERVICE_TOKEN or use --token-file/);
  t.notMatch(flag.stderr, /mdvfs_not_a_real_token/, 'the token is not echoed');
  const both = await mountFailure(t, d, ['--user', 'bob', '--token-file', tokenFile]);
  t.equal(both.code, 1);
  t.match(both.stderr, /either --user or --token-file/);
});
