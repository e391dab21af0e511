/**
 * `ln -s target <mount>/missing-dir/link` fails with ENOENT ("No such file or directory"), never
 * EEXIST, whatever the mount cached about that directory before: never seen, listed without it,
 * removed by the mount, renamed away, or removed through another front end.
 */
import t from 'tap';
import { mount, sh, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
await d.client.call('admin.userAdd', { name: 'alice' });

for (const [i, args] of [[], ['--user', 'alice']].entries()) {
  void t.test(`ln -s into a missing directory, mounted ${args.length === 0 ? 'as root' : 'as alice'}`, async (t) => {
    const base = `home/alice/run${i}`;
    await d.client.call('fs.mkdir', { path: `/${base}` });
    await d.client.call('fs.chown', { path: `/${base}`, owner: 'alice' });
    const m = await mount(t, d, args);
    const enoent = async (setup: string, link: string, why: string): Promise<void> => {
      if (setup !== '') t.equal((await m.sh(`cd ${base} && ${setup}`)).code, 0, `setup: ${setup}`);
      const r = await m.sh(`cd ${base} && ln -s target ${link}`);
      t.not(r.code, 0, `${why}: ln fails`);
      t.match(r.stderr, /No such file or directory/, `${why}: with ENOENT`);
      t.notMatch(r.stderr, /File exists/, `${why}: not EEXIST`);
    };
    await enoent('', 'never/link', 'a directory never seen');
    await enoent('ls -la > /dev/null', 'unlisted/link', 'after a listing without it');
    await enoent('mkdir gone && ln -s t gone/l && rm -r gone', 'gone/link', 'after the mount removed it');
    await enoent('mkdir moved && mv moved moved2', 'moved/link', 'after the mount renamed it away');
    await enoent('mkdir -p deep/x', 'deep/x/missing/link', 'a missing directory deeper down');
    await enoent('touch file && rm file', 'file/link', 'a removed file');
    const abs = await sh(`ln -s target ${m.dir}/${base}/never2/link`, '/');
    t.match(abs.stderr, /No such file or directory/, 'an absolute path from outside the mount');
    t.equal((await m.sh(`cd ${base} && mkdir outside`)).code, 0);
    await d.client.call('fs.delete', { path: `/${base}/outside`, recursive: true });
    await enoent('', 'outside/link', 'a directory removed through the daemon');
  });
}
