/**
 * Names the store cannot hold are refused by the mount: a name that is not valid UTF-8 gets EILSEQ (it
 * would otherwise collapse to U+FFFD and overwrite another file), a name over 255 bytes ENAMETOOLONG.
 */
import t from 'tap';
import { mount, okIn, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const m = await mount(t, d);
const ok = okIn(m);

void t.test('a name that is not UTF-8 is refused with EILSEQ, and nothing is overwritten', async (t) => {
  await ok(t, "mkdir n1 && printf 'kept\\n' > \"n1/$(printf 'a\\357\\277\\275')\"");
  for (const bad of ['a\\377', 'a\\376', 'a\\300\\200']) {
    const r = await m.sh(`printf 'new\\n' > "n1/$(printf '${bad}')"`);
    t.not(r.code, 0, `creating ${bad} fails`);
    t.match(r.stderr, /Invalid or incomplete multibyte or wide character/, `${bad}: EILSEQ`);
    const look = await m.sh(`stat "n1/$(printf '${bad}')"`);
    t.match(look.stderr, /Invalid or incomplete multibyte or wide character/, `looking ${bad} up: EILSEQ`);
  }
  t.equal(await ok(t, 'cat n1/*'), 'kept\n', 'the file named U+FFFD kept its content');
  t.same(
    (await d.client.call('fs.list', { path: '/n1' })).entries.map((e) => e.name),
    ['a\uFFFD'],
    'the daemon has that one file only',
  );
});

void t.test('a name over 255 bytes is refused with ENAMETOOLONG', async (t) => {
  await ok(t, 'mkdir n2');
  const long = 'x'.repeat(256);
  const create = await m.sh(`touch n2/${long}`);
  t.not(create.code, 0);
  t.match(create.stderr, /File name too long/, 'create: ENAMETOOLONG');
  const look = await m.sh(`stat n2/${long}`);
  t.match(look.stderr, /File name too long/, 'lookup: ENAMETOOLONG');
  await ok(t, `touch n2/${'y'.repeat(255)}`); // 255 bytes is fine
  t.equal((await d.client.call('fs.list', { path: '/n2' })).entries.length, 1);
});
