/** `mdvfs import` and `mdvfs export`: a byte-exact round trip of 1,000 files, and what import refuses. */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  chmodSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { CLI, cliEnv, tempDir } from '../helpers/cli.js';

/** Every entry under `dir` as relative path → 'dir' | 'link:<target>' | file bytes. */
function snapshot(dir: string): Map<string, string | Buffer> {
  const out = new Map<string, string | Buffer>();
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(dir, rel))) {
      const r = rel === '' ? name : `${rel}/${name}`;
      const full = path.join(dir, r);
      const st = lstatSync(full);
      if (st.isSymbolicLink()) out.set(r, `link:${readlinkSync(full)}`);
      else if (st.isDirectory()) {
        out.set(r, 'dir');
        walk(r);
      } else out.set(r, readFileSync(full));
    }
  };
  walk('');
  return out;
}

/** 1,000 files in nested directories with unicode names (NFC and NFD), empty and binary contents. */
function generate(root: string): void {
  const dirNames = [
    'notes',
    'Журнал',
    '日記',
    'café',
    'cafe\u0301-nfd',
    'emoji 🚀',
    'spaces in name',
    'a',
    'ünïcødé',
    'mixed-Ω≈ç',
  ];
  let n = 0;
  for (let i = 0; i < 10; i++) {
    for (let j = 0; j < 5; j++) {
      const dir = path.join(root, dirNames[i] ?? `d${i}`, `sub ${j} ✓`, j % 2 === 0 ? 'deeper' : '');
      mkdirSync(dir, { recursive: true });
      for (let k = 0; k < 20; k++) {
        const name =
          k === 0
            ? `note-${n}.md`
            : k % 3 === 0
              ? `ノート ${n}.md`
              : k % 3 === 1
                ? `zażółć-${n}.md`
                : `${n} — “quoted” & odd.md`;
        const size = n % 50 === 0 ? 0 : (n * 7919) % 5000;
        const body =
          n % 10 === 0 ? randomBytes(size) : Buffer.from(`# Note ${n}\n\n${'lorem ipsum '.repeat(size / 12)}\n`);
        writeFileSync(path.join(dir, name), body);
        n++;
      }
    }
  }
  mkdirSync(path.join(root, 'empty dir', 'nested empty'), { recursive: true });
}

void t.test('import/export round trip of 1,000 files is byte-exact', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'alice']);
  const tmp = tempDir(t);
  const vault = path.join(tmp, 'vault');
  generate(vault);
  symlinkSync('../notes/sub 0 ✓/deeper/note-0.md', path.join(vault, 'a', 'link-in.md'));
  const before = snapshot(vault);
  t.equal([...before.values()].filter((v) => Buffer.isBuffer(v)).length, 1000);

  let r = await cli.run(['import', vault], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^imported 1000 files, \d+ directories, 1 symlink \(\d+ bytes\) into \/home\/alice\/vault\n$/);
  t.equal(r.stderr, '', 'no progress bar when stderr is not a terminal');
  r = await cli.run(['find', 'vault', '--type', 'f'], { user: 'alice' });
  t.equal(r.stdout.trimEnd().split('\n').length, 1000);

  const out = path.join(tmp, 'out');
  r = await cli.run(['export', 'vault', out], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^exported 1000 files, \d+ directories, 1 symlink \(\d+ bytes\) to /);
  const after = snapshot(out);
  t.same([...after.keys()].sort(), [...before.keys()].sort(), 'the same names, unicode included');
  let differing = 0;
  for (const [k, v] of before) {
    const w = after.get(k);
    if (Buffer.isBuffer(v) ? !(Buffer.isBuffer(w) && v.equals(w)) : v !== w) differing++;
  }
  t.equal(differing, 0, 'every file is byte-identical');

  await t.test('--to, re-import over existing files, export of one file', async (t) => {
    writeFileSync(path.join(vault, 'notes', 'sub 0 ✓', 'deeper', 'note-0.md'), 'changed\n');
    r = await cli.run(['import', vault, '--to', '/home/alice/copy'], { user: 'alice' });
    t.equal(r.code, 0);
    t.match(r.stdout, /into \/home\/alice\/copy\n$/);
    r = await cli.run(['import', vault], { user: 'alice' });
    t.equal(r.code, 0, 'importing again overwrites');
    t.equal((await cli.run(['cat', 'vault/notes/sub 0 ✓/deeper/note-0.md'], { user: 'alice' })).stdout, 'changed\n');
    const one = path.join(tmp, 'one');
    r = await cli.run(['export', 'vault/a/link-in.md', one], { user: 'alice' });
    t.equal(r.code, 0);
    t.equal(readFileSync(path.join(one, 'link-in.md'), 'utf8'), 'changed\n');
  });

  await t.test('a progress bar is drawn when stderr is a terminal', async (t) => {
    const pty = await import('node-pty');
    const p = pty.spawn(process.execPath, [CLI, 'import', vault, '--to', 'tty-copy'], {
      cols: 100,
      rows: 30,
      env: { ...cli.env, SERVICE_AS_USER: 'alice' } as Record<string, string>,
    });
    let screen = '';
    p.onData((d) => (screen += d));
    const code = await new Promise<number>((resolve) => p.onExit((e) => resolve(e.exitCode)));
    t.equal(code, 0);
    t.match(screen, /importing \[#*\.*\] \d+\/\d+ \d+%/);
    t.match(screen, /imported 1000 files/);
  });

  await t.test('errors', async (t) => {
    r = await cli.run(['import', path.join(tmp, 'nope')], { user: 'alice' });
    t.equal(r.code, 1);
    t.match(r.stderr, /^mdvfs: .*\(ENOENT\)\n$/);
    r = await cli.run(['export', 'nope', path.join(tmp, 'x')], { user: 'alice' });
    t.equal(r.code, 1);
    t.match(r.stderr, /\(ENOENT\)\n$/);
    t.notOk(existsSync(path.join(tmp, 'x')), 'nothing is created for a missing source');
    r = await cli.run(['import'], { user: 'alice' });
    t.equal(r.code, 2);
  });
});

void t.test('import never follows symlinks out of the folder and reports what it could not read', async (t) => {
  const cli = await cliEnv(t);
  const tmp = tempDir(t);
  const src = path.join(tmp, 'src');
  const secret = path.join(tmp, 'secret');
  mkdirSync(path.join(src, 'sub'), { recursive: true });
  mkdirSync(secret);
  writeFileSync(path.join(secret, 'passwords.md'), 'top secret');
  writeFileSync(path.join(src, 'ok.md'), 'fine');
  writeFileSync(path.join(src, 'sub', 'also.md'), 'fine too');
  symlinkSync(path.join(secret, 'passwords.md'), path.join(src, 'leak.md'));
  symlinkSync('../secret', path.join(src, 'leakdir'));
  symlinkSync('sub/also.md', path.join(src, 'inside.md'));
  symlinkSync(path.join(src, 'missing.md'), path.join(src, 'dangling.md'));
  execFileSync('mkfifo', [path.join(src, 'pipe')]);
  writeFileSync(Buffer.from(path.join(src, 'bad-\xff-name.md'), 'latin1'), 'x');
  const unreadable = path.join(src, 'locked.md');
  writeFileSync(unreadable, 'locked');
  chmodSync(unreadable, 0);
  const asRoot = process.getuid?.() === 0;

  const r = await cli.run(['import', src, '--to', '/imp']);
  t.equal(r.code, 1, 'exit 1 when something could not be imported');
  t.match(r.stdout, /^imported \d+ files.* into \/imp; \d+ failed; 3 skipped\n$/);
  t.match(r.stderr, /leak\.md: symlink points outside the source folder/);
  t.match(r.stderr, /leakdir: symlink points outside the source folder/);
  t.match(r.stderr, /dangling\.md: dangling symlink/);
  t.match(r.stderr, /pipe: not a regular file.*\(EINVAL\)/);
  t.match(r.stderr, /not valid UTF-8 \(EILSEQ\)/);
  if (!asRoot) t.match(r.stderr, /locked\.md.*\(EACCES\)/);
  const find = await cli.run(['find', '/imp']);
  t.notMatch(find.stdout, /passwords|leak/, 'nothing from outside the folder was imported');
  t.match(find.stdout, /\/imp\/ok\.md\n/);
  t.match(find.stdout, /\/imp\/sub\/also\.md\n/);
  t.equal(
    (await cli.run(['cat', '/imp/inside.md'])).stdout,
    'fine too',
    'a symlink inside the folder is kept as a link',
  );
  t.equal(JSON.parse((await cli.run(['stat', '--json', '/imp/inside.md'])).stdout).target, 'sub/also.md');
});

void t.test('import and export keep modification times, of files and directories, both ways', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'alice']);
  const tmp = tempDir(t);
  const src = path.join(tmp, 'src');
  mkdirSync(path.join(src, 'old', 'deep'), { recursive: true });
  writeFileSync(path.join(src, 'old', 'a.md'), 'a');
  writeFileSync(path.join(src, 'old', 'deep', 'b.md'), 'b');
  writeFileSync(path.join(src, 'top.md'), 'top');
  // Distinct times in the past, children before their directories (writing into one changes its time).
  const times: Record<string, number> = {
    'old/deep/b.md': 1_000_000_001,
    'old/a.md': 1_100_000_002.25,
    'top.md': 1_200_000_003,
    'old/deep': 1_300_000_004,
    old: 1_400_000_005,
    '': 1_500_000_006,
  };
  for (const [rel, sec] of Object.entries(times)) utimesSync(path.join(src, rel), sec, sec);

  let r = await cli.run(['import', src, '--to', 'imp'], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  const client = await cli.client();
  for (const [rel, sec] of Object.entries(times)) {
    const st = await client.call('fs.stat', { path: `/home/alice/imp${rel === '' ? '' : `/${rel}`}` });
    t.equal(st.modified, Math.floor(sec), `import: ${rel || 'the folder itself'} keeps its modification time`);
  }
  t.equal(
    (await client.call('fs.stat', { path: '/home/alice/imp/old/a.md' })).mtime_ns,
    '1100000002250000000',
    'to the nanosecond',
  );

  // Times set in the filesystem (one file written now, one touched to a known time) go out with export.
  await client.call('fs.write', { path: '/home/alice/imp/old/fresh.md' }, { data: Buffer.from('fresh') });
  await client.call('fs.utimens', { path: '/home/alice/imp/top.md', mtime: '1600000007000000000' });
  const fresh = await client.call('fs.stat', { path: '/home/alice/imp/old/fresh.md' });
  const old = await client.call('fs.stat', { path: '/home/alice/imp/old' });
  const out = path.join(tmp, 'out');
  r = await cli.run(['export', 'imp', out], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  const hostSec = (rel: string) => Math.floor(statSync(path.join(out, rel)).mtimeMs / 1000);
  t.equal(hostSec('top.md'), 1_600_000_007, 'export: a file gets the time set in the filesystem');
  t.equal(hostSec('old/fresh.md'), fresh.modified, 'export: a file written in the filesystem gets its time there');
  t.equal(hostSec('old/a.md'), 1_100_000_002);
  t.equal(hostSec('old/deep/b.md'), 1_000_000_001);
  t.equal(hostSec('old/deep'), 1_300_000_004, 'export: a directory keeps its time');
  t.equal(
    hostSec('old'),
    old.modified,
    'export: a directory gets its time in the filesystem (changed by the new file)',
  );
  t.equal(hostSec(''), 1_500_000_006, 'export: the exported directory itself too');

  // Copied into folders that were there already, import and export leave those folders' own times alone.
  // Someone else's directory (root's) that alice may write into: only its owner could set its times.
  await client.call('fs.mkdir', { path: '/home/alice/existing' });
  await client.call('fs.chmod', { path: '/home/alice/existing', mode: '0777' });
  r = await cli.run(['import', src, '--to', 'existing'], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  t.not(
    (await client.call('fs.stat', { path: '/home/alice/existing' })).modified,
    1_500_000_006,
    'import: an existing target keeps its own time',
  );
  t.equal(
    (await client.call('fs.stat', { path: '/home/alice/existing/old' })).modified,
    1_400_000_005,
    'while what it copied keeps the source times',
  );
  const there = path.join(tmp, 'there');
  mkdirSync(there);
  r = await cli.run(['export', 'imp', there], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  t.not(Math.floor(statSync(there).mtimeMs / 1000), 1_500_000_006, 'export: an existing folder keeps its own time');
  t.equal(Math.floor(statSync(path.join(there, 'old', 'deep')).mtimeMs / 1000), 1_300_000_004);

  // One file exported alone keeps its time too.
  const one = path.join(tmp, 'one');
  r = await cli.run(['export', 'imp/old/a.md', one], { user: 'alice' });
  t.equal(r.code, 0, r.stderr);
  t.equal(Math.floor(statSync(path.join(one, 'a.md')).mtimeMs / 1000), 1_100_000_002);
});
