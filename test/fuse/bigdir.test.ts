/**
 * A directory bigger than one listing page (10,000 entries) is listed in full through the mount:
 * readdir follows the daemon's cursor page after page (issue 12, item 6).
 */
import t from 'tap';
import { mount, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
const names = Array.from({ length: 10050 }, (_, i) => `e${String(i).padStart(5, '0')}.md`);
for (let s = 0; s < names.length; s += 500)
  await Promise.all(
    names.slice(s, s + 500).map((n) => root.call('fs.write', { path: `/big/${n}` }, { data: Buffer.from(n) })),
  );
const m = await mount(t, d);

void t.test('ls in the mount shows every entry of a 10,050-entry directory once', async (t) => {
  const r = await m.sh('LC_ALL=C ls -1 big');
  t.equal(r.code, 0, r.stderr);
  t.same(r.stdout.split('\n').filter(Boolean), names);
});
