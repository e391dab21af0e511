/**
 * RangedContent's reuse of part buffers (fuse/ranged.ts), with a fetch under the test's control
 * instead of the daemon: a large file's parts behind the reader go back to a PartPool and the next
 * parts are read into them. What must hold: a buffer is never reused while a read waits for or copies
 * from its part, nor in the turn a view of it was handed out; a part given back and read again is
 * fetched again, of the same version; the buffers really are reused (a cold read allocates nothing
 * per part). No mount: these are the orderings a real mount only hits by chance.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { PartPool, RangedContent } from '../../fuse/ranged.js';

const MiB = 1024 * 1024;
/** The size of parts after the first (ranged.ts STEP); the first is 1 MiB, as the open fetches it. */
const STEP = 4 * MiB;
const HEAD = MiB;

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

interface Call {
  offset: number;
  length: number;
  etag: string;
  into: Buffer | undefined;
  /** Answers it: the bytes are written into `into` (as the socket does) when given, else into a new buffer. */
  answer(bytes?: Buffer): void;
  fail(err: Error): void;
}

/** A file of `size` random bytes and a RangedContent over it whose fetches wait for the test to answer. */
function setup(size: number, pool: PartPool | undefined) {
  const bytes = randomBytes(size);
  const calls: Call[] = [];
  const content = new RangedContent(
    size,
    'v1',
    bytes.subarray(0, HEAD),
    (offset, length, etag, into) =>
      new Promise<Buffer>((resolve, reject) => {
        calls.push({
          offset,
          length,
          etag,
          into,
          answer(b = bytes.subarray(offset, offset + length)) {
            const out = into ? into.subarray(0, b.length) : Buffer.allocUnsafe(b.length);
            b.copy(out);
            resolve(out);
          },
          fail: reject,
        });
      }),
    () => undefined,
    pool,
  );
  /** Answers every call made so far that is not answered yet. */
  let answered = 0;
  const answerAll = async (): Promise<void> => {
    while (answered < calls.length) calls[answered++]!.answer();
    await turn();
  };
  const call = (offset: number): Call => {
    const c = calls.find((x) => x.offset === offset);
    if (!c) throw new Error(`no fetch of offset ${offset}`);
    return c;
  };
  return { bytes, calls, content, answerAll, call, skip: () => answered++ };
}

/** Reads `f`'s content 1 MiB at a time as the kernel does, answering fetches as they come; the offsets read wrong. */
async function readAll(f: ReturnType<typeof setup>, size: number): Promise<number[]> {
  const wrong: number[] = [];
  for (let pos = 0; pos < size; pos += MiB) {
    const reading = f.content.read(pos, MiB);
    await f.answerAll();
    if (!(await reading).equals(f.bytes.subarray(pos, Math.min(size, pos + MiB)))) wrong.push(pos);
  }
  return wrong;
}

void t.test('a sequential read of a large file reuses the buffers of the parts behind it', async (t) => {
  const pool = new PartPool();
  const size = HEAD + 12 * STEP + 777;
  const f = setup(size, pool);
  t.same(await readAll(f, size), [], "every byte read is the file's");
  f.content.stop();
  await turn();
  const buffers = new Set(f.calls.map((c) => c.into!.buffer));
  t.ok(
    f.calls.every((c) => c.into !== undefined),
    'every part after the first is read into a pooled buffer',
  );
  t.ok(buffers.size < f.calls.length, `${f.calls.length} parts were read into ${buffers.size} buffers`);
  t.ok(
    f.calls.every((c) => c.etag === 'v1'),
    'every part names the version opened',
  );

  // The next large file is read into the same buffers: nothing new is allocated.
  const g = setup(size, pool);
  t.same(await readAll(g, size), [], 'every byte of the second file');
  const fresh = g.calls.filter((c) => !buffers.has(c.into!.buffer));
  t.equal(fresh.length, 0, `the second file's parts reuse the first file's buffers (${fresh.length} new)`);
  g.content.stop();
});

void t.test('a part a read waits for or copies from is not reused meanwhile', async (t) => {
  const f = setup(HEAD + 12 * STEP, new PartPool());
  // Across the end of part 1 and the start of part 2: a copy from both, once both are in.
  const across = HEAD + STEP - 100;
  const first = f.content.read(across, 200);
  const part1 = f.call(HEAD);
  part1.answer(); // part 1 is in, part 2 not yet
  await turn();
  // A read far ahead: the parts behind it would go back to the pool, part 1 among them were it not
  // pinned by the first read...
  const far = f.content.read(HEAD + 8 * STEP, MiB);
  await turn();
  // ...and the next fetch (part 4, once part 3 and the far part are in) would take its buffer and fill it.
  f.call(HEAD + 2 * STEP).answer();
  f.call(HEAD + 8 * STEP).answer();
  await turn();
  f.call(HEAD + 3 * STEP).answer();
  await turn();
  t.ok(
    f.calls.every((c) => c === part1 || c.into?.buffer !== part1.into!.buffer),
    'no other part was read into the buffer of part 1 while a read waited for it',
  );
  f.call(HEAD + STEP).answer();
  t.ok((await first).equals(f.bytes.subarray(across, across + 200)), 'the read across two parts has the right bytes');
  await f.answerAll();
  t.ok((await far).equals(f.bytes.subarray(HEAD + 8 * STEP, HEAD + 8 * STEP + MiB)), 'the far read too');
});

void t.test(
  'a view handed out stays intact for the rest of its turn; a part read again is fetched again',
  async (t) => {
    const f = setup(HEAD + 12 * STEP, new PartPool());
    const reading = f.content.read(HEAD, MiB);
    await f.answerAll();
    const view = await reading;
    const expected = Buffer.from(f.bytes.subarray(HEAD, HEAD + MiB));
    t.ok(view.equals(expected), 'a view of part 1');
    // In the same turn (as the mount serves it): a read further on gives part 1 back, and its fetches,
    // answered at once, must not be read into part 1's buffer.
    const held = new Set(f.calls.map((c) => c.into!.buffer));
    const before = f.calls.length;
    const far = f.content.read(HEAD + 8 * STEP, MiB);
    const now = f.calls.slice(before);
    for (const c of now) c.answer();
    t.ok(now.length > 0, 'the read further on fetched parts at once');
    t.ok(
      now.every((c) => !held.has(c.into!.buffer)),
      'none of them into a buffer given back in this turn',
    );
    t.ok(view.equals(expected), 'the view is unchanged until the turn ends');
    await f.answerAll();
    t.ok((await far).equals(f.bytes.subarray(HEAD + 8 * STEP, HEAD + 8 * STEP + MiB)), 'the far read');

    // Part 1 was given back: reading it again fetches it again, of the version opened.
    const n = f.calls.length;
    const again = f.content.read(HEAD + 10, 100);
    await f.answerAll();
    t.ok((await again).equals(f.bytes.subarray(HEAD + 10, HEAD + 110)), 'part 1 read again has its bytes');
    t.ok(
      f.calls.slice(n).some((c) => c.offset === HEAD && c.etag === 'v1'),
      'it was fetched again, naming the version opened',
    );
    f.content.stop();
  },
);

void t.test('the whole content, asked for before most parts were fetched (a writer opening it)', async (t) => {
  for (const pool of [undefined, new PartPool()]) {
    const size = HEAD + 5 * STEP + 123;
    const f = setup(size, pool);
    // Only WINDOW parts are requested at once: the others are not even asked for when whole() starts.
    const whole = f.content.whole();
    do await f.answerAll();
    while (f.calls.length < 6); // parts 1..6 (the last one 123 bytes)
    await f.answerAll();
    t.ok((await whole).equals(f.bytes), `every byte, in order (${pool ? 'pooled' : 'kept'} parts)`);
    t.equal(f.calls.length, 6, 'each part fetched once');
    f.content.stop();
  }
});
