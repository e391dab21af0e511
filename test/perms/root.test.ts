/** Permissions as root (uid 0): bypasses every check, but not ELOOP or bad input (DESIGN.md §3). */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { permsFixture } from './fixture.js';

t.test('root', async (t) => {
  const { d, p, users, gids } = await permsFixture(t);
  const { root, alice } = p;

  t.test('reads, lists and writes everywhere', async (t) => {
    t.equal(await readText(root, '/home/alice/secret600.md'), 'alice secret');
    t.equal(await readText(root, '/srv/pub/nox/f.md'), 'behind a non-searchable dir');
    t.same(
      (await root.call('fs.list', { path: '/srv/pub/xonly' })).entries.map((e) => e.name),
      ['known.md'],
    );
    t.same(
      (await root.call('fs.list', { path: '/srv/team' })).entries.map((e) => e.name),
      ['teamfile.md'],
    );
    await root.call('fs.write', { path: '/home/alice/secret600.md' }, text('root wrote'));
    t.equal(await readText(alice, 'secret600.md'), 'root wrote');
    const w = await root.call('fs.write', { path: '/home/alice/by-root.md' }, text('r'));
    const s = await root.call('fs.stat', { path: w.path });
    t.equal(s.uid, 0);
    t.equal(s.gid, 0);
    await root.call('fs.write', { path: '/srv/pub/owner-none.md', mode: '0000' }, text('0000'));
    t.equal(await readText(root, '/srv/pub/owner-none.md'), '0000');
    await root.call('fs.access', { path: '/srv/pub/owner-none.md', mode: 7 });
    // through symlinks as well
    t.equal(await readText(root, '/srv/shared/to-secret'), 'pub secret');
  });

  t.test('the anonymous caller is root, as is "User root"', async (t) => {
    const w = await d.client.call('auth.whoami', {});
    t.equal(w.uid, 0);
    t.equal(w.home, '/');
    t.equal(w.is_admin, true);
    t.equal((await d.client.as({ authorization: 'User root' }).call('auth.whoami', {})).uid, 0);
  });

  t.test('chown across users and to any group; chmod anything', async (t) => {
    const r = await root.call('fs.chown', { path: '/srv/pub/file.md', owner: 'carol', group: 'other' });
    t.equal(r.uid, users.carol!.uid);
    t.equal(r.gid, gids.other);
    // carol now owns it: she may chmod it, alice no longer may
    await p.carol.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0600' });
    await t.rejects(alice.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0644' }), { code: 'EPERM' });
    await root.call('fs.chown', { path: '/srv/pub/file.md', owner: 'alice', group: 'alice' });
    await root.call('fs.chmod', { path: '/srv/pub/file.md', mode: '0644' });
    t.equal((await root.call('fs.chmod', { path: '/home/alice', mode: '0750' })).mode, '0750');
    await root.call('fs.chmod', { path: '/home/alice', mode: '0700' });
    t.equal((await root.call('fs.chown', { path: '/srv/team', group: 'bots' })).gid, gids.bots);
    await root.call('fs.chown', { path: '/srv/team', group: 'team' });
    t.equal((await root.call('fs.stat', { path: '/srv/team' })).mode, '2770', 'root chown keeps setgid');
  });

  t.test('sticky directories do not stop root', async (t) => {
    await root.call('fs.move', { src: '/tmp/alice-tmp.md', dst: '/tmp/moved-by-root.md' });
    await root.call('fs.delete', { path: '/tmp/moved-by-root.md' });
    await root.call('fs.rmdir', { path: '/tmp/alice-dir' });
    t.same((await root.call('fs.list', { path: '/tmp' })).entries, []);
  });

  t.test('recursive delete and copy succeed where every entry is removable/readable by root', async (t) => {
    t.equal(
      (await root.call('fs.copy', { src: '/srv/shared/ctree', dst: '/srv/root-copy', recursive: true })).copied,
      5,
    );
    t.equal(await readText(root, '/srv/root-copy/deep/er/hidden.md'), 'hidden');
    t.equal(
      (await root.call('fs.stat', { path: '/srv/root-copy/deep/er/hidden.md' })).uid,
      0,
      'copies belong to the copier',
    );
    // tree, a, a/b, a/b/c.md, a/d.md, x, x/y, x/y/z.md
    t.equal((await root.call('fs.delete', { path: '/srv/shared/tree', recursive: true })).deleted, 8);
    await t.rejects(root.call('fs.stat', { path: '/srv/shared/tree' }), { code: 'ENOENT' });
  });

  t.test('symlink loops are ELOOP even for root; 40 links resolve, 41 do not', async (t) => {
    await t.rejects(root.call('fs.read', { path: '/srv/shared/loop-a' }), { code: 'ELOOP' });
    await t.rejects(root.call('fs.stat', { path: '/srv/shared/self' }), { code: 'ELOOP' });
    await t.rejects(root.call('fs.write', { path: '/srv/shared/selfdir/x' }, text('x')), { code: 'ELOOP' });
    await root.call('fs.write', { path: '/srv/chain/target.md' }, text('end of chain'));
    await root.call('fs.symlink', { target: 'target.md', path: '/srv/chain/l1' });
    for (let i = 2; i <= 41; i++) await root.call('fs.symlink', { target: `l${i - 1}`, path: `/srv/chain/l${i}` });
    t.equal(await readText(root, '/srv/chain/l40'), 'end of chain');
    await t.rejects(root.call('fs.read', { path: '/srv/chain/l41' }), { code: 'ELOOP' });
    await root.call('fs.write', { path: '/srv/chain/l40' }, text('written through 40'));
    t.equal(await readText(root, '/srv/chain/target.md'), 'written through 40');
    await t.rejects(root.call('fs.write', { path: '/srv/chain/l41' }, text('x')), { code: 'ELOOP' });
    t.equal(await readText(root, '/srv/chain/target.md'), 'written through 40');
  });

  t.test('root on behalf of a user is limited to what that user may do', async (t) => {
    const rootForCarol = d.client.as({ onBehalfOf: 'carol' });
    await t.rejects(rootForCarol.call('fs.read', { path: '/home/alice/private.md' }), { code: 'EACCES' });
    const w = await rootForCarol.call('fs.write', { path: 'from-root.md' }, text('x'));
    t.equal(w.path, '/home/carol/from-root.md');
    t.equal((await root.call('fs.stat', { path: w.path })).uid, users.carol!.uid, 'new files belong to the delegate');
  });

  t.test('administration', async (t) => {
    const u = await root.call('admin.userAdd', { name: 'dave' });
    t.equal(u.home, '/home/dave');
    t.equal((await root.call('fs.stat', { path: '/home/dave' })).mode, '0700');
    t.equal((await root.call('fs.stat', { path: '/home/dave' })).uid, u.uid);
    const tok = await root.call('admin.token', { name: 'dave' });
    t.equal((await d.client.as({ authorization: `Bearer ${tok.token}` }).call('auth.whoami', {})).user, 'dave');
    t.same(await root.call('admin.userDel', { name: 'dave' }), { deleted: 'dave' });
    await t.rejects(d.client.as({ authorization: `Bearer ${tok.token}` }).call('auth.whoami', {}), { code: 'EAUTH' });
    await t.rejects(root.call('admin.userDel', { name: 'root' }), { code: 'EPERM' });
  });
});
