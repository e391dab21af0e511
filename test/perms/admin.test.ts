/** Permissions as a wheel member: reads all, chmods all, but writes and chowns like a user (DESIGN.md §3). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { denied, permsFixture, unchanged } from './fixture.js';

t.test('admin (wheel)', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, admin, alice } = p;

  t.test('reads every file and lists every directory regardless of mode', async (t) => {
    t.same(
      (await admin.call('fs.list', { path: '/home/alice' })).entries.map((e) => e.name),
      ['private.md', 'secret600.md'],
    );
    t.equal(await readText(admin, '/home/alice/private.md'), 'alice private');
    t.equal(await readText(admin, '/home/alice/secret600.md'), 'alice secret');
    t.equal(await readText(admin, '/srv/pub/secret.md'), 'pub secret');
    t.equal(await readText(admin, '/srv/pub/nox/f.md'), 'behind a non-searchable dir');
    t.same(
      (await admin.call('fs.list', { path: '/srv/pub/xonly' })).entries.map((e) => e.name),
      ['known.md'],
    );
    t.same(
      (await admin.call('fs.list', { path: '/srv/team' })).entries.map((e) => e.name),
      ['teamfile.md'],
    );
    t.equal(await readText(admin, '/srv/bots.md'), 'bots only');
    t.equal(await readText(admin, '/srv/shared/to-private'), 'alice private', 'through symlinks too');
    await alice.call('fs.write', { path: '/srv/pub/zero.md', mode: '0000' }, text('zero'));
    t.equal(await readText(admin, '/srv/pub/zero.md'), 'zero');
    await admin.call('fs.access', { path: '/srv/pub/zero.md', mode: 4 });
    await t.rejects(admin.call('fs.access', { path: '/srv/pub/zero.md', mode: 2 }), denied);
  });

  t.test('cannot write, create, delete or rename what is not theirs', async (t) => {
    await unchanged(t, root, async () => {
      await t.rejects(admin.call('fs.write', { path: '/home/alice/private.md' }, text('x')), denied);
      await t.rejects(admin.call('fs.write', { path: '/home/alice/new.md' }, text('x')), denied);
      await t.rejects(admin.call('fs.write', { path: '/srv/pub/file.md' }, text('x')), denied);
      await t.rejects(admin.call('fs.truncate', { path: '/srv/pub/file.md', size: 0 }), denied);
      await t.rejects(admin.call('fs.delete', { path: '/srv/pub/file.md' }), denied);
      await t.rejects(admin.call('fs.move', { src: '/srv/pub/file.md', dst: '/srv/shared/file.md' }), denied);
      await t.rejects(admin.call('fs.mkdir', { path: '/home/alice/d' }), denied);
      await t.rejects(admin.call('fs.delete', { path: '/srv/shared/tree', recursive: true }), denied);
      await t.rejects(admin.call('fs.delete', { path: '/tmp/alice-tmp.md' }), denied, 'sticky /tmp');
    });
  });

  t.test('chmods any file, but does not chown across users or chgrp what it does not own', async (t) => {
    t.equal((await admin.call('fs.chmod', { path: '/home/alice/secret600.md', mode: '0640' })).mode, '0640');
    t.equal((await admin.call('fs.chmod', { path: '/srv/team', mode: '2775' })).mode, '2775');
    t.equal((await admin.call('fs.chmod', { path: '/srv/teamonly.md', mode: '0600' })).mode, '0600');
    await unchanged(t, root, async () => {
      await t.rejects(admin.call('fs.chown', { path: '/srv/pub/file.md', owner: 'bob' }), { code: 'EPERM' });
      await t.rejects(admin.call('fs.chown', { path: '/srv/pub/file.md', owner: 'admin' }), { code: 'EPERM' });
      await t.rejects(admin.call('fs.chown', { path: '/srv/pub/file.md', group: 'wheel' }), { code: 'EPERM' });
      await t.rejects(admin.call('fs.chown', { path: '/home/alice', owner: 'root' }), { code: 'EPERM' });
    });
    // its own files: chgrp to its groups
    await admin.call('fs.write', { path: '/srv/shared/admin.md' }, text('a'));
    t.equal((await admin.call('fs.chown', { path: '/srv/shared/admin.md', group: 'wheel' })).gid, gids.wheel);
    await t.rejects(admin.call('fs.chown', { path: '/srv/shared/admin.md', group: 'team' }), { code: 'EPERM' });
  });

  t.test('administers users, groups and tokens', async (t) => {
    const u = await admin.call('admin.userAdd', { name: 'erin' });
    t.equal(u.is_admin, false);
    const tok = await admin.call('admin.token', { name: 'erin' });
    t.equal((await d.client.as({ authorization: `Bearer ${tok.token}` }).call('auth.whoami', {})).user, 'erin');
    await admin.call('admin.groupAdd', { name: 'reviewers' });
    const g = await admin.call('admin.groupMemberAdd', { user: 'erin', group: 'reviewers' });
    t.same(g.members, ['erin']);
    t.ok((await admin.call('admin.userList', {})).users.some((x) => x.name === 'erin'));
    const w = await admin.call('auth.whoami', {});
    t.equal(w.is_admin, true);
    t.ok(w.groups.includes(gids.wheel!));
    t.equal((await admin.call('sys.fsck', {})).ok, true);
  });

  t.test('cannot mint a token for root (that would be all of root’s power)', async (t) => {
    await t.rejects(admin.call('admin.token', { name: 'root' }), { code: 'EPERM' });
    t.equal((await root.call('admin.userList', {})).users.find((u) => u.name === 'root')!.has_token, false);
    const rootTok = (await root.call('admin.token', { name: 'root' })).token;
    t.equal((await d.client.as({ authorization: `Bearer ${rootTok}` }).call('auth.whoami', {})).uid, 0, 'root may');
    const adminForRoot = d.client.as({ authorization: `Bearer ${p.tokens.admin}`, onBehalfOf: 'root' });
    await t.rejects(adminForRoot.call('admin.token', { name: 'root' }), { code: 'EPERM' }, 'nor by delegating to root');
  });

  t.test("may delegate (with the user's grant); the result is the intersection with the delegate", async (t) => {
    const noGrant = d.client.as({ authorization: `Bearer ${p.tokens.admin}`, onBehalfOf: 'alice' });
    await t.rejects(noGrant.call('auth.whoami', {}), { code: 'EPERM', message: /no delegation grant/ });
    await alice.call('auth.delegationAdd', { agent: 'admin' });
    await root.call('auth.delegationAdd', { agent: 'admin', user: 'carol' });
    const adminForAlice = d.client.as({ authorization: `Bearer ${p.tokens.admin}`, onBehalfOf: 'alice' });
    t.equal(await readText(adminForAlice, 'private.md'), 'alice private', 'both may read it');
    await t.rejects(adminForAlice.call('fs.read', { path: '/srv/bots.md' }), denied, 'alice may not');
    await t.rejects(
      adminForAlice.call('fs.write', { path: 'x.md' }, text('x')),
      denied,
      'wheel may not write in her home',
    );
    const adminForCarol = d.client.as({ authorization: `Bearer ${p.tokens.admin}`, onBehalfOf: 'carol' });
    await t.rejects(adminForCarol.call('fs.read', { path: '/home/alice/private.md' }), denied);
    await t.rejects(adminForCarol.call('admin.userAdd', { name: 'frank' }), denied, 'carol is no admin');
    await t.rejects(adminForCarol.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0600' }), { code: 'EPERM' });
    const w = await adminForCarol.call('fs.write', { path: '/srv/shared/by-admin-for-carol.md' }, text('c'));
    t.equal((await root.call('fs.stat', { path: w.path })).uid, users.carol!.uid);
  });
});
