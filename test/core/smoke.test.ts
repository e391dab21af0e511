import t from 'tap';
import { spawnDaemon, makePersonas, readText, text } from '../helpers/daemon.js';

t.test('a user writes, reads and lists in their home through the socket', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const w = await p.alice.call('fs.write', { path: 'notes/a.md' }, text('# hi\n'));
  t.equal(w.path, '/home/alice/notes/a.md');
  t.equal(await readText(p.alice, '~/notes/a.md'), '# hi\n');
  const l = await p.alice.call('fs.list', { path: 'notes' });
  t.same(
    l.entries.map((e) => e.name),
    ['a.md'],
  );
  await t.rejects(p.bob.call('fs.read', { path: '/home/alice/notes/a.md' }), { code: 'EACCES' });
});
