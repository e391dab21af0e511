/**
 * Every filesystem operation of the protocol, through a real daemon over its socket.
 * Permission rules per persona live in test/perms; bad input in bad-input.test.ts.
 */
import t from 'tap';
import {
  spawnDaemon,
  makePersonas,
  readText,
  text,
  treeSnapshot,
  sha256,
  blobId as objectIdOf,
} from '../helpers/daemon.js';

t.test('filesystem operations', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice } = p;
  const aliceUser = (await root.call('admin.userList', {})).users.find((u) => u.name === 'alice')!;

  t.test('a fresh tree has /, /home and a sticky /tmp', async (t) => {
    const l = await root.call('fs.list', { path: '/' });
    t.same(
      l.entries.map((e) => e.name),
      ['home', 'tmp'],
    );
    t.equal((await root.call('fs.stat', { path: '/tmp' })).mode, '1777');
    t.equal((await root.call('fs.stat', { path: '/' })).mode, '0755');
    const home = await root.call('fs.stat', { path: '/home/alice' });
    t.equal(home.mode, '0700');
    t.equal(home.uid, aliceUser.uid);
    t.equal(home.gid, aliceUser.gid);
  });

  t.test('write creates, overwrites and reports size, etag and created', async (t) => {
    const w1 = await alice.call('fs.write', { path: 'w/new.md' }, text('one'));
    t.same(w1, { path: '/home/alice/w/new.md', size: 3, etag: objectIdOf('one'), created: true });
    const w2 = await alice.call('fs.write', { path: 'w/new.md' }, text('second'));
    t.equal(w2.created, false);
    t.equal(w2.size, 6);
    t.not(w2.etag, w1.etag);
    t.equal(await readText(alice, 'w/new.md'), 'second');
    const s = await alice.call('fs.stat', { path: 'w/new.md' });
    t.equal(s.kind, 'file');
    t.equal(s.size, 6);
    t.equal(s.mode, '0644');
    t.equal(s.uid, aliceUser.uid);
    t.equal(s.gid, aliceUser.gid);
    t.equal(s.etag, w2.etag);
    t.equal(s.nlink, 1);
    t.equal(s.path, '/home/alice/w/new.md');
  });

  t.test('write auto-creates missing parents (0755, owned by the writer); parents:false does not', async (t) => {
    await alice.call('fs.write', { path: 'deep/a/b/c/f.md' }, text('x'));
    for (const dir of ['deep', 'deep/a', 'deep/a/b', 'deep/a/b/c']) {
      const s = await alice.call('fs.stat', { path: dir });
      t.equal(s.kind, 'directory', dir);
      t.equal(s.mode, '0755', dir);
      t.equal(s.uid, aliceUser.uid, dir);
    }
    await t.rejects(alice.call('fs.write', { path: 'nope/f.md', parents: false }, text('x')), { code: 'ENOENT' });
    await t.rejects(alice.call('fs.stat', { path: 'nope' }), { code: 'ENOENT' });
  });

  t.test('binary and empty content round-trip byte for byte', async (t) => {
    const all = Buffer.alloc(256 * 4);
    for (let i = 0; i < all.length; i++) all[i] = i % 256;
    await alice.call('fs.write', { path: 'bin.dat' }, { data: all });
    const r = await alice.request('fs.read', { path: 'bin.dat' });
    t.ok(r.data.equals(all));
    t.equal(r.result.size, all.length);
    t.equal(r.result.etag, objectIdOf(all));
    await alice.call('fs.write', { path: 'empty.md' }, { data: Buffer.alloc(0) });
    const e = await alice.request('fs.read', { path: 'empty.md' });
    t.equal(e.data.length, 0);
    t.equal(e.result.size, 0);
  });

  t.test('read: if_none_match answers not_modified without content; EISDIR, ENOENT', async (t) => {
    const w = await alice.call('fs.write', { path: 'r.md' }, text('read me'));
    const nm = await alice.request('fs.read', { path: 'r.md', if_none_match: w.etag });
    t.equal(nm.result.not_modified, true);
    t.equal(nm.data.length, 0);
    const other = await alice.request('fs.read', { path: 'r.md', if_none_match: 'deadbeef' });
    t.equal(other.result.not_modified, undefined);
    t.equal(other.data.toString(), 'read me');
    await t.rejects(alice.call('fs.read', { path: 'w' }), { code: 'EISDIR' });
    await t.rejects(alice.call('fs.read', { path: 'missing.md' }), { code: 'ENOENT' });
  });

  t.test('write preconditions: if_match, if_none_match, exclusive', async (t) => {
    const w = await alice.call('fs.write', { path: 'pre.md' }, text('v1'));
    await t.rejects(alice.call('fs.write', { path: 'pre.md', if_match: objectIdOf('other') }, text('v2')), {
      code: 'EPRECOND',
    });
    t.equal(await readText(alice, 'pre.md'), 'v1');
    const ok = await alice.call('fs.write', { path: 'pre.md', if_match: w.etag }, text('v2'));
    t.equal(ok.created, false);
    // the old etag no longer matches: a lost update is refused
    await t.rejects(alice.call('fs.write', { path: 'pre.md', if_match: w.etag }, text('v3')), { code: 'EPRECOND' });
    t.equal(await readText(alice, 'pre.md'), 'v2');
    await t.rejects(alice.call('fs.write', { path: 'pre-missing.md', if_match: w.etag }, text('x')), {
      code: 'EPRECOND',
    });
    await t.rejects(alice.call('fs.write', { path: 'pre-missing.md', if_match: '*' }, text('x')), { code: 'EPRECOND' });
    await t.rejects(alice.call('fs.stat', { path: 'pre-missing.md' }), { code: 'ENOENT' });
    await t.rejects(alice.call('fs.write', { path: 'pre.md', if_none_match: '*' }, text('v3')), { code: 'EPRECOND' });
    t.equal(await readText(alice, 'pre.md'), 'v2');
    t.equal((await alice.call('fs.write', { path: 'pre-new.md', if_none_match: '*' }, text('n'))).created, true);
    await t.rejects(alice.call('fs.write', { path: 'pre.md', exclusive: true }, text('v3')), { code: 'EEXIST' });
    t.equal(await readText(alice, 'pre.md'), 'v2');
    t.equal((await alice.call('fs.write', { path: 'excl.md', exclusive: true }, text('e'))).created, true);
    // exclusive never follows a final symlink, dangling or not (O_CREAT|O_EXCL)
    await alice.call('fs.symlink', { target: 'excl-target.md', path: 'excl-dangling' });
    await alice.call('fs.symlink', { target: 'excl.md', path: 'excl-link' });
    const before = await treeSnapshot(root, '/home/alice');
    await t.rejects(alice.call('fs.write', { path: 'excl-dangling', exclusive: true }, text('x')), { code: 'EEXIST' });
    await t.rejects(alice.call('fs.write', { path: 'excl-link', exclusive: true }, text('x')), { code: 'EEXIST' });
    t.equal(await treeSnapshot(root, '/home/alice'), before);
  });

  t.test('append adds to the end and creates a missing file', async (t) => {
    await alice.call('fs.write', { path: 'app.md', append: true }, text('a'));
    await alice.call('fs.write', { path: 'app.md', append: true }, text('b'));
    const r = await alice.call('fs.write', { path: 'app.md', append: true }, text('c'));
    t.equal(r.size, 3);
    t.equal(await readText(alice, 'app.md'), 'abc');
  });

  t.test('write with an explicit mode; writing a directory is EISDIR', async (t) => {
    await alice.call('fs.write', { path: 'modes/m.md', mode: '0600' }, text('x'));
    t.equal((await alice.call('fs.stat', { path: 'modes/m.md' })).mode, '0600');
    await alice.call('fs.write', { path: 'modes/n.md', mode: 0o640 }, text('x'));
    t.equal((await alice.call('fs.stat', { path: 'modes/n.md' })).mode, '0640');
    await t.rejects(alice.call('fs.write', { path: 'modes' }, text('x')), { code: 'EISDIR' });
    t.equal((await alice.call('fs.stat', { path: 'modes' })).kind, 'directory');
  });

  t.test('write through a symlink changes the target and keeps the link', async (t) => {
    await alice.call('fs.write', { path: 'sl/target.md' }, text('before'));
    await alice.call('fs.symlink', { target: 'target.md', path: 'sl/rel-link' });
    await alice.call('fs.symlink', { target: '/home/alice/sl/target.md', path: 'sl/abs-link' });
    const w = await alice.call('fs.write', { path: 'sl/rel-link' }, text('through relative'));
    t.equal(w.path, '/home/alice/sl/target.md', 'the reply names the file actually written');
    t.equal(await readText(alice, 'sl/target.md'), 'through relative');
    await alice.call('fs.write', { path: 'sl/abs-link' }, text('through absolute'));
    t.equal(await readText(alice, 'sl/target.md'), 'through absolute');
    t.equal((await alice.call('fs.stat', { path: 'sl/rel-link', nofollow: true })).kind, 'symlink');
    // a dangling link: writing creates its target, like open(O_CREAT)
    await alice.call('fs.symlink', { target: 'created-by-link.md', path: 'sl/dangling' });
    await alice.call('fs.write', { path: 'sl/dangling' }, text('new'));
    t.equal(await readText(alice, 'sl/created-by-link.md'), 'new');
    // a link to a directory in the middle of a path
    await alice.call('fs.symlink', { target: '/home/alice/deep/a', path: 'sl/dirlink' });
    await alice.call('fs.write', { path: 'sl/dirlink/via.md' }, text('via'));
    t.equal(await readText(alice, 'deep/a/via.md'), 'via');
    t.same(
      (await alice.call('fs.list', { path: 'sl/dirlink' })).entries.map((e) => e.name),
      ['b', 'via.md'],
    );
  });

  t.test('stat follows symlinks, lstat (nofollow) does not; readlink', async (t) => {
    const st = await alice.call('fs.stat', { path: 'sl/rel-link' });
    t.equal(st.kind, 'file');
    t.equal(st.size, Buffer.byteLength('through absolute'));
    const ls = await alice.call('fs.stat', { path: 'sl/rel-link', nofollow: true });
    t.equal(ls.kind, 'symlink');
    t.equal(ls.target, 'target.md');
    t.equal(ls.mode, '0777');
    t.equal(ls.size, Buffer.byteLength('target.md'));
    t.same(await alice.call('fs.readlink', { path: 'sl/abs-link' }), {
      path: '/home/alice/sl/abs-link',
      target: '/home/alice/sl/target.md',
    });
    await t.rejects(alice.call('fs.readlink', { path: 'sl/target.md' }), { code: 'EINVAL' });
    await t.rejects(alice.call('fs.symlink', { target: 'x', path: 'sl/target.md' }), { code: 'EEXIST' });
    await t.rejects(alice.call('fs.symlink', { target: '', path: 'sl/empty-target' }), { code: 'EINVAL' });
    await alice.call('fs.symlink', { target: 'nowhere', path: 'sl/broken' });
    await t.rejects(alice.call('fs.stat', { path: 'sl/broken' }), { code: 'ENOENT' });
    t.equal((await alice.call('fs.stat', { path: 'sl/broken', nofollow: true })).kind, 'symlink');
  });

  t.test('list: name order, entry fields, ENOTDIR', async (t) => {
    for (const n of ['b.md', 'a.md', 'C.md', '_x', '10', '9', 'é.md'])
      await alice.call('fs.write', { path: `order/${n}` }, text(n));
    await alice.call('fs.mkdir', { path: 'order/dir' });
    await alice.call('fs.symlink', { target: 'a.md', path: 'order/link' });
    const l = await alice.call('fs.list', { path: 'order' });
    t.equal(l.path, '/home/alice/order');
    t.same(
      l.entries.map((e) => e.name),
      ['10', '9', 'C.md', '_x', 'a.md', 'b.md', 'dir', 'link', 'é.md'],
    );
    const dir = l.entries.find((e) => e.name === 'dir')!;
    t.match(dir, { is_dir: true, is_symlink: false, mode: '0755', uid: aliceUser.uid });
    const link = l.entries.find((e) => e.name === 'link')!;
    t.match(link, { is_dir: false, is_symlink: true });
    const a = l.entries.find((e) => e.name === 'a.md')!;
    t.match(a, { is_dir: false, is_symlink: false, size: 4, mode: '0644', gid: aliceUser.gid });
    t.type(a.modified, 'number');
    await t.rejects(alice.call('fs.list', { path: 'order/a.md' }), { code: 'ENOTDIR' });
    await t.rejects(alice.call('fs.list', { path: 'order/none' }), { code: 'ENOENT' });
    // the empty path lists the caller's home
    t.equal((await alice.call('fs.list', {})).path, '/home/alice');
  });

  t.test('truncate shrinks and extends with zeros', async (t) => {
    await alice.call('fs.write', { path: 'tr.md' }, text('0123456789'));
    t.same(await alice.call('fs.truncate', { path: 'tr.md', size: 4 }), { path: '/home/alice/tr.md', size: 4 });
    t.equal(await readText(alice, 'tr.md'), '0123');
    await alice.call('fs.truncate', { path: 'tr.md', size: 6 });
    t.ok((await alice.request('fs.read', { path: 'tr.md' })).data.equals(Buffer.from([0x30, 0x31, 0x32, 0x33, 0, 0])));
    await alice.call('fs.truncate', { path: 'tr.md', size: 0 });
    t.equal((await alice.call('fs.stat', { path: 'tr.md' })).size, 0);
    await t.rejects(alice.call('fs.truncate', { path: 'w', size: 0 }), { code: 'EISDIR' });
    await t.rejects(alice.call('fs.truncate', { path: 'tr-missing.md', size: 0 }), { code: 'ENOENT' });
  });

  t.test('mkdir with and without parents', async (t) => {
    t.same(await alice.call('fs.mkdir', { path: 'mk' }), { path: '/home/alice/mk', created: true });
    await t.rejects(alice.call('fs.mkdir', { path: 'mk' }), { code: 'EEXIST' });
    await t.rejects(alice.call('fs.mkdir', { path: 'mk/x/y' }), { code: 'ENOENT' });
    await t.rejects(alice.call('fs.stat', { path: 'mk/x' }), { code: 'ENOENT' });
    t.same(await alice.call('fs.mkdir', { path: 'mk/x/y', parents: true }), {
      path: '/home/alice/mk/x/y',
      created: true,
    });
    t.same(await alice.call('fs.mkdir', { path: 'mk/x/y', parents: true }), {
      path: '/home/alice/mk/x/y',
      created: false,
    });
    await alice.call('fs.mkdir', { path: 'mk/m700', mode: '0700' });
    t.equal((await alice.call('fs.stat', { path: 'mk/m700' })).mode, '0700');
    await alice.call('fs.write', { path: 'mk/file' }, text('f'));
    await t.rejects(alice.call('fs.mkdir', { path: 'mk/file' }), { code: 'EEXIST' });
    await t.rejects(alice.call('fs.mkdir', { path: 'mk/file', parents: true }), { code: 'EEXIST' });
    await t.rejects(alice.call('fs.mkdir', { path: 'mk/file/sub', parents: true }), { code: 'ENOTDIR' });
  });

  t.test('unlink removes files and links, not directories', async (t) => {
    await alice.call('fs.write', { path: 'ul/f.md' }, text('f'));
    await alice.call('fs.symlink', { target: 'f.md', path: 'ul/l' });
    t.same(await alice.call('fs.unlink', { path: 'ul/l' }), { path: '/home/alice/ul/l' });
    t.equal(await readText(alice, 'ul/f.md'), 'f', 'unlinking a link leaves its target');
    await alice.call('fs.unlink', { path: 'ul/f.md' });
    await t.rejects(alice.call('fs.stat', { path: 'ul/f.md' }), { code: 'ENOENT' });
    await t.rejects(alice.call('fs.unlink', { path: 'ul/f.md' }), { code: 'ENOENT' });
    await t.rejects(alice.call('fs.unlink', { path: 'ul' }), { code: 'EISDIR' });
    t.equal((await alice.call('fs.stat', { path: 'ul' })).kind, 'directory');
  });

  t.test('rmdir removes only empty directories', async (t) => {
    await alice.call('fs.write', { path: 'rd/full/f.md' }, text('f'));
    await alice.call('fs.mkdir', { path: 'rd/empty' });
    await t.rejects(alice.call('fs.rmdir', { path: 'rd/full' }), { code: 'ENOTEMPTY' });
    await t.rejects(alice.call('fs.rmdir', { path: 'rd/full/f.md' }), { code: 'ENOTDIR' });
    await t.rejects(alice.call('fs.rmdir', { path: 'rd/none' }), { code: 'ENOENT' });
    t.same(await alice.call('fs.rmdir', { path: 'rd/empty' }), { path: '/home/alice/rd/empty' });
    t.same(
      (await alice.call('fs.list', { path: 'rd' })).entries.map((e) => e.name),
      ['full'],
    );
  });

  t.test('delete: a file, an empty directory, a subtree with recursive', async (t) => {
    await alice.call('fs.write', { path: 'del/a/b/c.md' }, text('c'));
    await alice.call('fs.write', { path: 'del/a/d.md' }, text('d'));
    await alice.call('fs.symlink', { target: '/tmp', path: 'del/a/tmplink' });
    await alice.call('fs.mkdir', { path: 'del/e' });
    await alice.call('fs.write', { path: 'del/f.md' }, text('f'));
    t.same(await alice.call('fs.delete', { path: 'del/f.md' }), { path: '/home/alice/del/f.md', deleted: 1 });
    t.same(await alice.call('fs.delete', { path: 'del/e' }), { path: '/home/alice/del/e', deleted: 1 });
    const before = await treeSnapshot(root, '/home/alice/del');
    await t.rejects(alice.call('fs.delete', { path: 'del/a' }), { code: 'ENOTEMPTY' });
    t.equal(await treeSnapshot(root, '/home/alice/del'), before);
    // a, a/b, a/b/c.md, a/d.md, a/tmplink
    t.same(await alice.call('fs.delete', { path: 'del/a', recursive: true }), {
      path: '/home/alice/del/a',
      deleted: 5,
    });
    t.same((await alice.call('fs.list', { path: 'del' })).entries, []);
    t.equal((await root.call('fs.stat', { path: '/tmp' })).kind, 'directory', 'a link inside is removed, not followed');
    await t.rejects(alice.call('fs.delete', { path: 'del/a', recursive: true }), { code: 'ENOENT' });
    // deleting a link to a directory, even recursively, removes the link only
    await alice.call('fs.write', { path: 'del/target/keep.md' }, text('k'));
    await alice.call('fs.symlink', { target: 'target', path: 'del/dirlink' });
    t.same(await alice.call('fs.delete', { path: 'del/dirlink', recursive: true }), {
      path: '/home/alice/del/dirlink',
      deleted: 1,
    });
    t.equal(await readText(alice, 'del/target/keep.md'), 'k');
  });

  t.test('copy: a file, a directory tree, refusals', async (t) => {
    await alice.call('fs.write', { path: 'cp/src/a.md' }, text('A'));
    await alice.call('fs.write', { path: 'cp/src/sub/b.md', mode: '0600' }, text('B'));
    await alice.call('fs.symlink', { target: 'a.md', path: 'cp/src/link' });
    const c1 = await alice.call('fs.copy', { src: 'cp/src/a.md', dst: 'cp/a-copy.md' });
    t.same(c1, { src: '/home/alice/cp/src/a.md', dst: '/home/alice/cp/a-copy.md', copied: 1 });
    t.equal(await readText(alice, 'cp/a-copy.md'), 'A');
    const s1 = await alice.call('fs.stat', { path: 'cp/src/a.md' });
    const s2 = await alice.call('fs.stat', { path: 'cp/a-copy.md' });
    t.not(s1.inode_id, s2.inode_id, 'a copy is a new inode');
    t.equal(s1.etag, s2.etag, 'with the same content');
    // the copy is independent of its source
    await alice.call('fs.write', { path: 'cp/a-copy.md' }, text('changed'));
    t.equal(await readText(alice, 'cp/src/a.md'), 'A');

    await t.rejects(alice.call('fs.copy', { src: 'cp/src', dst: 'cp/norec' }), { code: 'EISDIR' });
    await t.rejects(alice.call('fs.stat', { path: 'cp/norec' }), { code: 'ENOENT' });

    const c2 = await alice.call('fs.copy', { src: 'cp/src', dst: 'cp/into/dst', recursive: true });
    t.equal(c2.copied, 5); // src, a.md, link, sub, sub/b.md
    t.same(
      (await alice.call('fs.list', { path: 'cp/into/dst' })).entries.map((e) => e.name),
      ['a.md', 'link', 'sub'],
    );
    t.equal(await readText(alice, 'cp/into/dst/sub/b.md'), 'B');
    t.equal((await alice.call('fs.stat', { path: 'cp/into/dst/sub/b.md' })).mode, '0600', 'permission bits are copied');
    t.equal(
      (await alice.call('fs.readlink', { path: 'cp/into/dst/link' })).target,
      'a.md',
      'links are copied as links',
    );

    // file over file: replaced by default, refused with overwrite:false
    await alice.call('fs.copy', { src: 'cp/src/a.md', dst: 'cp/a-copy.md' });
    t.equal(await readText(alice, 'cp/a-copy.md'), 'A');
    await alice.call('fs.write', { path: 'cp/a-copy.md' }, text('keep'));
    await t.rejects(alice.call('fs.copy', { src: 'cp/src/a.md', dst: 'cp/a-copy.md', overwrite: false }), {
      code: 'EEXIST',
    });
    t.equal(await readText(alice, 'cp/a-copy.md'), 'keep');
    await t.rejects(alice.call('fs.copy', { src: 'cp/missing', dst: 'cp/x' }), { code: 'ENOENT' });
  });

  t.test('copy of a directory into itself is EINVAL and creates nothing', async (t) => {
    const before = await treeSnapshot(root, '/home/alice/cp');
    await t.rejects(alice.call('fs.copy', { src: 'cp/src', dst: 'cp/src/inner', recursive: true }), { code: 'EINVAL' });
    await t.rejects(alice.call('fs.copy', { src: 'cp/src', dst: 'cp/src/new/deeper/x', recursive: true }), {
      code: 'EINVAL',
    });
    await t.rejects(alice.call('fs.copy', { src: 'cp/src', dst: 'cp/src', recursive: true }), { code: 'EINVAL' });
    t.equal(await treeSnapshot(root, '/home/alice/cp'), before);
  });

  t.test('move renames files and directories', async (t) => {
    await alice.call('fs.write', { path: 'mv/f.md' }, text('F'));
    const ino = (await alice.call('fs.stat', { path: 'mv/f.md' })).inode_id;
    t.same(await alice.call('fs.move', { src: 'mv/f.md', dst: 'mv/g.md' }), {
      src: '/home/alice/mv/f.md',
      dst: '/home/alice/mv/g.md',
    });
    await t.rejects(alice.call('fs.stat', { path: 'mv/f.md' }), { code: 'ENOENT' });
    const g = await alice.call('fs.stat', { path: 'mv/g.md' });
    t.equal(g.inode_id, ino, 'rename keeps the inode');
    await alice.call('fs.write', { path: 'mv/dir/in/x.md' }, text('X'));
    await alice.call('fs.move', { src: 'mv/dir', dst: 'mv/moved/dir2' });
    t.equal(await readText(alice, 'mv/moved/dir2/in/x.md'), 'X', 'children follow, missing parents of dst are created');
    await t.rejects(alice.call('fs.stat', { path: 'mv/dir' }), { code: 'ENOENT' });
    // same path: a no-op
    await alice.call('fs.move', { src: 'mv/g.md', dst: 'mv/g.md' });
    t.equal(await readText(alice, 'mv/g.md'), 'F');
    await t.rejects(alice.call('fs.move', { src: 'mv/missing', dst: 'mv/x' }), { code: 'ENOENT' });
    // moving a symlink moves the link, not its target
    await alice.call('fs.symlink', { target: '/home/alice/mv/g.md', path: 'mv/ln' });
    await alice.call('fs.move', { src: 'mv/ln', dst: 'mv/ln2' });
    t.equal((await alice.call('fs.stat', { path: 'mv/ln2', nofollow: true })).kind, 'symlink');
    t.equal(await readText(alice, 'mv/g.md'), 'F');
  });

  t.test('move over existing entries: rename(2) rules', async (t) => {
    await alice.call('fs.write', { path: 'mo/src.md' }, text('SRC'));
    await alice.call('fs.write', { path: 'mo/dst.md' }, text('DST'));
    await alice.call('fs.move', { src: 'mo/src.md', dst: 'mo/dst.md' });
    t.equal(await readText(alice, 'mo/dst.md'), 'SRC', 'a file replaces a file');
    await t.rejects(alice.call('fs.stat', { path: 'mo/src.md' }), { code: 'ENOENT' });

    await alice.call('fs.write', { path: 'mo/d1/a.md' }, text('a'));
    await alice.call('fs.mkdir', { path: 'mo/empty' });
    await alice.call('fs.move', { src: 'mo/d1', dst: 'mo/empty' });
    t.equal(await readText(alice, 'mo/empty/a.md'), 'a', 'a directory replaces an empty directory');

    await alice.call('fs.write', { path: 'mo/d2/b.md' }, text('b'));
    const before = await treeSnapshot(root, '/home/alice/mo');
    await t.rejects(alice.call('fs.move', { src: 'mo/d2', dst: 'mo/empty' }), { code: 'ENOTEMPTY' });
    await t.rejects(alice.call('fs.move', { src: 'mo/dst.md', dst: 'mo/d2' }), { code: 'EISDIR' });
    await t.rejects(alice.call('fs.move', { src: 'mo/d2', dst: 'mo/dst.md' }), { code: 'ENOTDIR' });
    await alice.call('fs.write', { path: 'mo/other.md' }, text('o'));
    const before2 = await treeSnapshot(root, '/home/alice/mo');
    await t.rejects(alice.call('fs.move', { src: 'mo/other.md', dst: 'mo/dst.md', overwrite: false }), {
      code: 'EEXIST',
    });
    t.equal(await treeSnapshot(root, '/home/alice/mo'), before2);
    t.not(before, before2);
  });

  t.test('moving a directory into itself is EINVAL and creates nothing', async (t) => {
    await alice.call('fs.write', { path: 'self/a/b/c.md' }, text('c'));
    const before = await treeSnapshot(root, '/home/alice/self');
    await t.rejects(alice.call('fs.move', { src: 'self/a', dst: 'self/a/b/a' }), { code: 'EINVAL' });
    await t.rejects(alice.call('fs.move', { src: 'self/a', dst: 'self/a/new/deeper' }), { code: 'EINVAL' });
    await t.rejects(alice.call('fs.move', { src: 'self/a', dst: 'self/a/b' }), { code: 'EINVAL' });
    t.equal(await treeSnapshot(root, '/home/alice/self'), before);
  });

  t.test('chmod: octal strings and numbers, special bits, through symlinks', async (t) => {
    await alice.call('fs.write', { path: 'cm/f.md' }, text('f'));
    t.same(await alice.call('fs.chmod', { path: 'cm/f.md', mode: '600' }), {
      path: '/home/alice/cm/f.md',
      mode: '0600',
    });
    t.equal((await alice.call('fs.chmod', { path: 'cm/f.md', mode: 0o640 })).mode, '0640');
    t.equal((await alice.call('fs.stat', { path: 'cm/f.md' })).mode, '0640');
    await alice.call('fs.mkdir', { path: 'cm/d' });
    t.equal((await alice.call('fs.chmod', { path: 'cm/d', mode: '1777' })).mode, '1777');
    t.equal((await alice.call('fs.chmod', { path: 'cm/d', mode: '2770' })).mode, '2770');
    await alice.call('fs.symlink', { target: 'f.md', path: 'cm/l' });
    await alice.call('fs.chmod', { path: 'cm/l', mode: '0604' });
    t.equal((await alice.call('fs.stat', { path: 'cm/f.md' })).mode, '0604', 'chmod follows the link');
    t.equal((await alice.call('fs.stat', { path: 'cm/l', nofollow: true })).mode, '0777');
    const before = (await alice.call('fs.stat', { path: 'cm/f.md' })).ctime_ns;
    await alice.call('fs.chmod', { path: 'cm/f.md', mode: '0644' });
    t.ok(BigInt((await alice.call('fs.stat', { path: 'cm/f.md' })).ctime_ns) > BigInt(before), 'chmod updates ctime');
  });

  t.test('chmod by a writer who is not the owner: only taking the setuid and setgid bits off', async (t) => {
    const { bob } = p;
    await root.call('fs.write', { path: '/tmp/sg.md', mode: '0666' }, text('f'));
    await root.call('fs.chmod', { path: '/tmp/sg.md', mode: '6777' });
    t.equal((await bob.call('fs.chmod', { path: '/tmp/sg.md', mode: '4777' })).mode, '4777', 'setgid off');
    t.equal((await bob.call('fs.chmod', { path: '/tmp/sg.md', mode: '0777' })).mode, '0777', 'setuid off');
    await root.call('fs.chmod', { path: '/tmp/sg.md', mode: '6777' });
    for (const mode of ['0776', '6776', '2776', '7777'])
      await t.rejects(bob.call('fs.chmod', { path: '/tmp/sg.md', mode }), { code: 'EPERM' }, `not to ${mode}`);
    await root.call('fs.chmod', { path: '/tmp/sg.md', mode: '6755' });
    await t.rejects(
      bob.call('fs.chmod', { path: '/tmp/sg.md', mode: '0755' }),
      { code: 'EPERM' },
      'and only who may write it',
    );
    // The owner still may, write permission or not (a chown by the owner drops them so).
    await alice.call('fs.write', { path: 'sg/own.md', mode: '0644' }, text('f'));
    await alice.call('fs.chmod', { path: 'sg/own.md', mode: '6555' });
    t.equal((await alice.call('fs.chmod', { path: 'sg/own.md', mode: '0555' })).mode, '0555', 'the owner without w');
    await root.call('fs.mkdir', { path: '/tmp/sgd', mode: '2777' });
    await t.rejects(bob.call('fs.chmod', { path: '/tmp/sgd', mode: '0777' }), { code: 'EPERM' }, 'never a directory');
    t.equal((await root.call('fs.stat', { path: '/tmp/sg.md' })).mode, '6755');
    t.equal((await root.call('fs.stat', { path: '/tmp/sgd' })).mode, '2777');
  });

  t.test('chown by root: owner and group by name or id', async (t) => {
    const users = (await root.call('admin.userList', {})).users;
    const bob = users.find((u) => u.name === 'bob')!;
    const team = (await root.call('admin.groupList', {})).groups.find((g) => g.name === 'team')!;
    await alice.call('fs.write', { path: 'co/f.md' }, text('f'));
    t.same(await root.call('fs.chown', { path: '/home/alice/co/f.md', owner: 'bob' }), {
      path: '/home/alice/co/f.md',
      uid: bob.uid,
      gid: aliceUser.gid,
    });
    t.equal((await root.call('fs.chown', { path: '/home/alice/co/f.md', group: 'team' })).gid, team.gid);
    const r = await root.call('fs.chown', {
      path: '/home/alice/co/f.md',
      owner: aliceUser.uid,
      group: String(aliceUser.gid),
    });
    t.equal(r.uid, aliceUser.uid);
    t.equal(r.gid, aliceUser.gid);
    const s = await alice.call('fs.stat', { path: 'co/f.md' });
    t.equal(s.uid, aliceUser.uid);
    // nofollow changes the link itself
    await alice.call('fs.symlink', { target: 'f.md', path: 'co/l' });
    await root.call('fs.chown', { path: '/home/alice/co/l', owner: 'bob', nofollow: true });
    t.equal((await root.call('fs.stat', { path: '/home/alice/co/l', nofollow: true })).uid, bob.uid);
    t.equal((await root.call('fs.stat', { path: '/home/alice/co/f.md' })).uid, aliceUser.uid);
  });

  t.test('chown to numeric ids: root to any id, known or not; others only as before', async (t) => {
    await alice.call('fs.write', { path: 'co/num.md' }, text('n'));
    const r = await root.call('fs.chown', { path: '/home/alice/co/num.md', owner: 54321, group: '65432' });
    t.same([r.uid, r.gid], [54321, 65432], 'an id no user or group has (tar x, rsync -a as root)');
    await root.call('fs.chown', { path: '/home/alice/co/num.md', owner: aliceUser.uid, group: aliceUser.gid });
    await t.rejects(
      alice.call('fs.chown', { path: 'co/num.md', owner: 54321 }),
      { code: 'EPERM' },
      'only root gives a file away',
    );
    await t.rejects(
      alice.call('fs.chown', { path: 'co/num.md', group: 65432 }),
      { code: 'EPERM' },
      'a group the owner is not in',
    );
    await t.rejects(
      root.call('fs.chown', { path: '/home/alice/co/num.md', owner: 4294967295 }),
      { code: 'EINVAL' },
      '2^32 - 1 is no id',
    );
  });

  t.test("utimens nofollow: a symlink's own times, never its target's", async (t) => {
    await alice.call('fs.write', { path: 'uh/target.md', parents: true }, text('t'));
    await alice.call('fs.symlink', { target: 'target.md', path: 'uh/link' });
    const before = (await alice.call('fs.stat', { path: 'uh/target.md' })).mtime_ns;
    await alice.call('fs.utimens', {
      path: 'uh/link',
      atime: '1000000000000000007',
      mtime: '1100000000000000009',
      nofollow: true,
    });
    const link = await alice.call('fs.stat', { path: 'uh/link', nofollow: true });
    t.same([link.atime_ns, link.mtime_ns], ['1000000000000000007', '1100000000000000009'], 'the link has the times');
    t.equal((await alice.call('fs.stat', { path: 'uh/target.md' })).mtime_ns, before, 'the target kept its own');
  });

  t.test('a directory counts 2 links plus one per subdirectory', async (t) => {
    await alice.call('fs.mkdir', { path: 'nl/a/deep', parents: true });
    await alice.call('fs.mkdir', { path: 'nl/b' });
    await alice.call('fs.write', { path: 'nl/f.md' }, text('f'));
    t.equal((await alice.call('fs.stat', { path: 'nl' })).nlink, 4, 'nl: a and b');
    t.equal((await alice.call('fs.stat', { path: 'nl/b' })).nlink, 2, 'an empty directory');
    await alice.call('fs.move', { src: 'nl/a', dst: 'nl/b/a' });
    t.equal((await alice.call('fs.stat', { path: 'nl' })).nlink, 3, 'after a subdirectory moved out');
    t.equal((await alice.call('fs.stat', { path: 'nl/b' })).nlink, 3, 'and into b');
    await alice.call('fs.rmdir', { path: 'nl/b/a/deep' });
    t.equal((await alice.call('fs.stat', { path: 'nl/b/a' })).nlink, 2, 'after rmdir');
    t.equal((await alice.call('fs.stat', { path: 'nl/f.md' })).nlink, 1, 'a file has one');
  });

  t.test('utimens: explicit nanoseconds, milliseconds, now', async (t) => {
    await alice.call('fs.write', { path: 'ut.md' }, text('u'));
    await alice.call('fs.utimens', { path: 'ut.md', atime: '1000000000123456789', mtime: '1500000000987654321' });
    const s = await alice.call('fs.stat', { path: 'ut.md' });
    t.equal(s.mtime_ns, '1500000000987654321');
    t.equal(s.atime_ns, '1000000000123456789');
    t.equal(s.modified, 1500000000);
    t.equal(s.accessed, 1000000000);
    await alice.call('fs.utimens', { path: 'ut.md', mtime: 1600000000000 });
    t.equal((await alice.call('fs.stat', { path: 'ut.md' })).mtime_ns, '1600000000000000000');
    await alice.call('fs.utimens', { path: 'ut.md' });
    const now = (await alice.call('fs.stat', { path: 'ut.md' })).modified;
    t.ok(Math.abs(now - Date.now() / 1000) < 60, 'omitted times mean now');
    await t.rejects(alice.call('fs.utimens', { path: 'ut.md', mtime: 'yesterday' }), { code: 'EINVAL' });
  });

  t.test("write: a new file's times with its exclusive create, as utimens would set them", async (t) => {
    const times = { atime: '1000000000123456789', mtime: '1500000000987654321' };
    const w = await alice.call('fs.write', { path: 'wtimes/a.md', exclusive: true, stat: true, ...times }, text('a'));
    t.same([w.stat?.atime_ns, w.stat?.mtime_ns], [times.atime, times.mtime], 'answered with them');
    const s = await alice.call('fs.stat', { path: 'wtimes/a.md' });
    t.same([s.atime_ns, s.mtime_ns, s.size], [times.atime, times.mtime, 1], 'and kept');
    // Only for a create: a write over a file keeps its own rules (the times of a write are now).
    await t.rejects(alice.call('fs.write', { path: 'wtimes/a.md', ...times }, text('b')), { code: 'EINVAL' });
    await t.rejects(alice.call('fs.write', { path: 'wtimes/b.md', exclusive: true, mtime: times.mtime }, text('b')), {
      code: 'EINVAL',
    });
    await t.rejects(
      alice.call('fs.write', { path: 'wtimes/b.md', exclusive: true, ...times, mtime: 'later' }, text('b')),
      {
        code: 'EINVAL',
        message: /invalid mtime .*wtimes\/b\.md/,
      },
    );
    t.equal((await alice.call('fs.read', { path: 'wtimes/a.md' })).etag, objectIdOf('a'), 'nothing was written');
    await t.rejects(alice.call('fs.stat', { path: 'wtimes/b.md' }), { code: 'ENOENT' });
    // Explicit times need the new file's owner: an agent acting for alice creates a file of alice's.
    await root.call('fs.mkdir', { path: '/tmp/wtimes', mode: '0777' });
    const forAlice = p.agentForAlice;
    await forAlice.call('fs.write', { path: '/tmp/wtimes/plain.md', exclusive: true }, text('p'));
    const plainTimes = await forAlice.call('fs.utimens', { path: '/tmp/wtimes/plain.md', ...times }).then(
      () => 'ok',
      (err: { code?: string }) => err.code,
    );
    const withTimes = await forAlice
      .call('fs.write', { path: '/tmp/wtimes/timed.md', exclusive: true, ...times }, text('t'))
      .then(
        () => 'ok',
        (err: { code?: string }) => err.code,
      );
    t.equal(withTimes, plainTimes, 'the same answer as a create and then utimens');
    if (withTimes !== 'ok')
      await t.rejects(
        root.call('fs.stat', { path: '/tmp/wtimes/timed.md' }),
        { code: 'ENOENT' },
        'refused: not created',
      );
    else t.equal((await root.call('fs.stat', { path: '/tmp/wtimes/timed.md' })).mtime_ns, times.mtime);
  });

  t.test('mkdir with stat answers the new directory as fs.stat does', async (t) => {
    const r = await alice.call('fs.mkdir', { path: 'mkst', mode: '0750', stat: true });
    t.equal(r.created, true);
    const { path: _path, ...stat } = await alice.call('fs.stat', { path: 'mkst' });
    t.same(r.stat, stat);
    t.equal(r.stat?.mode, '0750');
  });

  t.test('access: existence and r/w/x bits', async (t) => {
    await alice.call('fs.write', { path: 'ac.md', mode: '0444' }, text('a'));
    t.same(await alice.call('fs.access', { path: 'ac.md', mode: 0 }), { path: '/home/alice/ac.md' });
    await alice.call('fs.access', { path: 'ac.md', mode: 4 });
    await t.rejects(alice.call('fs.access', { path: 'ac.md', mode: 2 }), { code: 'EACCES' });
    await t.rejects(alice.call('fs.access', { path: 'ac.md', mode: 1 }), { code: 'EACCES' });
    await t.rejects(alice.call('fs.access', { path: 'ac-missing.md', mode: 0 }), { code: 'ENOENT' });
    await alice.call('fs.access', { path: '', mode: 7 });
    await root.call('fs.access', { path: '/home/alice/ac.md', mode: 6 });
  });

  t.test('statfs', async (t) => {
    const s = await alice.call('fs.statfs', {});
    t.equal(s.namemax, 255);
    t.ok(s.bsize > 0 && s.blocks > 0 && s.bfree <= s.blocks && s.bavail <= s.blocks);
    t.ok(s.files > s.ffree, 'some inodes are in use');
    const before = s.ffree;
    await alice.call('fs.write', { path: 'statfs/new.md' }, text('x'));
    t.equal((await alice.call('fs.statfs', {})).ffree, before - 2, 'a new directory and file use two inodes');
  });

  t.test('sha256 helper sanity', async (t) => {
    t.equal(sha256('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

t.test('SERVICE_MAX_FILE_SIZE: EFBIG for writes, appends and truncates past the limit', async (t) => {
  const d = await spawnDaemon(t, { SERVICE_MAX_FILE_SIZE: '100' });
  const root = d.client.as({});
  const ok = await root.call('fs.write', { path: '/tmp/limit.md' }, { data: Buffer.alloc(100, 0x61) });
  t.equal(ok.size, 100);
  await t.rejects(root.call('fs.write', { path: '/tmp/big.md' }, { data: Buffer.alloc(101, 0x61) }), { code: 'EFBIG' });
  await t.rejects(root.call('fs.stat', { path: '/tmp/big.md' }), { code: 'ENOENT' });
  await t.rejects(root.call('fs.write', { path: '/tmp/limit.md', append: true }, text('b')), { code: 'EFBIG' });
  await t.rejects(root.call('fs.write', { path: '/tmp/newdir/big.md' }, { data: Buffer.alloc(101) }), {
    code: 'EFBIG',
  });
  await t.rejects(root.call('fs.stat', { path: '/tmp/newdir' }), { code: 'ENOENT' }, 'no parent was created');
  await root.call('fs.write', { path: '/tmp/small.md' }, text('s'));
  await t.rejects(root.call('fs.truncate', { path: '/tmp/small.md', size: 101 }), { code: 'EFBIG' });
  t.equal((await root.call('fs.stat', { path: '/tmp/limit.md' })).size, 100);
  t.equal((await root.call('fs.stat', { path: '/tmp/small.md' })).size, 1);
});
