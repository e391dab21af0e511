/**
 * A catastrophically backtracking pattern neither stalls nor crashes the daemon: other requests
 * are served while it runs, and it ends with ETIMEDOUT (a 400-class error) after its time bound.
 */
import t from 'tap';
import { text } from '../helpers/daemon.js';
import { quickDaemon, settle } from '../vcs/lib.js';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';

t.test('hostile regex (a+)+$ on a 50k-character line', async (t) => {
  const d = await quickDaemon(t, { SERVICE_REGEX_TIMEOUT_MS: '1500' });
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/h/evil.md' }, text('a'.repeat(50000) + '!\n'));
  await r.call('fs.write', { path: '/srv/h/ok.md' }, text('# fine\nneedle\n'));

  let hostileDone = false;
  const hostile = settle(r.call('search.grep', { pattern: '(a+)+$', path: '/srv/h/evil.md' })).then((x) => {
    hostileDone = true;
    return x;
  });
  // a second connection, as another front end would have
  const conn = await connectSocket(socketPathFor(d.dataDir));
  t.teardown(() => conn.close());
  const other = conn.as({});
  // another caller: the pool keeps a worker for others while one caller's regex runs (fair sharing)
  await r.call('admin.userAdd', { name: 'alice' });
  const alice = conn.as({ authorization: 'User alice' });
  const stat = await other.call('fs.stat', { path: '/srv/h/ok.md' });
  t.equal(stat.kind, 'file');
  t.equal(hostileDone, false, 'fs.stat answered while the hostile grep was still running');
  const simple = await alice.call('search.grep', { pattern: 'needle', path: '/srv/h/ok.md' });
  t.same(simple.results, [{ file: '/srv/h/ok.md', line_num: 2, line: 'needle' }]);
  t.equal(hostileDone, false, 'a simple grep answered while the hostile grep was still running');
  const write = await other.call('fs.write', { path: '/srv/h/new.md' }, text('x'));
  t.equal(write.size, 1);
  t.equal(hostileDone, false, 'a write answered while the hostile grep was still running');

  const h = await hostile;
  t.equal(h.ok, false, 'the hostile grep fails');
  if (!h.ok) {
    t.equal(h.error.code, 'ETIMEDOUT');
    t.match(h.error.message, /took longer than/);
  }

  // the daemon keeps serving, greps included (the stuck worker was replaced)
  t.equal((await r.call('sys.ping', {})).pong, true);
  t.same(
    (await r.call('search.grep', { pattern: 'needle', path: '/srv/h', recursive: true })).results.map((m) => m.file),
    ['/srv/h/ok.md'],
  );

  // two at once, through a directory search: both time out, neither blocks a stat
  let both = 0;
  const two = [1, 2].map(() =>
    settle(r.call('search.grep', { pattern: '(a+)+$', path: '/srv/h', recursive: true })).then((x) => (both++, x)),
  );
  await r.call('fs.stat', { path: '/srv/h' });
  t.equal(both, 0, 'stat answered while two hostile greps run');
  for (const x of await Promise.all(two)) t.equal(x.ok ? 'ok' : x.error.code, 'ETIMEDOUT');
  t.same(
    (await r.call('search.grep', { pattern: 'needle', path: '/srv/h/ok.md' })).count,
    1,
    'still serving after both',
  );
});

t.test('a hostile glob in find is bounded the same way', async (t) => {
  const d = await quickDaemon(t, { SERVICE_REGEX_TIMEOUT_MS: '1500' });
  const r = d.client.as({});
  // picomatch compiles `*a*a…*b` to nested lazy quantifiers: polynomial backtracking on a long name
  await r.call('fs.write', { path: `/srv/g/${'a'.repeat(200)}` }, text('x'));
  await r.call('fs.write', { path: '/srv/g/ok.md' }, text('x'));
  let done = false;
  const hostile = settle(r.call('search.find', { path: '/srv/g', name: `${'*a'.repeat(10)}*b` })).then(
    (x) => ((done = true), x),
  );
  t.equal((await r.call('fs.stat', { path: '/srv/g/ok.md' })).kind, 'file');
  await r.call('admin.userAdd', { name: 'alice' });
  const alice = d.client.as({ authorization: 'User alice' });
  t.same(
    (await alice.call('search.find', { path: '/srv/g', name: '*.md' })).results,
    ['/srv/g/ok.md'],
    'a simple find is served meanwhile',
  );
  t.equal(done, false, 'both answered while the hostile find was still running');
  const h = await hostile;
  t.equal(h.ok ? 'ok' : h.error.code, 'ETIMEDOUT');
  t.same((await r.call('search.find', { path: '/srv/g', name: 'a*' })).count, 1, 'still serving');
});
