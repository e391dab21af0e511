/**
 * The crash rounds (DESIGN.md §6), shared by crash.test.ts (the default store) and
 * crash-postgres.test.ts: a writer process performs acknowledged writes over the socket (and a
 * second one every other kind of mutation) while the daemon is killed with SIGKILL at random
 * points. After every restart each acknowledged write is present byte for byte (the last
 * acknowledged content of each path, or a later write that was in flight when the daemon died),
 * and fsck finds no problem.
 */
import type { Test } from 'tap';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { CLI, ROOT_DIR, sha256, type TestDaemon } from './daemon.js';

const ABSENT = 'absent';

interface Write {
  seq: number;
  path: string;
  sha: string;
  state: 'sent' | 'acked' | 'failed';
}

/** Follows the writer's stdout: every write it sent, in order, and how each ended. */
class WriterLog {
  readonly writes = new Map<number, Write>();
  readonly byPath = new Map<string, Write[]>();
  acked = 0;
  /** mixed mode: acknowledged operations, and internal errors reported */
  mixed = 0;
  readonly internal: string[] = [];
  private pauses = 0;
  private buf = '';
  private waiters: (() => void)[] = [];

  feed(chunk: string): void {
    this.buf += chunk;
    let i;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      const [kind, a, b, c] = line.split(' ');
      if (kind === 'S') {
        const w: Write = { seq: Number(a), path: b!, sha: c!, state: 'sent' };
        this.writes.set(w.seq, w);
        const list = this.byPath.get(w.path) ?? [];
        list.push(w);
        this.byPath.set(w.path, list);
      } else if (kind === 'A' || kind === 'F') {
        const w = this.writes.get(Number(a));
        if (w === undefined) throw new Error(`writer reported an unknown write: ${line}`);
        w.state = kind === 'A' ? 'acked' : 'failed';
        if (kind === 'A') this.acked++;
      } else if (kind === 'M') {
        this.mixed++;
      } else if (kind === 'E') {
        this.internal.push(line);
      } else if (kind === 'P') {
        this.pauses++;
        for (const f of this.waiters.splice(0)) f();
      }
    }
  }

  /** Resolves at the next "P" line. */
  nextPause(): Promise<void> {
    const want = this.pauses + 1;
    return new Promise((resolve) => {
      const check = () => (this.pauses >= want ? resolve() : this.waiters.push(check));
      check();
    });
  }

  /**
   * What a path may hold now (nothing in flight): the content of its last acknowledged write, or
   * of a write sent after it that failed (it may have reached the disk before the crash).
   */
  allowed(p: string): Set<string> {
    const list = this.byPath.get(p) ?? [];
    let last = -1;
    for (let i = 0; i < list.length; i++) if (list[i]!.state === 'acked') last = i;
    const ok = new Set<string>(last < 0 ? [ABSENT] : [list[last]!.sha]);
    for (let i = last + 1; i < list.length; i++) {
      if (list[i]!.state === 'sent') throw new Error(`write ${list[i]!.seq} still in flight after a pause`);
      ok.add(list[i]!.sha);
    }
    return ok;
  }
}

/** Runs `rounds` kill -9 rounds against the daemon `d` and checks every acknowledged write after each. */
export async function crashRounds(t: Test, d: TestDaemon, rounds: number): Promise<void> {
  const log = new WriterLog();
  const writer: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT_DIR, 'test', 'e2e', 'crash-writer.ts'), d.dataDir],
    { cwd: ROOT_DIR, env: process.env },
  );
  let writerErr = '';
  writer.stdout.setEncoding('utf8').on('data', (s: string) => log.feed(s));
  writer.stderr.on('data', (b: Buffer) => (writerErr += b.toString()));
  // a second writer runs every other kind of mutation at the same time
  const mixedLog = new WriterLog();
  const mixer: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT_DIR, 'test', 'e2e', 'crash-writer.ts'), d.dataDir, 'mixed'],
    { cwd: ROOT_DIR, env: process.env },
  );
  mixer.stdout.setEncoding('utf8').on('data', (s: string) => mixedLog.feed(s));
  mixer.stderr.on('data', (b: Buffer) => (writerErr += b.toString()));
  t.teardown(() => {
    for (const w of [writer, mixer]) {
      w.stdin.end();
      w.kill('SIGKILL');
    }
  });
  const send = (cmd: string) => {
    writer.stdin.write(cmd + '\n');
    mixer.stdin.write(cmd + '\n');
  };

  // the writer is up and writing before the first kill
  while (log.acked < 20) {
    if (writer.exitCode !== null) throw new Error(`writer exited: ${writerErr}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  let roundsWithAcks = 0;
  for (let round = 1; round <= rounds; round++) {
    const ackedBefore = log.acked;
    send('RESUME');
    await new Promise((r) => setTimeout(r, randomInt(20, 301)));
    await d.kill('SIGKILL');
    await d.restart();
    const paused = Promise.all([log.nextPause(), mixedLog.nextPause()]);
    send('PAUSE');
    await paused;
    if (log.acked > ackedBefore) roundsWithAcks++;

    const root = d.client.as({});
    let checked = 0;
    const bad: string[] = [];
    for (const p of log.byPath.keys()) {
      let actual = ABSENT;
      try {
        actual = sha256((await root.request('fs.read', { path: p })).data);
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOENT') throw err;
      }
      if (!log.allowed(p).has(actual))
        bad.push(
          `${p}: has ${actual.slice(0, 12)}, allowed ${[...log.allowed(p)].map((s) => s.slice(0, 12)).join(',')}`,
        );
      checked++;
    }
    t.same(
      bad,
      [],
      `round ${round}: ${checked} paths hold their last acknowledged content (${log.acked} acknowledged writes so far)`,
    );
    // the mixed writer's tree loads and lists fully, every file readable
    const found = await root.call('search.find', { path: '/', type: 'f' });
    for (const f of found.results.filter((x) => x.startsWith('/mixed/'))) await root.call('fs.read', { path: f });
    t.same(mixedLog.internal, [], `round ${round}: no internal errors`);
    const fsck = await root.call('sys.fsck', {});
    t.same(fsck.problems, [], `round ${round}: fsck finds no problem`);
    t.equal(fsck.ok, true);
  }
  t.ok(log.acked > rounds, `writes were acknowledged throughout (${log.acked})`);
  t.ok(roundsWithAcks > 0, `${roundsWithAcks} of ${rounds} rounds acknowledged writes before the kill`);
  t.ok(mixedLog.mixed > rounds, `other mutations were acknowledged throughout (${mixedLog.mixed})`);

  // `mdvfs fsck` itself, against the daemon after the last restart
  const r = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const p = spawn(process.execPath, [CLI, 'fsck'], { env: d.env, cwd: ROOT_DIR });
    let out = '';
    let err = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr.on('data', (b: Buffer) => (err += b.toString()));
    p.on('exit', (code) => resolve({ code, out, err }));
  });
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^fsck: ok/);
  t.equal(writer.exitCode, null, `the writer kept running: ${writerErr}`);
  t.equal(mixer.exitCode, null, `the mixed writer kept running: ${writerErr}`);
}
