/**
 * FrameWriter: the frames queued in one event-loop turn leave together, in order, in one corked
 * write (one writev) after the turn; flush() writes at once; a destroyed socket gets nothing.
 * Checked on a real Unix socket pair, with the writing side's socket calls recorded. And DaemonClient's
 * reading: replies with large data are read straight into a buffer of their own.
 */
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import t, { type Test } from 'tap';
import { connectSocket } from '../../daemon/rpc/client.js';
import { encodeFrame, FrameDecoder, FrameWriter, type Frame } from '../../daemon/rpc/framing.js';

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

t.test('DaemonClient reads large replies straight into their own buffer, small ones as before', async (t) => {
  const sockPath = path.join(dir, 'client');
  const sizes = [0, 10, 70 * 1024, 3 * 1024 * 1024 + 5, 100, 64 * 1024 - 1, 5 * 1024 * 1024, 64 * 1024];
  const bodies = sizes.map((n, i) => Buffer.alloc(n, i + 1).fill(0xee, Math.max(0, n - 3)));
  const server = net.createServer((s) => {
    const decoder = new FrameDecoder();
    s.on('data', (chunk: Buffer) => {
      for (const { header } of decoder.push(chunk)) {
        const { id } = header as { id: number };
        if (id !== sizes.length) continue;
        // Every reply in one buffer, written in pieces of odd sizes: frames and headers cut anywhere.
        const all = Buffer.concat(bodies.flatMap((b, k) => encodeFrame({ id: k + 1, result: { n: b.length } }, b)));
        const bad = Buffer.from('{"id":');
        const head = Buffer.alloc(8);
        head.writeUInt32BE(bad.length, 0);
        head.writeUInt32BE(70000, 4);
        const broken = Buffer.concat([head, bad, Buffer.alloc(70000)]); // not JSON, large data
        const rest = Buffer.concat([
          broken,
          ...encodeFrame({ id: sizes.length + 1, result: { n: 1 } }, Buffer.from('z')),
        ]);
        let off = 0;
        for (let piece = 1; off < all.length; piece = (piece * 7 + 13) % 300000) {
          s.write(all.subarray(off, off + piece + 1));
          off += piece + 1;
        }
        s.write(rest);
      }
    });
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const client = await connectSocket(sockPath);
  t.teardown(() => client.close());
  const errors: Error[] = [];
  client.on('protocol-error', (e: Error) => errors.push(e));
  const replies = await Promise.all([
    ...sizes.map(() => client.request('sys.health', {})),
    client.request('sys.health', {}),
  ]);
  sizes.forEach((n, k) => {
    const data = replies[k]!.data;
    t.ok(data.equals(bodies[k]!), `reply ${k + 1} (${n} bytes) arrived whole and in order`);
    // Larger than one socket read can be: read into its own buffer, not joined from pieces.
    if (n > 1024 * 1024) t.equal(data.byteOffset === 0 && data.buffer.byteLength, n, `its own buffer (${n} bytes)`);
  });
  t.equal(replies[sizes.length]!.data.toString(), 'z', 'the reply after a large frame whose header is not JSON');
  t.equal(errors.length, 1, 'that frame is reported as a protocol error, the stream stays in sync');
});

t.test('DaemonClient reads a large reply into the buffer its request brought (`into`), when it fits', async (t) => {
  const sockPath = path.join(dir, 'into');
  const sizes = [3 * 1024 * 1024 + 7, 2 * 1024 * 1024, 100, 200 * 1024];
  const bodies = sizes.map((n, i) => Buffer.alloc(n, i + 1).fill(0xee, n - 3));
  const server = net.createServer((s) => {
    const decoder = new FrameDecoder();
    s.on('data', (chunk: Buffer) => {
      for (const { header } of decoder.push(chunk)) {
        const { id } = header as { id: number };
        const all = Buffer.concat(encodeFrame({ id, result: {} }, bodies[id - 1]));
        // In pieces, so the data arrives over many socket reads.
        for (let off = 0; off < all.length; off += 100000) s.write(all.subarray(off, off + 100000));
      }
    });
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const client = await connectSocket(sockPath);
  t.teardown(() => client.close());
  const big = Buffer.alloc(4 * 1024 * 1024);
  const small = Buffer.alloc(1024 * 1024);
  const other = Buffer.alloc(4 * 1024 * 1024);
  const [a, b, c, d] = await Promise.all([
    client.request('sys.health', {}, { into: big }),
    client.request('sys.health', {}, { into: small }),
    client.request('sys.health', {}, { into: Buffer.alloc(4096) }),
    client.request('sys.health', {}, { into: other }),
  ]);
  [a, b, c, d].forEach((r, k) => t.ok(r.data.equals(bodies[k]!), `reply ${k + 1} (${sizes[k]} bytes) arrived whole`));
  t.ok(a.data.buffer === big.buffer && a.data.byteOffset === big.byteOffset, 'a large reply is a view of `into`');
  t.ok(big.subarray(0, sizes[0]).equals(bodies[0]!), 'whose bytes are the reply');
  t.not(b.data.buffer, small.buffer, 'a reply larger than `into` gets a buffer of its own');
  t.ok(small.equals(Buffer.alloc(1024 * 1024)), '`into` too small is left untouched');
  t.ok(d.data.buffer === other.buffer, 'each request its own `into`');
});
