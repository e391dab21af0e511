/**
 * The crash test's writer: a separate process that performs writes over the daemon socket in a
 * loop and prints, as it happens, every write it sends and how it ended. The parent kills the
 * daemon under it and checks that every acknowledged write survived.
 *
 *   node --import tsx test/e2e/crash-writer.ts <dataDir> [mixed]
 *
 * With "mixed" it instead runs random writes, moves, copies, deletes, mkdirs and chmods under
 * /mixed and prints "M" for each acknowledged one (their outcome is checked through fsck and a
 * full reload, not byte for byte).
 *
 * stdout (one line each, written before the next step so the parent never misses one):
 *   S <seq> <path> <sha256>   about to send this content to this path
 *   A <seq>                   the daemon acknowledged it
 *   F <seq>                   it failed (the connection died); it may or may not have happened
 *   P                         paused: nothing is in flight (after "PAUSE" on stdin)
 * stdin: "PAUSE" / "RESUME" lines.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { connectSocket, type DaemonClient } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';

const dataDir = process.argv[2];
if (dataDir === undefined) throw new Error('usage: crash-writer <dataDir>');
const sock = socketPathFor(dataDir);
const CONCURRENCY = 4;
const PATHS = Array.from({ length: 40 }, (_, k) => `/crash/d${k % 5}/f${k}.md`);
// a few contents recur, so content shared between files (one blob) is exercised too
const SHARED = Array.from({ length: 3 }, (_, k) => Buffer.from(`shared content ${k}\n`));

let client: DaemonClient | undefined;
let connecting: Promise<DaemonClient> | undefined;
let seq = 0;
let inflight = 0;
let paused = false;
let wake: (() => void)[] = [];

const out = (line: string): void => {
  process.stdout.write(line + '\n');
};

async function connected(): Promise<DaemonClient> {
  if (client !== undefined && !client.isClosed) return client;
  connecting ??= (async () => {
    for (;;) {
      try {
        const c = await connectSocket(sock);
        c.on('socket-error', () => undefined);
        client = c;
        return c;
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  })().finally(() => {
    connecting = undefined;
  });
  return connecting;
}

function content(): Buffer {
  const r = randomInt(10);
  if (r === 0) return SHARED[randomInt(SHARED.length)]!;
  if (r === 1) return Buffer.alloc(0);
  return randomBytes(randomInt(1, 16 * 1024));
}

const MIXED = process.argv[3] === 'mixed';
const mixedPath = (): string => `/mixed/${'abc'[randomInt(3)]}/${'xyz'[randomInt(3)]}/${randomInt(6)}.md`;
const mixedDir = (): string => `/mixed/${'abc'[randomInt(3)]}/${'xyz'[randomInt(3)]}`;

/** One random operation; failures such as ENOENT or ENOTEMPTY are expected and fine. */
function mixedOp(c: DaemonClient): Promise<unknown> {
  const r = randomInt(100);
  if (r < 40) return c.call('fs.write', { path: mixedPath() }, { data: content() });
  if (r < 55) return c.call('fs.move', { src: mixedPath(), dst: mixedPath() });
  if (r < 62) return c.call('fs.move', { src: mixedDir(), dst: mixedDir() });
  if (r < 70) return c.call('fs.copy', { src: mixedDir(), dst: mixedDir(), recursive: true });
  if (r < 80) return c.call('fs.delete', { path: mixedPath() });
  if (r < 85) return c.call('fs.delete', { path: mixedDir(), recursive: true });
  if (r < 92) return c.call('fs.mkdir', { path: mixedDir(), parents: true });
  return c.call('fs.chmod', { path: mixedPath(), mode: randomInt(2) === 0 ? '0600' : '0644' });
}

async function mixedWorker(): Promise<void> {
  for (;;) {
    while (paused) await new Promise<void>((r) => wake.push(r));
    const c = await connected();
    if (paused) continue;
    inflight++;
    try {
      await mixedOp(c);
      out('M');
    } catch (err) {
      if (c.isClosed) {
        if (client === c) client = undefined;
      } else if ((err as { code?: string }).code === 'EIO') out(`E ${(err as Error).message}`);
    } finally {
      inflight--;
    }
  }
}

async function worker(): Promise<void> {
  for (;;) {
    while (paused) await new Promise<void>((r) => wake.push(r));
    const c = await connected();
    if (paused) continue;
    const n = ++seq;
    const path = PATHS[randomInt(PATHS.length)]!;
    const data = content();
    inflight++;
    out(`S ${n} ${path} ${createHash('sha256').update(data).digest('hex')}`);
    try {
      await c.call('fs.write', { path }, { data });
      out(`A ${n}`);
    } catch {
      out(`F ${n}`);
      if (c.isClosed && client === c) client = undefined;
    } finally {
      inflight--;
    }
  }
}

async function pause(): Promise<void> {
  paused = true;
  while (inflight > 0) await new Promise((r) => setTimeout(r, 5));
  out('P');
}

let buf = '';
process.stdin.on('data', (b: Buffer) => {
  buf += b.toString();
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const cmd = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (cmd === 'PAUSE') void pause();
    if (cmd === 'RESUME') {
      paused = false;
      const w = wake;
      wake = [];
      for (const f of w) f();
    }
  }
});
// The parent went away: stop.
process.stdin.on('end', () => process.exit(0));

for (let i = 0; i < CONCURRENCY; i++) void (MIXED ? mixedWorker() : worker());
