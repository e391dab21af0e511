/** Permissions as carol: only in group other, outside team (DESIGN.md §3). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('carol', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, carol } = p;

  t.test('the setgid team directory (2770) is closed to her entirely', async (t) => {
    await t.rejects(carol.call('fs.list', { path: '/srv/team' }), denied);
    await t.rejects(carol.call('fs.read', { path: '/srv/team/teamfile.md' }), denied);
    await t.rejects(carol.call('fs.stat', { path: '/srv/team/teamfile.md' }), denied);
    await unchanged(t, root, async () => {
      await t.rejects(carol.call('fs.write', { path: '/srv/team/carol.md' }, text('x')), denied);
      await t.rejects(carol.call('fs.write', { path: '/srv/team/teamfile.md' }, text('x')), denied);
      await t.rejects(carol.call('fs.mkdir', { path: '/srv/team/c', parents: true }), denied);
      await t.rejects(carol.call('fs.delete', { path: '/srv/team/teamfile.md' }), denied);
      await t.rejects(carol.call('fs.move', { src: '/srv/team/teamfile.md', dst: '/srv/shared/t.md' }), denied);
    });
  });

  t.test('group-readable files of other groups are not hers', async (t) => {
    await t.rejects(carol.call('fs.read', { path: '/srv/pub/group.md' }), denied);
    await t.rejects(carol.call('fs.read', { path: '/srv/teamonly.md' }), denied);
    await t.rejects(carol.call('fs.read', { path: '/srv/bots.md' }), denied);
    t.equal(await readText(carol, '/srv/pub/file.md'), 'public file');
    await carol.call('fs.access', { path: '/srv/pub/file.md', mode: 4 });
    await t.rejects(carol.call('fs.access', { path: '/srv/pub/file.md', mode: 2 }), denied);
    await t.rejects(carol.call('fs.access', { path: '/srv/pub/group.md', mode: 4 }), denied);
  });

  t.test('private homes: 0644 inside 0700 stays closed, existence does not leak', async (t) => {
    await t.rejects(carol.call('fs.read', { path: '/home/alice/private.md' }), denied);
    await t.rejects(carol.call('fs.stat', { path: '/home/alice/nonexistent' }), denied);
    await t.rejects(carol.call('fs.read', { path: '/srv/shared/to-private' }), denied);
    await t.rejects(carol.call('fs.list', { path: '/srv/shared/to-alice-home' }), denied);
    // her own home is hers; others cannot get in
    await carol.call('fs.write', { path: 'mine.md' }, text('carol'));
    await t.rejects(p.alice.call('fs.read', { path: '/home/carol/mine.md' }), denied);
    await t.rejects(p.bob.call('fs.list', { path: '/home/carol' }), denied);
    t.equal((await carol.call('fs.stat', { path: 'mine.md' })).gid, gids.carol);
  });

  t.test('chgrp only to her own groups', async (t) => {
    await carol.call('fs.write', { path: '/srv/shared/carol.md' }, text('c'));
    t.equal((await carol.call('fs.chown', { path: '/srv/shared/carol.md', group: 'other' })).gid, gids.other);
    await unchanged(t, root, async () => {
      await t.rejects(carol.call('fs.chown', { path: '/srv/shared/carol.md', group: 'team' }), { code: 'EPERM' });
      await t.rejects(carol.call('fs.chown', { path: '/srv/shared/carol.md', group: gids.team! }), { code: 'EPERM' });
      await t.rejects(carol.call('fs.chown', { path: '/srv/shared/carol.md', owner: 'alice' }), { code: 'EPERM' });
      await t.rejects(carol.call('fs.chown', { path: '/srv/shared/carol.md', owner: 'root', group: 'root' }), {
        code: 'EPERM',
      });
    });
    t.equal((await carol.call('fs.stat', { path: '/srv/shared/carol.md' })).uid, users.carol!.uid);
  });

  t.test('a non-sticky 0777 directory lets anyone remove entries', async (t) => {
    // /srv/shared is 0777 without the sticky bit: removing another user's file there is allowed
    await p.alice.call('fs.write', { path: '/srv/shared/alice-leaves.md' }, text('a'));
    await carol.call('fs.delete', { path: '/srv/shared/alice-leaves.md' });
    await t.rejects(root.call('fs.stat', { path: '/srv/shared/alice-leaves.md' }), { code: 'ENOENT' });
  });

  t.test('sticky /tmp protects entries from carol as well', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(carol.call('fs.delete', { path: '/tmp/alice-tmp.md' }), denied);
      await t.rejects(carol.call('fs.move', { src: '/tmp/alice-dir', dst: '/tmp/x' }), denied);
    });
  });

  t.test('admin and delegation are refused', async (t) => {
    await t.rejects(carol.call('admin.groupMemberAdd', { user: 'carol', group: 'team' }), denied);
    await t.rejects(carol.call('admin.userDel', { name: 'alice' }), denied);
    await t.rejects(d.client.as({ authorization: 'User carol', onBehalfOf: 'root' }).call('fs.list', { path: '/' }), {
      code: 'EPERM',
    });
    t.same((await carol.call('auth.whoami', {})).groups, [gids.carol, gids.other]);
  });
});
