/**
 * `mdvfs umount` of a mount with a file open: refused with EBUSY and a hint (as umount(8) says
 * "target is busy"); `--lazy` detaches at once, the holder keeps working, and once it closes the file
 * the foreground `mdvfs mount` sends what it wrote and exits by itself.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { CLI, eventually, isMounted, mount, sh, skipWithoutFuse, startDaemon, tempDir } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const read = async (p: string): Promise<string> => (await d.client.request('fs.read', { path: p })).data.toString();

/**
 * A separate process (working outside the mount) that opens `file` and keeps it open. `send(line)`
 * writes the line to the file (answer 'wrote'), `send('close')` closes it and exits, `send('exit')`
 * exits with the file open (the kernel closes it); `send('')` waits for 'open'.
 */
function holder(
  t: { teardown(fn: () => unknown): void },
  file: string,
  flags: 'w' | 'r',
): { proc: ChildProcess; send(cmd: string): Promise<string> } {
  const src = `
const fs = require('fs');
const fd = fs.openSync(${JSON.stringify(file)}, '${flags}');
console.log('open');
let buf = '';
process.stdin.on('data', (b) => {
  buf += b;
  for (let i; (i = buf.indexOf('\\n')) >= 0; ) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    if (line === 'close') { fs.closeSync(fd); console.log('closed'); process.exit(0); }
    else if (line === 'exit') { console.log('exiting'); process.exit(0); }
    else { fs.writeSync(fd, line + '\\n'); console.log('wrote'); }
  }
});`;
  const proc = spawn(process.execPath, ['-e', src], { cwd: '/', stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => proc.kill('SIGKILL'));
  const lines: string[] = [];
  const waiting: ((l: string) => void)[] = [];
  let out = '';
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (s: string) => {
    out += s;
    for (let i; (i = out.indexOf('\n')) >= 0;) {
      const l = out.slice(0, i);
      out = out.slice(i + 1);
      const w = waiting.shift();
      if (w) w(l);
      else lines.push(l);
    }
  });
  const next = (): Promise<string> => new Promise((r) => (lines.length > 0 ? r(lines.shift()!) : waiting.push(r)));
  return {
    proc,
    send: (cmd) => {
      if (cmd !== '') proc.stdin!.write(`${cmd}\n`);
      return next();
    },
  };
}

/** How many mounts are stacked at `dir` (this namespace's mount table). */
function mountsAt(dir: string): number {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.split(' ')[4] === dir).length;
}

void t.test(
  'a busy mount: umount refuses, umount --lazy detaches, the mount exits once the file is closed',
  async (t) => {
    const m = await mount(t, d);
    const w = holder(t, path.join(m.dir, 'held.md'), 'w');
    t.equal(await w.send(''), 'open');
    t.equal(await w.send('before umount'), 'wrote');

    const busy = await sh(`node ${CLI} umount ${m.dir}`, '/');
    t.equal(busy.code, 1, 'umount of a busy mount fails');
    t.match(
      busy.stderr,
      /cannot unmount .*: it is busy .*mdvfs umount --lazy .*\(EBUSY\)/,
      'saying it is busy and how to force it',
    );
    t.ok(isMounted(m.dir), 'the mount stays');
    t.equal(m.proc.exitCode, null, 'and the mount process runs');
    t.equal((await m.sh('cat held.md')).code, 0, 'and serves');

    const lazy = await sh(`node ${CLI} umount --lazy ${m.dir}`, '/');
    t.equal(lazy.code, 0, lazy.stderr);
    t.notOk(isMounted(m.dir), 'detached at once');
    t.equal(await w.send('after umount'), 'wrote', 'the open file keeps working');
    t.ok(await eventually(() => /still open/.test(m.stderr()), 10000), 'the mount says it waits for the open file');
    t.equal(m.proc.exitCode, null, 'and runs while the file is open');

    t.equal(await w.send('close'), 'closed');
    t.ok(await eventually(() => m.proc.exitCode !== null, 10000), 'the mount process exits once the file is closed');
    t.equal(m.proc.exitCode, 0);
    t.equal(await read('/held.md'), 'before umount\nafter umount\n', 'everything written reached the daemon');
  },
);

void t.test('a file open for reading, closed by its process exiting: the mount exits too', async (t) => {
  await d.client.call('fs.write', { path: '/r.md' }, { data: Buffer.from('r\n') });
  const m = await mount(t, d);
  const r = holder(t, path.join(m.dir, 'r.md'), 'r');
  t.equal(await r.send(''), 'open');
  t.equal((await sh(`node ${CLI} umount --lazy ${m.dir}`, '/')).code, 0);
  t.ok(await eventually(() => /still open/.test(m.stderr()), 10000), 'the mount waits for the open file');
  // The last close of a detached mount ends the kernel's session, which may drop the release request.
  t.equal(await r.send('exit'), 'exiting');
  t.ok(await eventually(() => m.proc.exitCode !== null, 10000), 'the mount process exits once the file is closed');
  t.equal(m.proc.exitCode, 0);
});

void t.test('an idle mount unmounts at once', async (t) => {
  const m = await mount(t, d);
  const r = await sh(`node ${CLI} umount ${m.dir}`, '/');
  t.equal(r.code, 0, r.stderr);
  t.notOk(isMounted(m.dir));
  t.ok(await eventually(() => m.proc.exitCode !== null, 10000), 'the mount process exits');
  t.notMatch(m.stderr(), /still open/);
});

void t.test('--writeback: a file just written, unmounted from outside: no file is said to be open', async (t) => {
  const m = await mount(t, d, ['--writeback']);
  // The mount's own descriptor of the written file (sent and closed by the mount) is no open file.
  const w = await m.sh('echo wb > wb.md');
  t.equal(w.code, 0, w.stderr);
  t.equal((await sh(`fusermount3 -u ${m.dir}`, '/')).code, 0);
  t.ok(await eventually(() => m.proc.exitCode !== null, 10000), 'the mount process exits');
  t.notMatch(m.stderr(), /still open/);
  t.equal(await read('/wb.md'), 'wb\n', 'what was written reached the daemon');
});

void t.test('a second mount on a mounted directory is refused, and the first keeps serving', async (t) => {
  const m = await mount(t, d);
  await d.client.call('fs.write', { path: '/second.md' }, { data: Buffer.from('one\n') });
  // Without the check it would stack a second mount and serve in the foreground: `timeout` ends it.
  const env = { SERVICE_DATA_DIR: d.dataDir };
  const again = await sh(`timeout 20 node ${CLI} mount ${m.dir}`, '/', env);
  t.equal(again.code, 1, 'refused');
  t.match(again.stderr, /cannot mount at .*: an mdvfs mount is already there; unmount it first .*\(EBUSY\)/);
  // Through a symbolic link to the mountpoint too: the kernel's table names the real path.
  const link = path.join(tempDir(t), 'link');
  symlinkSync(m.dir, link);
  t.match((await sh(`timeout 20 node ${CLI} mount ${link}/`, '/', env)).stderr, /already there.*\(EBUSY\)/);
  t.equal(mountsAt(m.dir), 1, 'one mount there, not two stacked');
  t.equal((await m.sh('cat second.md')).stdout, 'one\n', 'the first mount serves');
  t.equal(m.proc.exitCode, null);
});

void t.test('umount of a directory with nothing mounted, or of none at all, says so', async (t) => {
  const dir = tempDir(t);
  const idle = await sh(`node ${CLI} umount ${dir}`, '/');
  t.equal(idle.code, 1);
  t.equal(idle.stderr, `mdvfs: cannot unmount '${dir}': nothing is mounted there (EINVAL)\n`);
  const missing = path.join(dir, 'missing');
  const none = await sh(`node ${CLI} umount ${missing}`, '/');
  t.equal(none.code, 1);
  t.equal(none.stderr, `mdvfs: cannot unmount '${missing}': no such directory (ENOENT)\n`);
});
