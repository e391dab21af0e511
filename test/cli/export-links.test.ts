/**
 * Security (issue 12, low): `mdvfs export` never creates a host symlink that resolves outside the
 * export directory, chained links included; each skipped link is named in a warning.
 */
import t from 'tap';
import { existsSync, lstatSync, mkdirSync, readlinkSync, realpathSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { cliEnv, tempDir } from '../helpers/cli.js';

t.test('export skips every link that resolves outside the export directory', async (t) => {
  const cli = await cliEnv(t);
  const root = (await cli.client()).as({});
  await root.call('fs.mkdir', { path: '/src/a/b', parents: true });
  await root.call('fs.write', { path: '/src/note.md' }, { data: Buffer.from('note\n') });
  const links: Record<string, string> = {
    chain1: 'chain2', // chain1 -> chain2 -> ../../etc
    chain2: '../../etc',
    'a/up': '..', // a/up is the export root itself: fine
    via: 'a/up/../../etc', // lexically "../etc"... but a/up is a link: really the root's parent's etc
    sneaky: 'a/b/../up/../../etc', // climbs out through a/up
    abs: '/etc/passwd',
    ok: 'a/b',
    'ok-chain': 'a/up/note.md', // through a link, still inside
    dangling: 'missing/file',
  };
  for (const [name, target] of Object.entries(links)) await root.call('fs.symlink', { path: `/src/${name}`, target });
  const host = tempDir(t, 'mdvfs-export-');
  const out = path.join(host, 'deep', 'out');
  mkdirSync(path.join(host, 'etc'));
  mkdirSync(path.join(host, 'deep', 'etc'), { recursive: true });
  const r = await cli.run(['export', '/src', out]);
  t.equal(r.code, 0, r.stderr);
  const realOut = realpathSync(out);
  for (const name of ['chain1', 'chain2', 'via', 'sneaky', 'abs']) {
    t.notOk(existsSync(path.join(out, name)) || lstatExists(path.join(out, name)), `${name} was not created`);
    t.match(
      r.stderr,
      new RegExp(`skipped /src/${name}: symlink -> \\S+ resolves outside the exported tree`),
      `and ${name} is named in a warning`,
    );
  }
  for (const name of ['a/up', 'ok', 'ok-chain', 'dangling']) {
    t.equal(readlinkSync(path.join(out, name)), links[name], `${name} is recreated`);
  }
  t.equal(realpathSync(path.join(out, 'ok-chain')), path.join(realOut, 'note.md'));
  // Whatever was created, nothing resolves outside the export directory.
  for (const name of Object.keys(links)) {
    const p = path.join(out, name);
    if (!lstatExists(p)) continue;
    let real: string;
    try {
      real = realpathSync(p);
    } catch {
      continue; // dangling
    }
    t.ok(real === realOut || real.startsWith(realOut + '/'), `${name} resolves inside (${real})`);
  }
});

t.test('a host link already in the export directory cannot be used to lead out', async (t) => {
  const cli = await cliEnv(t);
  const root = (await cli.client()).as({});
  await root.call('fs.mkdir', { path: '/src', parents: true });
  await root.call('fs.symlink', { path: '/src/through', target: 'hostlink/passwd' });
  const out = tempDir(t, 'mdvfs-export-');
  symlinkSync('/etc', path.join(out, 'hostlink')); // the host user's own link, not exported
  const r = await cli.run(['export', '/src', out]);
  t.notOk(lstatExists(path.join(out, 'through')), 'the link through the host link is removed');
  t.match(r.stderr, /skipped \/src\/through: symlink -> hostlink\/passwd resolves outside the exported tree/);
});

function lstatExists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}
