/**
 * POSIX checks write access when a file is opened or created, not at each write: a descriptor opened
 * for writing stays writable after a chmod, and open(O_CREAT|O_WRONLY, 0444) returns a writable one
 * (git creates every loose object that way). The mount sends buffered writes at close, under a write
 * grant the daemon issued at open/create (daemon/core/grants.ts). Mounted as alice (not root), and the
 * grant itself over the socket: bound to its principal, inode and connection, and ended by release.
 */
import t from 'tap';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { CREATE_0444_PY, mount, okIn, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
await root.call('admin.userAdd', { name: 'alice' });
await root.call('admin.userAdd', { name: 'bob' });
const asAlice = root.as({ authorization: 'User alice' });
const asBob = root.as({ authorization: 'User bob' });
const read = async (p: string): Promise<string> => (await root.request('fs.read', { path: p })).data.toString();
const m = await mount(t, d, ['--user', 'alice']);
const ok = okIn(m);

void t.test('git init, add, commit and fsck as a regular user', async (t) => {
  const git = 'git -c user.name=T -c user.email=t@example.com -c init.defaultBranch=main';
  await ok(
    t,
    `mkdir home/alice/repo && cd home/alice/repo && printf "# R\\n" > README.md && mkdir docs && echo doc > docs/a.md && ${git} init -q && ${git} add -A && ${git} commit -q -m first`,
  );
  t.equal(await ok(t, 'cd home/alice/repo && git fsck --no-progress --strict 2>&1'), '', 'git fsck is clean');
  t.equal(await ok(t, 'cd home/alice/repo && git status --porcelain'), '', 'the work tree is clean');
  await ok(t, `cd home/alice/repo && echo more >> README.md && ${git} commit -qam second && git fsck --no-progress`);
  t.equal(await ok(t, 'cd home/alice/repo && git log --format=%s'), 'second\nfirst\n');
  const objects = await ok(t, 'cd home/alice/repo && find .git/objects -type f -path "*/[0-9a-f][0-9a-f]/*" | head -1');
  t.match(
    await ok(t, `cd home/alice/repo && stat -c %a ${objects.trim()}`),
    /^444\n$/,
    'loose objects are 0444, as git made them',
  );
});

void t.test('open(O_CREAT|O_WRONLY, 0444), write, close', async (t) => {
  // A separate process: never the mount's own.
  await ok(t, `python3 -c "${CREATE_0444_PY}"`);
  t.equal(await read('/home/alice/ro.md'), 'first part\nsecond part\n', 'the content reached the daemon');
  t.equal((await root.call('fs.stat', { path: '/home/alice/ro.md' })).mode, '0444', 'with the mode asked for');
  t.equal(await ok(t, 'cat home/alice/ro.md'), 'first part\nsecond part\n', 'and reads back through the mount');

  const again = await m.sh('echo overwrite > home/alice/ro.md');
  t.match(again.stderr, /Permission denied/, 'a second open for writing of the 0444 file fails with EACCES');
  t.match((await m.sh('echo append >> home/alice/ro.md')).stderr, /Permission denied/, 'appending too');
  const pyOpen = await m.sh(`python3 -c "import os; os.open('home/alice/ro.md', os.O_WRONLY)"`);
  t.match(pyOpen.stderr, /PermissionError/, 'open(O_WRONLY) fails');
  t.equal(await read('/home/alice/ro.md'), 'first part\nsecond part\n', 'nothing changed');
});

void t.test('a descriptor open for writing stays writable after a chmod', async (t) => {
  await asAlice.call('fs.write', { path: '/home/alice/later.md', mode: '0644' }, { data: Buffer.from('old\n') });
  const py = `import os, sys
fd = os.open('home/alice/later.md', os.O_RDWR | os.O_TRUNC)
os.chmod('home/alice/later.md', 0o444)
os.write(fd, b'written after chmod\\n')
os.close(fd)
`;
  await ok(t, `python3 -c "${py}"`);
  t.equal(await read('/home/alice/later.md'), 'written after chmod\n');
  t.match(
    (await m.sh('echo x > home/alice/later.md')).stderr,
    /Permission denied/,
    'a new open is checked against the new mode',
  );
});

void t.test('the grant over the socket: principal, inode, connection and release', async (t) => {
  await asAlice.call('fs.write', { path: '/home/alice/g.md', mode: '0644' }, { data: Buffer.from('g\n') });
  await asAlice.call('fs.write', { path: '/home/alice/other.md', mode: '0444' }, { data: Buffer.from('o\n') });
  await asAlice.call('fs.chmod', { path: '/home/alice', mode: '0755' });
  const { grant } = await asAlice.call('fs.grantWrite', { path: '/home/alice/g.md', mode: 2 });
  t.match(grant, /^[A-Za-z0-9_-]{32}$/, 'an unguessable id');
  await asAlice.call('fs.chmod', { path: '/home/alice/g.md', mode: '0444' });
  await t.rejects(
    asAlice.call('fs.write', { path: '/home/alice/g.md' }, { data: Buffer.from('no grant\n') }),
    { code: 'EACCES' },
    'without the grant the 0444 file is refused',
  );
  await asAlice.call('fs.write', { path: '/home/alice/g.md', grant }, { data: Buffer.from('with grant\n') });
  t.equal(await read('/home/alice/g.md'), 'with grant\n', 'with it, the write is accepted');
  await asAlice.call('fs.truncate', { path: '/home/alice/g.md', size: 4, grant });
  t.equal(await read('/home/alice/g.md'), 'with', 'and a truncate');

  await t.rejects(
    asBob.call('fs.write', { path: '/home/alice/g.md', grant }, { data: Buffer.from('bob\n') }),
    { code: 'EACCES' },
    'another user cannot use it',
  );
  await t.rejects(asBob.call('fs.truncate', { path: '/home/alice/g.md', size: 0, grant }), { code: 'EACCES' });
  await t.rejects(
    asAlice.call('fs.write', { path: '/home/alice/other.md', grant }, { data: Buffer.from('x\n') }),
    { code: 'EACCES' },
    'nor can it write another file',
  );
  const other = await connectSocket(socketPathFor(d.dataDir));
  t.teardown(() => other.close());
  await t.rejects(
    other
      .as({ authorization: 'User alice' })
      .call('fs.write', { path: '/home/alice/g.md', grant }, { data: Buffer.from('x\n') }),
    { code: 'EACCES' },
    'nor another connection, as the same user',
  );
  t.same(
    await other.call('fs.releaseGrant', { grants: [grant] }),
    { released: 0 },
    'another connection cannot release it',
  );

  t.same(await asAlice.call('fs.releaseGrant', { grants: [grant, 'not-a-grant'] }), { released: 1 });
  await t.rejects(
    asAlice.call('fs.write', { path: '/home/alice/g.md', grant }, { data: Buffer.from('x\n') }),
    { code: 'EACCES' },
    'a released grant is dead',
  );
  t.equal(await read('/home/alice/g.md'), 'with', 'no refused write changed anything');

  await t.rejects(
    asBob.call('fs.grantWrite', { path: '/home/alice/g.md', mode: 2 }),
    { code: 'EACCES' },
    'a grant needs write access now',
  );
  await t.rejects(asAlice.call('fs.grantWrite', { path: '/home/alice', mode: 2 }), { code: 'EISDIR' });
  const created = await asAlice.call(
    'fs.write',
    { path: '/home/alice/new.md', mode: '0444', exclusive: true, want_grant: true },
    { data: Buffer.alloc(0) },
  );
  t.ok(created.grant, 'an exclusive create answers a grant');
  await asAlice.call('fs.write', { path: '/home/alice/new.md', grant: created.grant! }, { data: Buffer.from('new\n') });
  t.equal(await read('/home/alice/new.md'), 'new\n');
  await t.rejects(
    asBob.call('fs.write', { path: '/home/alice/new2.md', want_grant: true }, { data: Buffer.alloc(0) }),
    { code: 'EACCES' },
    'no grant without the access to create',
  );
});
