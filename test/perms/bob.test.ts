/** Permissions as bob: in group team with alice, reaching into alice's things (DESIGN.md §3). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('bob', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, alice, bob } = p;

  t.test("alice's private home: a 0644 file inside a 0700 home stays unreadable", async (t) => {
    await t.rejects(bob.call('fs.read', { path: '/home/alice/private.md' }), denied);
    await t.rejects(bob.call('fs.stat', { path: '/home/alice/private.md' }), denied);
    await t.rejects(bob.call('fs.list', { path: '/home/alice' }), denied);
    await t.rejects(bob.call('fs.access', { path: '/home/alice/private.md', mode: 0 }), denied);
    await t.rejects(
      bob.call('fs.read', { path: '/home/alice/no-such-file.md' }),
      denied,
      'EACCES, not ENOENT: existence does not leak',
    );
    await t.rejects(bob.call('fs.copy', { src: '/home/alice/private.md', dst: 'stolen.md' }), denied);
    await t.rejects(bob.call('fs.stat', { path: 'stolen.md' }), { code: 'ENOENT' });
  });

  t.test('symlinks cannot bypass checks on their target', async (t) => {
    await t.rejects(bob.call('fs.read', { path: '/srv/shared/to-private' }), denied);
    await t.rejects(bob.call('fs.read', { path: '/srv/shared/to-alice-home/private.md' }), denied);
    await t.rejects(bob.call('fs.list', { path: '/srv/shared/to-alice-home' }), denied);
    await t.rejects(bob.call('fs.read', { path: '/srv/shared/to-secret' }), denied);
    await t.rejects(bob.call('fs.read', { path: '/srv/shared/to-nox' }), denied);
    // his own fresh links do no better
    await bob.call('fs.symlink', { target: '/home/alice/secret600.md', path: 'my-link' });
    await t.rejects(bob.call('fs.read', { path: 'my-link' }), denied);
    await unchanged(t, root, async () => {
      await t.rejects(bob.call('fs.write', { path: '/srv/shared/to-private' }, text('x')), denied);
      await t.rejects(bob.call('fs.write', { path: '/srv/shared/to-alice-home/planted.md' }, text('x')), denied);
      await t.rejects(bob.call('fs.write', { path: 'my-link' }, text('x')), denied);
      await t.rejects(
        bob.call('fs.chmod', { path: 'my-link', mode: '0666' }),
        denied,
        'chmod follows the link into a home he cannot search',
      );
      await t.rejects(bob.call('fs.truncate', { path: 'my-link', size: 0 }), denied);
    });
    // the link itself is his to see and remove
    t.equal((await bob.call('fs.readlink', { path: 'my-link' })).target, '/home/alice/secret600.md');
    await bob.call('fs.unlink', { path: 'my-link' });
    t.equal(await readText(alice, 'secret600.md'), 'alice secret');
  });

  t.test('traversal needs x on every directory', async (t) => {
    t.same(
      (await bob.call('fs.list', { path: '/srv/pub/nox' })).entries.map((e) => e.name),
      ['f.md'],
      'r without x: names only',
    );
    await t.rejects(bob.call('fs.read', { path: '/srv/pub/nox/f.md' }), denied);
    await t.rejects(bob.call('fs.stat', { path: '/srv/pub/nox/f.md' }), denied);
    await t.rejects(bob.call('fs.list', { path: '/srv/pub/xonly' }), denied, 'x without r: no listing');
    t.equal(await readText(bob, '/srv/pub/xonly/known.md'), 'known name', 'but a known name can be opened');
    // take away x on the top directory: everything below is closed
    await alice.call('fs.chmod', { path: '/srv/pub', mode: '0754' });
    await t.rejects(bob.call('fs.read', { path: '/srv/pub/file.md' }), denied);
    await t.rejects(bob.call('fs.read', { path: '/srv/pub/xonly/known.md' }), denied);
    await alice.call('fs.chmod', { path: '/srv/pub', mode: '0755' });
    t.equal(await readText(bob, '/srv/pub/file.md'), 'public file');
  });

  t.test('file modes: others, group team', async (t) => {
    t.equal(await readText(bob, '/srv/pub/group.md'), 'team may read');
    await t.rejects(bob.call('fs.read', { path: '/srv/pub/secret.md' }), denied);
    t.equal(await readText(bob, '/srv/teamonly.md'), 'team only');
    await t.rejects(bob.call('fs.read', { path: '/srv/bots.md' }), denied);
    await unchanged(t, root, async () => {
      await t.rejects(bob.call('fs.write', { path: '/srv/pub/file.md' }, text('x')), denied);
      await t.rejects(bob.call('fs.write', { path: '/srv/pub/file.md', append: true }, text('x')), denied);
      await t.rejects(bob.call('fs.write', { path: '/srv/pub/group.md' }, text('x')), denied);
      await t.rejects(bob.call('fs.write', { path: '/srv/pub/new.md' }, text('x')), denied);
      await t.rejects(bob.call('fs.delete', { path: '/srv/pub/file.md' }), denied);
      await t.rejects(bob.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0666' }), { code: 'EPERM' });
      await t.rejects(bob.call('fs.chown', { path: '/srv/pub/file.md', group: 'team' }), { code: 'EPERM' });
      await t.rejects(bob.call('fs.access', { path: '/srv/pub/file.md', mode: 2 }), denied);
    });
    await bob.call('fs.access', { path: '/srv/pub/file.md', mode: 4 });
  });

  t.test('setgid team directory', async (t) => {
    const w = await bob.call('fs.write', { path: '/srv/team/sub/bob.md' }, text('bob'));
    const s = await bob.call('fs.stat', { path: w.path });
    t.equal(s.uid, users.bob!.uid);
    t.equal(s.gid, gids.team);
    t.equal((await bob.call('fs.stat', { path: '/srv/team/sub' })).mode, '2755');
    t.equal(await readText(alice, w.path), 'bob');
  });

  t.test("sticky /tmp: bob cannot delete or rename alice's entries", async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(bob.call('fs.unlink', { path: '/tmp/alice-tmp.md' }), denied);
      await t.rejects(bob.call('fs.delete', { path: '/tmp/alice-tmp.md' }), denied);
      await t.rejects(bob.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/tmp/mine.md' }), denied);
      await t.rejects(bob.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/home/bob/mine.md' }), denied);
      await t.rejects(
        bob.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/tmp/bob-new/deeper/mine.md' }),
        denied,
        'no parents are left behind',
      );
      await t.rejects(bob.call('fs.move', { src: '/tmp/alice-dir', dst: '/home/bob/new/alice-dir' }), denied);
      await t.rejects(
        bob.call('fs.move', { src: '/srv/pub/nox', dst: '/home/bob/new/nox' }),
        denied,
        'no w on the source directory',
      );
      await t.rejects(bob.call('fs.rmdir', { path: '/tmp/alice-dir' }), denied);
      await t.rejects(bob.call('fs.delete', { path: '/tmp/alice-dir', recursive: true }), denied);
      await t.rejects(bob.call('fs.move', { src: '/tmp/alice-dir', dst: '/tmp/bobs-dir' }), denied);
    });
    // replacing her file by renaming over it is a removal too
    await bob.call('fs.write', { path: '/tmp/bob.md' }, text('bob'));
    await unchanged(t, root, async () => {
      await t.rejects(bob.call('fs.move', { src: '/tmp/bob.md', dst: '/tmp/alice-tmp.md' }), denied);
    });
    // what the mode allows still works: writing her 0666 file, and inside her 0777 directory
    await bob.call('fs.write', { path: '/tmp/alice-tmp.md' }, text('bob was here'));
    t.equal(await readText(alice, '/tmp/alice-tmp.md'), 'bob was here');
    await bob.call('fs.write', { path: '/tmp/alice-dir/bob-inside.md' }, text('x'));
    // and his own entries are his to remove
    await bob.call('fs.move', { src: '/tmp/bob.md', dst: '/tmp/bob2.md' });
    await bob.call('fs.unlink', { path: '/tmp/bob2.md' });
  });

  t.test('recursive delete and copy are all-or-nothing', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(bob.call('fs.delete', { path: '/srv/shared/tree', recursive: true }), denied);
      await t.rejects(
        bob.call('fs.copy', { src: '/srv/shared/ctree', dst: '/srv/shared/bobcopy', recursive: true }),
        denied,
      );
      await t.rejects(
        bob.call('fs.copy', { src: '/srv/shared/ctree', dst: '/srv/shared/bobnew/deeper/copy', recursive: true }),
        denied,
      );
      await t.rejects(
        bob.call('fs.copy', { src: '/srv/pub', dst: '/tmp/pubcopy', recursive: true }),
        denied,
        'secret.md and nox/ are unreadable to him',
      );
    });
    // the readable part alone copies fine
    const r = await bob.call('fs.copy', { src: '/srv/shared/ctree/ok.md', dst: '/srv/shared/bob-ok.md' });
    t.equal(r.copied, 1);
    t.equal(
      (await bob.call('fs.stat', { path: '/srv/shared/bob-ok.md' })).uid,
      users.bob!.uid,
      'a copy belongs to the copier',
    );
  });

  t.test('no delegation for plain users', async (t) => {
    const bobForAlice = d.client.as({ authorization: 'User bob', onBehalfOf: 'alice' });
    await t.rejects(bobForAlice.call('fs.read', { path: '/home/alice/private.md' }), { code: 'EPERM' });
    await t.rejects(bobForAlice.call('fs.list', {}), { code: 'EPERM' });
  });
});
