/**
 * An open, or a first write, racing a rename of the same file (issue 18). A local filesystem follows
 * the inode: the open succeeds and the bytes land in the renamed file. The mount reaches files by
 * path, so a request that arrives while the rename is in flight must wait for it. Here the daemon is
 * stopped while `mv` waits in the mount, so the other request reaches the mount during the rename,
 * every time.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { eventually, mount, skipWithoutFuse, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
const m = await mount(t, d);
// MDVFS_TEST_WRITEBACK=1 (test/helpers/fuse.ts): no open reaches the mount, and data goes after close.
const writeback = process.env.MDVFS_TEST_WRITEBACK === '1';
await root.call('fs.mkdir', { path: '/race', mode: '0777' });

interface Started {
  pid: number;
  done: Promise<{ code: number | null; stderr: string }>;
  /** Resolves when the command printed a line with `text`. */
  said(text: string): Promise<void>;
  stdout(): string;
  write(line: string): void;
}

/** Starts a command from '/', never from the mount (the spawn would wait with the stopped daemon). */
function start(cmd: string, args: string[]): Started {
  const p = spawn(cmd, args, { cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  const done = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    p.on('close', (code) => resolve({ code, stderr })),
  );
  const said = (text: string): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (!stdout.includes(text)) return;
        p.stdout.off('data', check);
        resolve();
      };
      p.stdout.on('data', check);
      check();
    });
  return { pid: p.pid!, done, said, stdout: () => stdout, write: (line) => p.stdin.write(line) };
}

/** Resolves once process `pid` waits in the kernel for the answer of a FUSE server. */
async function waitsInFuse(pid: number): Promise<boolean> {
  for (let i = 0; i < 400; i++) {
    const wchan = await readFile(`/proc/${pid}/wchan`, 'utf8').catch(() => '');
    if (/request_wait_answer/.test(wchan)) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return false;
}

/** `mv src dst` in the mount, held there by the stopped daemon; `during` runs while it waits. */
async function duringRename(t: Test, src: string, dst: string, during: () => Promise<Started>): Promise<void> {
  // The mount then knows the new name is free: mv's lookup of it is answered without the daemon, and
  // what waits for the daemon is the rename itself.
  t.equal((await m.sh(`ls ${src.slice(1, src.lastIndexOf('/'))} > /dev/null`)).code, 0);
  d.proc.kill('SIGSTOP');
  let mv: Started | undefined;
  let other: Started | undefined;
  try {
    mv = start('mv', [`${m.dir}${src}`, `${m.dir}${dst}`]);
    t.ok(await waitsInFuse(mv.pid), 'the rename waits in the mount');
    other = await during();
    if (!writeback) t.ok(await waitsInFuse(other.pid), 'so does the other request');
  } finally {
    d.proc.kill('SIGCONT');
  }
  const [moved, done] = await Promise.all([mv.done, other.done]);
  t.equal(moved.code, 0, `mv succeeds: ${moved.stderr}`);
  t.equal(done.code, 0, `the request that raced it succeeds: ${done.stderr}`);
}

void t.test('an open for appending follows the file being renamed', async (t) => {
  await root.call('fs.write', { path: '/race/log.md', mode: '0666' }, { data: Buffer.from('one\n') });
  t.equal((await m.sh('cat race/log.md')).stdout, 'one\n', 'the kernel knows the file');
  await duringRename(t, '/race/log.md', '/race/moved.md', async () =>
    start('sh', ['-c', `echo two >> ${m.dir}/race/log.md`]),
  );
  const read = async (): Promise<string> => (await root.request('fs.read', { path: '/race/moved.md' })).data.toString();
  if (writeback) await eventually(async () => (await read()) === 'one\ntwo\n');
  t.equal(await read(), 'one\ntwo\n', 'the line is in the renamed file');
  await t.rejects(root.call('fs.stat', { path: '/race/log.md' }), { code: 'ENOENT' }, 'and the old name is gone');
});

void t.test('an open for reading follows the file being renamed', async (t) => {
  // Written through the daemon: the mount has not read it, so the open asks the daemon for it.
  await root.call('fs.write', { path: '/race/read.md', mode: '0644' }, { data: Buffer.from('read me\n') });
  const cat = async (): Promise<Started> => start('cat', [`${m.dir}/race/read.md`]);
  let out: Started | undefined;
  await duringRename(t, '/race/read.md', '/race/read2.md', async () => (out = await cat()));
  t.equal(out!.stdout(), 'read me\n', 'cat read the file');
});

void t.test('a rename waits for an open of the file still in flight', async (t) => {
  await root.call('fs.write', { path: '/race/open.md', mode: '0666' }, { data: Buffer.from('one\n') });
  t.equal((await m.sh('ls race > /dev/null')).code, 0, 'the mount knows the names');
  d.proc.kill('SIGSTOP');
  let sh: Started | undefined;
  let mv: Started | undefined;
  try {
    // The open is sent first (and waits for the daemon), the rename next.
    sh = start('sh', ['-c', `echo two >> ${m.dir}/race/open.md`]);
    if (!writeback) t.ok(await waitsInFuse(sh.pid), 'the open waits in the mount');
    mv = start('mv', [`${m.dir}/race/open.md`, `${m.dir}/race/open2.md`]);
    if (!writeback) t.ok(await waitsInFuse(mv.pid), 'so does the rename');
  } finally {
    d.proc.kill('SIGCONT');
  }
  const [wrote, moved] = await Promise.all([sh.done, mv.done]);
  t.equal(wrote.code, 0, `the append succeeds: ${wrote.stderr}`);
  t.equal(moved.code, 0, `mv succeeds: ${moved.stderr}`);
  const read = async (): Promise<string> => (await root.request('fs.read', { path: '/race/open2.md' })).data.toString();
  if (writeback) await eventually(async () => (await read()) === 'one\ntwo\n');
  t.equal(await read(), 'one\ntwo\n', 'the line is in the renamed file');
  await t.rejects(
    root.call('fs.stat', { path: '/race/open.md' }),
    { code: 'ENOENT' },
    'and nothing came back under the old name',
  );
});

void t.test('an open for writing of a file renamed over meanwhile succeeds, as on a local filesystem', async (t) => {
  await root.call('fs.write', { path: '/race/old.md', mode: '0666' }, { data: Buffer.from('old\n') });
  await root.call('fs.write', { path: '/race/new.md', mode: '0666' }, { data: Buffer.from('new\n') });
  t.equal((await m.sh('cat race/old.md')).stdout, 'old\n', 'the kernel knows the file');
  // The shell's open finds old.md's inode, which the rename then replaces: its line goes to that
  // inode, removed, as it would on a local filesystem; a reader would get ENOENT instead of bytes.
  let sh: Started | undefined;
  await duringRename(t, '/race/new.md', '/race/old.md', async () => {
    sh = start('sh', ['-c', `echo lost >> ${m.dir}/race/old.md`]);
    return sh;
  });
  const read = async (): Promise<string> => (await root.request('fs.read', { path: '/race/old.md' })).data.toString();
  if (writeback) await new Promise((r) => setTimeout(r, 1000));
  t.equal(await read(), 'new\n', 'the renamed file is as it was moved');
});
