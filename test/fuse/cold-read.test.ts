/**
 * Large files the mount never saw are read in parts, fetched from the daemon as the kernel reads them
 * (fuse/ranged.ts), not as one whole-file transfer at open (issue 18). What must hold: the bytes are
 * the file's, wherever a read starts; a file replaced through the daemon in the middle of a read is
 * never served as a mix of two versions (every part names the etag of the first: what is not fetched
 * yet fails with EIO); a writer of a file being read in parts works on the whole of it.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mount, sh, skipWithoutFuse, sleep, startDaemon } from '../helpers/fuse.js';

skipWithoutFuse(t);

const d = await startDaemon(t);
const root = d.client;
const m = await mount(t, d);
const MiB = 1024 * 1024;

const put = (p: string, data: Buffer) => root.call('fs.write', { path: p, parents: true }, { data });

const notRoot = process.getuid?.() !== 0 ? 'only root may set a mount readahead' : false;
void t.test(
  'the kernel reads 1 MiB at a time from the mount (readahead raised, as root)',
  { skip: notRoot },
  async (t) => {
    const dev = execFileSync('mountpoint', ['-d', m.dir]).toString().trim();
    t.equal(readFileSync(`/sys/class/bdi/${dev}/read_ahead_kb`, 'utf8').trim(), '1024');
  },
);

void t.test('a large file read cold matches byte for byte, wherever reads start', async (t) => {
  // Not a multiple of the part size; parts of 1 MiB then 4 MiB.
  const bytes = randomBytes(21 * MiB + 12345);
  await put('/cold/big.bin', bytes);
  const ref = path.join(os.tmpdir(), `mdvfs-cold-ref-${process.pid}`);
  writeFileSync(ref, bytes);
  t.teardown(() => sh(`rm -f '${ref}'`, '/'));
  // The tail first: parts far from the start, before any of the others.
  const tail = await m.sh(`tail -c 100000 cold/big.bin | cmp - <(tail -c 100000 '${ref}') && echo same`);
  t.equal(tail.stdout, 'same\n', `the last 100,000 bytes read first ${tail.stderr}`);
  const mid = await m.sh(
    `dd if=cold/big.bin bs=4096 skip=2000 count=300 status=none | cmp - <(dd if='${ref}' bs=4096 skip=2000 count=300 status=none) && echo same`,
  );
  t.equal(mid.stdout, 'same\n', `a range across a part boundary ${mid.stderr}`);
  const all = await m.sh(`cmp cold/big.bin '${ref}' && echo same`);
  t.equal(all.stdout, 'same\n', `the whole file ${all.stderr}`);

  // Cold again: a new version through the daemon, read at once in 1 MiB reads.
  const v2 = randomBytes(9 * MiB + 1);
  await put('/cold/big.bin', v2);
  writeFileSync(ref, v2);
  const again = await m.sh(`dd if=cold/big.bin bs=1M status=none | cmp - '${ref}' && echo same`);
  t.equal(again.stdout, 'same\n', `a new version of it ${again.stderr}`);
});

void t.test(
  'large files read at once by several readers, whose part buffers are reused, match byte for byte',
  async (t) => {
    // Larger than the content cache keeps whole (8 MiB): their parts' buffers go back to a pool as they
    // are read, and the next parts, of this file or another, are read into them.
    const one = randomBytes(30 * MiB + 5);
    const two = randomBytes(26 * MiB + 3);
    await put('/cold/one.bin', one);
    await put('/cold/two.bin', two);
    const refs = path.join(os.tmpdir(), `mdvfs-cold-refs-${process.pid}`);
    await sh(`mkdir -p '${refs}'`, '/');
    t.teardown(() => sh(`rm -rf '${refs}'`, '/'));
    writeFileSync(path.join(refs, 'one.bin'), one);
    writeFileSync(path.join(refs, 'two.bin'), two);
    // Two readers of one file (one from the start in 1 MiB reads, one from the middle in 64 KiB reads:
    // each gives back parts the other then reads again), and a reader of the other file, all at once;
    // then both files again, one after the other.
    const r = await m.sh(
      [
        `(cmp cold/one.bin '${refs}/one.bin' && echo one-whole) &`,
        `(dd if=cold/one.bin bs=64K skip=200 status=none | cmp - <(tail -c +$((200 * 65536 + 1)) '${refs}/one.bin') && echo one-middle) &`,
        `(dd if=cold/two.bin bs=1M status=none | cmp - '${refs}/two.bin' && echo two-whole) &`,
        'wait',
        `cmp cold/two.bin '${refs}/two.bin' && cmp cold/one.bin '${refs}/one.bin' && echo again`,
      ].join('\n'),
    );
    t.same(
      r.stdout.trim().split('\n').sort(),
      ['again', 'one-middle', 'one-whole', 'two-whole'],
      `every reader had the files' bytes ${r.stderr}`,
    );
  },
);

void t.test('a file replaced through the daemon in the middle of a read is never a mix of versions', async (t) => {
  const a = randomBytes(40 * MiB);
  const b = randomBytes(40 * MiB);
  await put('/cold/changing.bin', a);
  const fh = await open(path.join(m.dir, 'cold/changing.bin'), 'r');
  const got: Buffer[] = [];
  let error: NodeJS.ErrnoException | undefined;
  try {
    const first = Buffer.alloc(MiB);
    const { bytesRead } = await fh.read(first, 0, MiB, 0);
    got.push(first.subarray(0, bytesRead));
    await sleep(200); // the parts fetched ahead of the reader come in
    await put('/cold/changing.bin', b);
    await sleep(500); // its change event reaches the mount, which drops the kernel's pages of it
    for (let pos = bytesRead; ;) {
      const buf = Buffer.alloc(MiB);
      const r = await fh.read(buf, 0, MiB, pos);
      if (r.bytesRead === 0) break;
      got.push(buf.subarray(0, r.bytesRead));
      pos += r.bytesRead;
    }
  } catch (err) {
    error = err as NodeJS.ErrnoException;
  } finally {
    await fh.close();
  }
  const read = Buffer.concat(got);
  t.ok(read.length > MiB, `more than the first read was served (${read.length} bytes)`);
  t.ok(read.equals(a.subarray(0, read.length)), 'every byte served is of the version opened');
  if (error) t.equal(error.code, 'EIO', 'the rest of the old version, gone from the daemon, fails with EIO');
  else t.equal(read.length, a.length, 'or all of it was served');
  t.ok(error !== undefined, 'parts past what was fetched ahead could not be had (40 MiB is beyond it)');
  t.ok((await readFile(path.join(m.dir, 'cold/changing.bin'))).equals(b), 'a new open reads the new version');
});

void t.test('a writer of a file being read in parts works on the whole of it', async (t) => {
  const a = randomBytes(12 * MiB + 7);
  await put('/cold/appended.bin', a);
  const fh = await open(path.join(m.dir, 'cold/appended.bin'), 'r');
  try {
    const first = Buffer.alloc(4096);
    await fh.read(first, 0, 4096, 0);
    t.ok(first.equals(a.subarray(0, 4096)), 'the reader has its first page');
    const r = await m.sh(`printf 'the end\\n' >> cold/appended.bin`);
    t.equal(r.code, 0, `appended through the mount ${r.stderr}`);
    const stored = (await root.request('fs.read', { path: '/cold/appended.bin' })).data;
    t.ok(
      stored.equals(Buffer.concat([a, Buffer.from('the end\n')])),
      'the daemon has the whole file and the appended line',
    );
    const last = Buffer.alloc(8);
    await fh.read(last, 0, 8, a.length);
    t.equal(last.toString(), 'the end\n', 'the reader sees the write made in the mount');
  } finally {
    await fh.close();
  }
});
