/**
 * The shared permission fixture: one daemon, the standard personas, and a tree that exercises
 * every rule of DESIGN.md §3. Each test/perms/<persona>.test.ts builds its own copy.
 *
 *   /home/alice            0700 alice   private.md 0644, secret600.md 0600
 *   /srv                   0755 root    bots.md 0640 root:bots, teamonly.md 0640 root:team
 *   /srv/pub               0755 alice   file.md 0644, secret.md 0600, group.md 0640 alice:team
 *   /srv/pub/nox           0744 alice   f.md 0644          (readable, not searchable by others)
 *   /srv/pub/xonly         0711 alice   known.md 0644      (searchable, not readable by others)
 *   /srv/team              2770 root:team (setgid)   teamfile.md 0660 root:team
 *   /srv/shared            0777 root    symlinks to protected targets, loops, trees below
 *   /srv/shared/tree       alice: a/b/c.md, a/d.md, x/ (0777) holding y/ (root 0755) holding z.md
 *   /srv/shared/ctree      alice: ok.md 0644, deep/er/hidden.md 0600
 *   /tmp                   1777 root    alice-tmp.md 0666 alice, alice-dir/ 0777 alice
 */
import type { Test } from 'tap';
import type { Caller } from '../../daemon/rpc/client.js';
import type { UserRecord } from '../../daemon/rpc/protocol.js';
import { makePersonas, spawnDaemon, text, treeSnapshot, type Personas, type TestDaemon } from '../helpers/daemon.js';

interface Teardown {
  teardown(fn: () => void | Promise<void>): void;
}

export interface Fixture {
  d: TestDaemon;
  p: Personas;
  users: Record<string, UserRecord>;
  gids: Record<string, number>;
}

export async function permsFixture(t: Teardown): Promise<Fixture> {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice } = p;
  await root.call('admin.groupAdd', { name: 'bots' });
  await root.call('admin.groupMemberAdd', { user: 'agent', group: 'bots' });
  const users: Record<string, UserRecord> = {};
  for (const u of (await root.call('admin.userList', {})).users) users[u.name] = u;
  const gids: Record<string, number> = {};
  for (const g of (await root.call('admin.groupList', {})).groups) gids[g.name] = g.gid;

  const w = (c: Caller, path: string, body: string, mode?: string) =>
    c.call('fs.write', mode === undefined ? { path } : { path, mode }, text(body));

  await w(alice, '/home/alice/private.md', 'alice private');
  await w(alice, '/home/alice/secret600.md', 'alice secret', '0600');

  await root.call('fs.mkdir', { path: '/srv' });
  await w(root, '/srv/bots.md', 'bots only', '0640');
  await root.call('fs.chown', { path: '/srv/bots.md', group: 'bots' });
  await w(root, '/srv/teamonly.md', 'team only', '0640');
  await root.call('fs.chown', { path: '/srv/teamonly.md', group: 'team' });

  await root.call('fs.mkdir', { path: '/srv/pub' });
  await root.call('fs.chown', { path: '/srv/pub', owner: 'alice', group: 'alice' });
  await w(alice, '/srv/pub/file.md', 'public file');
  await w(alice, '/srv/pub/secret.md', 'pub secret', '0600');
  await w(alice, '/srv/pub/group.md', 'team may read', '0640');
  await alice.call('fs.chown', { path: '/srv/pub/group.md', group: 'team' });
  await alice.call('fs.mkdir', { path: '/srv/pub/nox', mode: '0744' });
  await w(alice, '/srv/pub/nox/f.md', 'behind a non-searchable dir');
  await alice.call('fs.mkdir', { path: '/srv/pub/xonly', mode: '0711' });
  await w(alice, '/srv/pub/xonly/known.md', 'known name');

  await root.call('fs.mkdir', { path: '/srv/team', mode: '2770' });
  await root.call('fs.chown', { path: '/srv/team', group: 'team' });
  await w(root, '/srv/team/teamfile.md', 'team file', '0660');
  await root.call('fs.chown', { path: '/srv/team/teamfile.md', group: 'team' });

  await root.call('fs.mkdir', { path: '/srv/shared', mode: '0777' });
  await root.call('fs.symlink', { target: '/home/alice/private.md', path: '/srv/shared/to-private' });
  await root.call('fs.symlink', { target: '../pub/secret.md', path: '/srv/shared/to-secret' });
  await root.call('fs.symlink', { target: '/srv/pub/nox/f.md', path: '/srv/shared/to-nox' });
  await root.call('fs.symlink', { target: '/home/alice', path: '/srv/shared/to-alice-home' });
  await root.call('fs.symlink', { target: 'loop-b', path: '/srv/shared/loop-a' });
  await root.call('fs.symlink', { target: 'loop-a', path: '/srv/shared/loop-b' });
  await root.call('fs.symlink', { target: 'self', path: '/srv/shared/self' });
  await root.call('fs.symlink', { target: '/srv/shared/selfdir/x', path: '/srv/shared/selfdir' });

  await w(alice, '/srv/shared/tree/a/b/c.md', 'c');
  await w(alice, '/srv/shared/tree/a/d.md', 'd');
  await alice.call('fs.mkdir', { path: '/srv/shared/tree/x', mode: '0777' });
  await root.call('fs.mkdir', { path: '/srv/shared/tree/x/y' });
  await w(root, '/srv/shared/tree/x/y/z.md', 'root owns this');

  await w(alice, '/srv/shared/ctree/ok.md', 'ok');
  await w(alice, '/srv/shared/ctree/deep/er/hidden.md', 'hidden', '0600');

  await w(alice, '/tmp/alice-tmp.md', 'alice in tmp', '0666');
  await alice.call('fs.mkdir', { path: '/tmp/alice-dir', mode: '0777' });
  return { d, p, users, gids };
}

/** The codes a refused request may carry; tap's `rejects` pattern. */
export const denied = { code: 'EACCES' };

/** Runs `fn` (which should be refused) and checks the whole tree is exactly as before. */
export async function unchanged(
  t: Test,
  root: Caller,
  fn: () => Promise<void>,
  msg = 'nothing changed',
): Promise<void> {
  const before = await treeSnapshot(root);
  await fn();
  t.equal(await treeSnapshot(root), before, msg);
}
