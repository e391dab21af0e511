/**
 * The content-addressed store through the daemon: identical content is stored once, and blobs
 * that neither the working tree nor any commit reaches are dropped.
 */
import t from 'tap';
import { readText, text } from '../helpers/daemon.js';
import { objects, quickCore } from './lib.js';

t.test('10,000 identical files add exactly one blob', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.mkdir', { path: '/srv/dedup', parents: true });
  const before = await objects(r);
  const body = Buffer.from('# the same note\n\nidentical in every file\n');
  // one pipelined burst on one connection
  const writes = await Promise.all(
    Array.from({ length: 10000 }, (_, i) => r.call('fs.write', { path: `/srv/dedup/f${i}.md` }, { data: body })),
  );
  t.equal(new Set(writes.map((w) => w.etag)).size, 1, 'every file has the same content id');
  t.equal((await r.call('fs.list', { path: '/srv/dedup' })).entries.length, 10000);
  t.equal(await objects(r), before + 1, 'one new object for 10,000 files');

  // a distinct content is a distinct object, and so is a byte-level difference
  await r.call('fs.write', { path: '/srv/dedup/other.md' }, text('# the same note\n\nidentical in every file \n'));
  t.equal(await objects(r), before + 2);

  // committing shares the blob with history: no blob is copied
  const c = await r.call('vcs.commit', { message: 'dedup' });
  const afterCommit = await objects(r);
  const log = await r.call('vcs.log', {});
  t.equal(log.commits[0]!.hash, c.hash);
  const fsck = await r.call('sys.fsck', {});
  t.ok(fsck.ok, `fsck: ${fsck.problems.join('; ')}`);
  // deleting 9,999 of the copies keeps the one blob the remaining file and the commit share
  await r.call('fs.delete', { path: '/srv/dedup', recursive: true });
  await r.call('fs.write', { path: '/srv/dedup/f0.md' }, { data: body });
  await r.call('sys.gc', {});
  t.equal(await objects(r), afterCommit, 'no object gained or lost: history still holds both blobs');
  t.equal((await r.request('vcs.cat', { rev: c.hash, path: '/srv/dedup/f9999.md' })).data.toString(), body.toString());
});

t.test('gc removes blobs reachable from neither the working tree nor a commit', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/g/keep.md' }, text('keep\n'));
  await r.call('vcs.commit', { message: 'base' });
  const o0 = await objects(r);

  await r.call('fs.write', { path: '/srv/g/note.md' }, text('A: never committed\n'));
  t.equal(await objects(r), o0 + 1, 'a new content adds one blob');
  await r.call('fs.write', { path: '/srv/g/note.md' }, text('B: committed\n'));
  await r.call('sys.gc', {});
  t.equal(await objects(r), o0 + 1, 'overwriting before a commit leaves no trace of A');

  const c1 = await r.call('vcs.commit', { message: 'B' });
  const o1 = await objects(r);
  t.ok(o1 > o0 + 1, 'the commit added its trees and itself');

  await r.call('fs.write', { path: '/srv/g/note.md' }, text('C: never committed\n'));
  await r.call('fs.write', { path: '/srv/g/note.md' }, text('D: working tree\n'));
  await r.call('sys.gc', {});
  t.equal(await objects(r), o1 + 1, 'B stays (a commit reaches it), C is gone, D is new');
  t.equal((await r.request('vcs.cat', { rev: c1.hash, path: '/srv/g/note.md' })).data.toString(), 'B: committed\n');
  t.equal(await readText(r, '/srv/g/note.md'), 'D: working tree\n');

  // deleting the file: D is reachable from nothing; B still from the commit
  await r.call('fs.unlink', { path: '/srv/g/note.md' });
  await r.call('sys.gc', {});
  t.equal(await objects(r), o1, 'D is gone, B stays');
  const fsck = await r.call('sys.fsck', {});
  t.ok(fsck.ok, `fsck after gc: ${fsck.problems.join('; ')}`);

  // status and diff compute trees of the working tree; they are not objects until committed
  await r.call('fs.write', { path: '/srv/g/e.md' }, text('E\n'));
  const o2 = await objects(r);
  await r.call('vcs.status', {});
  await r.call('vcs.diff', {});
  await r.call('sys.gc', {});
  t.equal(await objects(r), o2, 'looking at the working tree stores nothing');
  await t.rejects(d.client.as({ authorization: 'User nobody' }).call('sys.gc', {}), { code: 'EAUTH' });
});
