/**
 * The temporary files of rsync and git: made with O_EXCL, given a mode and times, then renamed over
 * their final name. A file whose create the mount answered itself (its daemon answer known) is sent
 * once, as it ends: under its final name, with its mode, times and content (fs.write's `atime` and
 * `mtime`). What the daemon ends with must be what a disk would hold, directories' times included
 * (rsync sets them after writing their files, and only if they differ). Every check asks the daemon
 * through its own socket.
 */
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { eventually, mount, okIn, sh, skipWithoutFuse, startDaemon, tempDir, type Mount } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;

/**
 * A source tree on the local disk: files of several modes, a 0700 directory, a link, each with its own
 * time in the past to the nanosecond (rsync leaves a time that is within the same second alone).
 */
async function sourceTree(t: Test): Promise<string> {
  const src = path.join(tempDir(t, 'mdvfs-tempfiles-src-'), 'src');
  const files: [string, number][] = [
    ['a/plain.md', 0o644],
    ['a/group.md', 0o640],
    ['a/readonly.md', 0o444],
    ['a/script.sh', 0o755],
    ['b/deep/note.md', 0o600],
  ];
  for (let i = 0; i < 30; i++) files.push([`b/n${i}.md`, 0o644]);
  for (const [f, mode] of files) {
    mkdirSync(path.join(src, path.dirname(f)), { recursive: true });
    writeFileSync(path.join(src, f), `# ${f}\n`, { mode });
  }
  symlinkSync('plain.md', path.join(src, 'a/link'));
  chmodSync(path.join(src, 'b/deep'), 0o700);
  const times = await sh(
    `i=0; find . -depth | while read -r p; do i=$((i+1)); touch -h -d "@$((1500000000 + i * 1000)).$((123456789 + i))" "$p"; done`,
    src,
  );
  t.equal(times.code, 0, times.stderr);
  return src;
}

interface Seen {
  mode: string;
  mtime: string;
  content?: string;
}

/** What the disk holds under `src`, by relative path (directories' times set last, as rsync does). */
function onDisk(src: string, at = ''): Map<string, Seen> {
  const out = new Map<string, Seen>();
  for (const name of readdirSync(path.join(src, at))) {
    const rel = at === '' ? name : `${at}/${name}`;
    const full = path.join(src, rel);
    const st = lstatSync(full, { bigint: true });
    const mode = (Number(st.mode) & 0o7777).toString(8).padStart(4, '0');
    const seen: Seen = { mode, mtime: st.mtimeNs.toString() };
    if (st.isFile()) seen.content = readFileSync(full, 'utf8');
    if (st.isSymbolicLink()) seen.content = readlinkSync(full);
    out.set(rel, seen);
    if (st.isDirectory()) for (const [k, v] of onDisk(src, rel)) out.set(k, v);
  }
  return out;
}

/** What the daemon holds under `dir`, as onDisk. */
async function inDaemon(dir: string, want: Map<string, Seen>): Promise<Map<string, Seen>> {
  const out = new Map<string, Seen>();
  for (const rel of want.keys()) {
    const p = `${dir}/${rel}`;
    try {
      const st = await root.call('fs.stat', { path: p, nofollow: true });
      const seen: Seen = { mode: st.mode, mtime: st.mtime_ns ?? '' };
      if (st.kind === 'file') seen.content = (await root.request('fs.read', { path: p })).data.toString('utf8');
      if (st.kind === 'symlink') seen.content = (await root.call('fs.readlink', { path: p })).target;
      out.set(rel, seen);
    } catch {
      // missing: shows as a difference
    }
  }
  return out;
}

/** The daemon's `dir` holds `name` alone (the temporary name never reached it), as `want` says. */
async function holdsOnly(
  t: Test,
  dir: string,
  name: string,
  want: { mode: string; atime: string; mtime: string; content: string },
): Promise<void> {
  const st = await root.call('fs.stat', { path: `${dir}/${name}` });
  t.same([st.mode, st.atime_ns, st.mtime_ns], [want.mode, want.atime, want.mtime], 'its mode and times');
  t.equal((await root.request('fs.read', { path: `${dir}/${name}` })).data.toString(), want.content);
  const names = (await root.call('fs.list', { path: dir })).entries.map((e) => e.name);
  t.same(names, [name], 'and nothing else: the temporary name never reached the daemon');
}

async function rsyncRound(t: Test, m: Mount, name: string): Promise<void> {
  const src = await sourceTree(t);
  const r = await m.sh(`rsync -a '${src}/' ${name}/`);
  t.equal(r.code, 0, r.stderr);
  const want = onDisk(src);
  let got = new Map<string, Seen>();
  // A --writeback mount sends within its idle time (200 ms) and before anything asks about the directory.
  await eventually(async () => {
    got = await inDaemon(`/${name}`, want);
    return JSON.stringify([...got]) === JSON.stringify([...want]);
  }, 5000);
  t.same(Object.fromEntries(got), Object.fromEntries(want), 'modes, times to the nanosecond and contents');
  const names = (await root.call('fs.list', { path: `/${name}/b` })).entries.map((e) => e.name);
  t.notOk(
    names.some((n) => n.startsWith('.')),
    `no temporary name left: ${names.filter((n) => n.startsWith('.')).join(' ')}`,
  );
}

for (const args of [[], ['--writeback']]) {
  void t.test(
    `rsync -a into the mount${args.length ? ' (--writeback)' : ''}: the daemon holds the source`,
    async (t) => {
      const m = await mount(t, d, args);
      await rsyncRound(t, m, `rs${args.length}`);
      await rsyncRound(t, m, `rs${args.length}`); // again, over the files of the first round
    },
  );
}

void t.test(
  '--writeback: a temporary file made, given its mode and times, and renamed costs no daemon call',
  async (t) => {
    const m = await mount(t, d, ['--writeback']);
    const ok = okIn(m);
    await ok(t, 'mkdir tf'); // the mount made it: it knows what the daemon answers to a create there
    const dir = `${m.dir}/tf`;
    const py = `import os
fd = os.open('${dir}/.x.md.tmp', os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b'made in the dark\\n')
os.fchmod(fd, 0o640)
os.close(fd)
os.utime('${dir}/.x.md.tmp', ns=(1000000000123456789, 1500000000987654321))
os.rename('${dir}/.x.md.tmp', '${dir}/x.md')
st = os.stat('${dir}/x.md')
print(oct(st.st_mode & 0o7777), st.st_mtime_ns, st.st_size, os.path.exists('${dir}/.x.md.tmp'))
`;
    const work = tempDir(t);
    writeFileSync(path.join(work, 'tmp.py'), py);
    d.proc.kill('SIGSTOP'); // a daemon call would now wait (the kernel's request with it)
    let seen: string;
    try {
      // From outside the mount, killed if it waits: a daemon call would make it.
      const r = await sh('timeout -s KILL 20 python3 tmp.py', work);
      seen = `${r.code} ${r.stdout.trim()} ${r.stderr.trim()}`;
    } finally {
      d.proc.kill('SIGCONT');
    }
    t.equal(
      seen,
      '0 0o640 1500000000987654321 17 False ',
      'made, written, chmodded, timed and renamed with the daemon stopped',
    );
    t.ok(
      await eventually(async () => {
        try {
          return (await root.call('fs.stat', { path: '/tf/x.md' })).mtime_ns === '1500000000987654321';
        } catch {
          return false;
        }
      }, 5000),
      'then sent',
    );
    await holdsOnly(t, '/tf', 'x.md', {
      mode: '0640',
      atime: '1000000000123456789',
      mtime: '1500000000987654321',
      content: 'made in the dark\n',
    });
  },
);

void t.test(
  "--writeback: a directory's mtime, asked right after a create in it, is the one the create gave it",
  async (t) => {
    const m = await mount(t, d, ['--writeback']);
    const ok = okIn(m);
    // rsync sets a directory's times after writing its files only if they differ from the source's: a
    // create not yet sent must not leave the time rsync set before it showing.
    await ok(t, 'mkdir dm && touch -d @1500000000 dm');
    const seen = await ok(t, 'echo x > dm/new.md && stat -c %Y dm');
    t.not(seen.trim(), '1500000000', 'the create changed it');
    const daemon = await root.call('fs.stat', { path: '/dm' });
    t.equal(String(daemon.modified), seen.trim(), 'as the daemon has it');
  },
);

void t.test(
  'a file made, chmodded, timed and renamed before its first close is one create at that close',
  async (t) => {
    const m = await mount(t, d);
    const ok = okIn(m);
    await ok(t, 'mkdir one');
    const dir = `${m.dir}/one`;
    const work = tempDir(t);
    const marker = path.join(work, 'before-close');
    // Everything up to the close is answered by the mount (the daemon stopped); the close sends it all.
    writeFileSync(
      path.join(work, 'tmp.py'),
      `import os
fd = os.open('${dir}/.f.tmp', os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, b'one create\\n')
os.fchmod(fd, 0o604)
os.utime(fd, ns=(1000000000000000001, 1200000000000000002))
os.rename('${dir}/.f.tmp', '${dir}/f.md')
open('${marker}', 'w').close()
os.close(fd)
`,
    );
    d.proc.kill('SIGSTOP');
    let before: boolean;
    let run: Promise<{ code: number; stderr: string }>;
    try {
      run = sh('timeout -s KILL 60 python3 tmp.py', work);
      before = await eventually(() => existsSync(marker), 10000);
    } finally {
      d.proc.kill('SIGCONT');
    }
    t.ok(before, 'made, written, chmodded, timed and renamed with the daemon stopped');
    const r = await run;
    t.equal(r.code, 0, r.stderr);
    // The default mount: what close(2) returned for is in the daemon, durable.
    await holdsOnly(t, '/one', 'f.md', {
      mode: '0604',
      atime: '1000000000000000001',
      mtime: '1200000000000000002',
      content: 'one create\n',
    });
  },
);
