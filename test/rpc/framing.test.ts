/**
 * FrameWriter: the frames queued in one event-loop turn leave together, in order, in one corked
 * write (one writev) after the turn; flush() writes at once; a destroyed socket gets nothing.
 * Checked on a real Unix socket pair, with the writing side's socket calls recorded.
 */
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import t, { type Test } from 'tap';
import { FrameDecoder, FrameWriter, type Frame } from '../../daemon/rpc/framing.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-framing-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A connected pair: `a` writes (its cork/write/uncork calls are recorded), `b` decodes what arrives. */
async function pair(
  t: Test,
): Promise<{ a: net.Socket; calls: string[]; frames: Frame[]; got: (n: number) => Promise<Frame[]> }> {
  const sockPath = path.join(dir, `s${Math.random().toString(36).slice(2)}`);
  const frames: Frame[] = [];
  const decoder = new FrameDecoder();
  let waiter: (() => void) | undefined;
  const server = net.createServer((b) => {
    b.on('data', (chunk: Buffer) => {
      frames.push(...decoder.push(chunk));
      waiter?.();
    });
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  const a = net.createConnection(sockPath);
  await new Promise<void>((r) => a.once('connect', r));
  t.teardown(() => {
    a.destroy();
    server.close();
  });
  const calls: string[] = [];
  const { cork, uncork, write } = {
    cork: a.cork.bind(a),
    uncork: a.uncork.bind(a),
    write: a.write.bind(a) as (b: Buffer) => boolean,
  };
  a.cork = () => {
    calls.push('cork');
    cork();
  };
  a.uncork = () => {
    calls.push('uncork');
    uncork();
  };
  (a as unknown as { write: (b: Buffer) => boolean }).write = (b: Buffer) => {
    calls.push('write');
    return write(b);
  };
  const got = async (n: number): Promise<Frame[]> => {
    while (frames.length < n) await new Promise<void>((r) => (waiter = r));
    return frames;
  };
  return { a, calls, frames, got };
}

t.test('frames of one turn are written together after the turn, in order', async (t) => {
  const { a, calls, got } = await pair(t);
  const w = new FrameWriter(a);
  for (let i = 0; i < 50; i++)
    w.push(
      { id: i, method: 'fs.read', params: { path: `/f${i}.md` } },
      i % 2 === 0 ? Buffer.from(`data ${i}`) : undefined,
    );
  t.same(calls, [], 'nothing is written during the turn');
  await new Promise((r) => setImmediate(r));
  t.equal(calls.filter((c) => c === 'cork').length, 1, 'one cork');
  t.equal(calls.at(-1), 'uncork', 'one uncork after the writes: a single writev');
  t.equal(calls.filter((c) => c === 'write').length, 75, 'a buffer per header, one per data part');
  const frames = await got(50);
  t.same(
    frames.map((f) => (f.header as { id: number }).id),
    [...Array(50).keys()],
    'every frame arrives, in order',
  );
  t.equal(frames[4]!.data?.toString(), 'data 4');
  t.equal(frames[5]!.data, undefined);
});

t.test('a single frame is one plain write; flush() writes at once; a destroyed socket gets nothing', async (t) => {
  const { a, calls, got } = await pair(t);
  const w = new FrameWriter(a);
  w.push({ id: 1 });
  await new Promise((r) => setImmediate(r));
  t.same(calls, ['write']);
  w.push({ id: 2 });
  w.flush();
  t.same(calls, ['write', 'write'], 'flush() does not wait for the turn to end');
  await new Promise((r) => setImmediate(r));
  t.same(calls, ['write', 'write'], 'and leaves nothing queued');
  t.same(
    (await got(2)).map((f) => (f.header as { id: number }).id),
    [1, 2],
  );
  a.destroy();
  w.push({ id: 3 });
  await new Promise((r) => setImmediate(r));
  t.same(calls, ['write', 'write'], 'nothing is written to a destroyed socket');
});
