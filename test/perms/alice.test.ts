/** Permissions as alice: an ordinary user in group team (DESIGN.md §3). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('alice', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, alice, bob } = p;

  t.test('her private home: everything readable and writable to her', async (t) => {
    t.equal(await readText(alice, 'private.md'), 'alice private');
    t.equal(await readText(alice, '~/secret600.md'), 'alice secret');
    t.same(
      (await alice.call('fs.list', {})).entries.map((e) => e.name),
      ['private.md', 'secret600.md'],
    );
    await alice.call('fs.write', { path: 'new.md' }, text('n'));
    await alice.call('fs.delete', { path: 'new.md' });
  });

  t.test("other homes are closed, and their contents' existence does not leak", async (t) => {
    await t.rejects(alice.call('fs.list', { path: '/home/bob' }), denied);
    await t.rejects(alice.call('fs.stat', { path: '/home/bob/anything' }), denied);
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.write', { path: '/home/bob/x.md' }, text('x')), denied);
      await t.rejects(alice.call('fs.mkdir', { path: '/home/bob/d', parents: true }), denied);
    });
    t.ok((await alice.call('fs.stat', { path: '/home/bob' })).mode === '0700', 'the home itself can be stat-ed');
  });

  t.test('traversal needs x on every directory: the owner has it', async (t) => {
    t.equal(await readText(alice, '/srv/pub/nox/f.md'), 'behind a non-searchable dir');
    t.same(
      (await alice.call('fs.list', { path: '/srv/pub/xonly' })).entries.map((e) => e.name),
      ['known.md'],
    );
    // taking her own x away locks her out too (the owner class applies, not group/other)
    await alice.call('fs.chmod', { path: '/srv/pub/nox', mode: '0644' });
    await t.rejects(alice.call('fs.read', { path: '/srv/pub/nox/f.md' }), denied);
    await t.rejects(alice.call('fs.write', { path: '/srv/pub/nox/g.md' }, text('g')), denied);
    await alice.call('fs.chmod', { path: '/srv/pub/nox', mode: '0744' });
    t.equal(await readText(alice, '/srv/pub/nox/f.md'), 'behind a non-searchable dir');
  });

  t.test('exactly one class applies: an owner without r is refused even if others may read', async (t) => {
    await alice.call('fs.write', { path: '/srv/pub/owner-none.md', mode: '0077' }, text('o'));
    await t.rejects(alice.call('fs.read', { path: '/srv/pub/owner-none.md' }), denied);
    t.equal(await readText(bob, '/srv/pub/owner-none.md'), 'o');
    await alice.call('fs.delete', { path: '/srv/pub/owner-none.md' });
  });

  t.test('group permissions through team', async (t) => {
    t.equal(await readText(alice, '/srv/teamonly.md'), 'team only');
    await t.rejects(alice.call('fs.write', { path: '/srv/teamonly.md' }, text('x')), denied);
    t.equal(await readText(alice, '/srv/team/teamfile.md'), 'team file');
    await alice.call('fs.write', { path: '/srv/team/teamfile.md' }, text('edited by alice'));
    t.equal(await readText(root, '/srv/team/teamfile.md'), 'edited by alice');
    await t.rejects(alice.call('fs.read', { path: '/srv/bots.md' }), denied);
  });

  t.test('setgid directories pass on their group, and the bit to new subdirectories', async (t) => {
    const f = await alice.call('fs.write', { path: '/srv/team/alice.md' }, text('a'));
    const fs = await alice.call('fs.stat', { path: f.path });
    t.equal(fs.gid, gids.team);
    t.equal(fs.uid, users.alice!.uid);
    t.equal(fs.mode, '0644', 'files do not get the setgid bit');
    await alice.call('fs.mkdir', { path: '/srv/team/proj' });
    const ds = await alice.call('fs.stat', { path: '/srv/team/proj' });
    t.equal(ds.gid, gids.team);
    t.equal(ds.mode, '2755');
    // auto-created parents follow the same rule, at every level
    await alice.call('fs.write', { path: '/srv/team/auto/a/b.md' }, text('b'));
    for (const dir of ['/srv/team/auto', '/srv/team/auto/a']) {
      const s = await alice.call('fs.stat', { path: dir });
      t.equal(s.gid, gids.team, dir);
      t.equal(s.mode, '2755', dir);
    }
    t.equal((await alice.call('fs.stat', { path: '/srv/team/auto/a/b.md' })).gid, gids.team);
    await alice.call('fs.mkdir', { path: '/srv/team/p1/p2', parents: true });
    t.equal((await alice.call('fs.stat', { path: '/srv/team/p1/p2' })).mode, '2755');
    // outside a setgid directory new entries take her primary group
    const h = await alice.call('fs.write', { path: '/srv/shared/alice-own.md' }, text('x'));
    t.equal((await alice.call('fs.stat', { path: h.path })).gid, users.alice!.gid);
    // bob (also in team) can read what alice made there
    t.equal(await readText(bob, '/srv/team/auto/a/b.md'), 'b');
  });

  t.test('sticky /tmp: she removes her own entries, not bob’s', async (t) => {
    await bob.call('fs.write', { path: '/tmp/bob-file.md', mode: '0666' }, text('bob'));
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.unlink', { path: '/tmp/bob-file.md' }), denied);
      await t.rejects(alice.call('fs.delete', { path: '/tmp/bob-file.md' }), denied);
      await t.rejects(alice.call('fs.move', { src: '/tmp/bob-file.md', dst: '/tmp/stolen.md' }), denied);
      await t.rejects(
        alice.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/tmp/bob-file.md' }),
        denied,
        'nor replace it',
      );
    });
    await alice.call('fs.write', { path: '/tmp/bob-file.md' }, text('0666 lets her write it'));
    await alice.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/tmp/alice-tmp2.md' });
    await alice.call('fs.move', { src: '/tmp/alice-tmp2.md', dst: '/tmp/alice-tmp.md' });
    await alice.call('fs.write', { path: '/tmp/alice-gone.md' }, text('x'));
    await alice.call('fs.unlink', { path: '/tmp/alice-gone.md' });
  });

  t.test('chmod her own entries only', async (t) => {
    t.equal((await alice.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0664' })).mode, '0664');
    await alice.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0644' });
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.chmod', { path: '/srv/teamonly.md', mode: '0666' }), { code: 'EPERM' });
      await t.rejects(
        alice.call('fs.chmod', { path: '/srv/team/teamfile.md', mode: '0666' }),
        { code: 'EPERM' },
        'write access is not ownership',
      );
      await t.rejects(alice.call('fs.chmod', { path: '/srv', mode: '0777' }), { code: 'EPERM' });
    });
  });

  t.test('chown: never to another user; chgrp only to her own groups', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.chown', { path: '/srv/pub/file.md', owner: 'bob' }), { code: 'EPERM' });
      await t.rejects(alice.call('fs.chown', { path: '/srv/pub/file.md', owner: users.bob!.uid }), { code: 'EPERM' });
      await t.rejects(alice.call('fs.chown', { path: '/srv/pub/file.md', group: 'other' }), { code: 'EPERM' });
      await t.rejects(alice.call('fs.chown', { path: '/srv/pub/file.md', group: 'wheel' }), { code: 'EPERM' });
      await t.rejects(
        alice.call('fs.chown', { path: '/srv/team/teamfile.md', group: 'alice' }),
        { code: 'EPERM' },
        'not her file',
      );
      await t.rejects(
        alice.call('fs.chown', { path: '/srv/teamonly.md', owner: 'alice' }),
        { code: 'EPERM' },
        'nor taking ownership',
      );
    });
    t.equal((await alice.call('fs.chown', { path: '/srv/pub/file.md', group: 'team' })).gid, gids.team);
    t.equal((await alice.call('fs.chown', { path: '/srv/pub/file.md', group: gids.alice })).gid, gids.alice);
    t.equal(
      (await alice.call('fs.chown', { path: '/srv/pub/file.md', owner: 'alice' })).uid,
      users.alice!.uid,
      'chown to herself is a no-op',
    );
    // POSIX: set-id bits on a file do not survive a chgrp by its owner, nor a chmod into a group she is not in
    await alice.call('fs.write', { path: '/srv/pub/sgid.md' }, text('s'));
    t.equal((await alice.call('fs.chmod', { path: '/srv/pub/sgid.md', mode: '2755' })).mode, '2755');
    await alice.call('fs.chown', { path: '/srv/pub/sgid.md', group: 'team' });
    t.equal((await alice.call('fs.stat', { path: '/srv/pub/sgid.md' })).mode, '0755');
    await root.call('fs.chown', { path: '/srv/pub/sgid.md', group: 'other' });
    t.equal((await alice.call('fs.chmod', { path: '/srv/pub/sgid.md', mode: '2755' })).mode, '0755');
  });

  t.test('no directory write, no create/delete/rename; refused auto-parents are not created', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.write', { path: '/srv/new.md' }, text('x')), denied);
      await t.rejects(alice.call('fs.write', { path: '/srv/newdir/deep/x.md' }, text('x')), denied);
      await t.rejects(alice.call('fs.mkdir', { path: '/srv/newdir' }), denied);
      await t.rejects(alice.call('fs.mkdir', { path: '/srv/newdir/deeper', parents: true }), denied);
      await t.rejects(alice.call('fs.symlink', { target: '/tmp', path: '/srv/ln' }), denied);
      await t.rejects(alice.call('fs.delete', { path: '/srv/bots.md' }), denied);
      await t.rejects(alice.call('fs.move', { src: '/srv/pub/file.md', dst: '/srv/file.md' }), denied);
      await t.rejects(
        alice.call('fs.move', { src: '/srv/pub', dst: '/srv/shared/pub' }),
        denied,
        'moving her dir out of root-owned /srv',
      );
      await t.rejects(alice.call('fs.copy', { src: '/srv/pub/file.md', dst: '/srv/copy.md' }), denied);
      await t.rejects(alice.call('fs.copy', { src: '/srv/pub/file.md', dst: '/srv/cdir/sub/copy.md' }), denied);
      await t.rejects(alice.call('fs.truncate', { path: '/srv/teamonly.md', size: 0 }), denied);
      await t.rejects(alice.call('fs.utimens', { path: '/srv/teamonly.md' }), denied);
      await t.rejects(
        alice.call('fs.utimens', { path: '/srv/team/teamfile.md', mtime: 1 }),
        { code: 'EPERM' },
        'explicit times need ownership',
      );
    });
    await alice.call('fs.utimens', { path: '/srv/team/teamfile.md' });
  });

  t.test('symlinks: her own targets are fine, loops are ELOOP', async (t) => {
    t.equal(await readText(alice, '/srv/shared/to-private'), 'alice private');
    t.equal(await readText(alice, '/srv/shared/to-alice-home/private.md'), 'alice private');
    for (const l of ['/srv/shared/loop-a', '/srv/shared/self', '/srv/shared/selfdir']) {
      await t.rejects(alice.call('fs.stat', { path: l }), { code: 'ELOOP' }, l);
      await t.rejects(alice.call('fs.read', { path: l }), { code: 'ELOOP' }, l);
    }
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.write', { path: '/srv/shared/loop-b' }, text('x')), { code: 'ELOOP' });
      await t.rejects(alice.call('fs.write', { path: '/srv/shared/loop-a/x.md' }, text('x')), { code: 'ELOOP' });
      await t.rejects(alice.call('fs.list', { path: '/srv/shared/self' }), { code: 'ELOOP' });
      await t.rejects(alice.call('fs.mkdir', { path: '/srv/shared/selfdir/y', parents: true }), { code: 'ELOOP' });
    });
    t.equal(
      (await alice.call('fs.stat', { path: '/srv/shared/loop-a', nofollow: true })).kind,
      'symlink',
      'lstat does not follow',
    );
  });

  t.test('recursive delete is all-or-nothing', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(alice.call('fs.delete', { path: '/srv/shared/tree', recursive: true }), denied);
    });
    t.equal(await readText(alice, '/srv/shared/tree/a/b/c.md'), 'c');
    t.equal((await alice.call('fs.delete', { path: '/srv/shared/tree/a', recursive: true })).deleted, 4);
  });

  t.test('recursive copy of what she can read', async (t) => {
    const r = await alice.call('fs.copy', { src: '/srv/shared/ctree', dst: '/srv/shared/alice-copy', recursive: true });
    t.equal(r.copied, 5);
    const s = await alice.call('fs.stat', { path: '/srv/shared/alice-copy/deep/er/hidden.md' });
    t.equal(s.mode, '0600');
    t.equal(s.uid, users.alice!.uid);
  });

  t.test('no administration, no delegation', async (t) => {
    await t.rejects(alice.call('admin.userAdd', { name: 'mallory' }), denied);
    await t.rejects(alice.call('admin.userList', {}), denied);
    await t.rejects(alice.call('admin.token', { name: 'alice' }), denied);
    await t.rejects(alice.call('admin.token', { name: 'bob' }), denied);
    await t.rejects(alice.call('admin.groupAdd', { name: 'mine' }), denied);
    await t.rejects(alice.call('admin.groupMemberAdd', { user: 'alice', group: 'wheel' }), denied);
    await t.rejects(alice.call('sys.fsck', {}), denied);
    const asBob = d.client.as({ authorization: 'User alice', onBehalfOf: 'bob' });
    await t.rejects(asBob.call('auth.whoami', {}), { code: 'EPERM' });
    await t.rejects(asBob.call('fs.read', { path: '/srv/pub/file.md' }), { code: 'EPERM' });
    await t.rejects(asBob.call('fs.write', { path: '/tmp/as-bob.md' }, text('x')), { code: 'EPERM' });
    await t.rejects(root.call('fs.stat', { path: '/tmp/as-bob.md' }), { code: 'ENOENT' });
    const w = await alice.call('auth.whoami', {});
    t.equal(w.is_admin, false);
    t.same(w.groups, [gids.alice, gids.team]);
  });
});
