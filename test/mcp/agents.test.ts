// Issue 13: MCP for real agents. No answer is too big for the SDK client (big files come in bounded,
// paged reads; search results are capped and paged, binary files skipped), and edit_file makes exact
// replacements that never overwrite a change the agent has not seen. Over stdio and Streamable HTTP.
import t, { type Test } from 'tap';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call, data, errorCode, httpClient, stdioClient, text, withCast, type ToolResult } from '../helpers/mcp.js';

const MiB = 1024 * 1024;
const ANSWER_MAX = MiB;
const cast = await withCast(t, { env: { SERVICE_MAX_FILE_SIZE: String(32 * MiB) } });
const { svc, daemon } = cast;
const alice = daemon.as({ authorization: 'User alice' });

// 12 MiB of text with 2- and 3-byte characters, so the cuts fall inside characters too.
const line = (i: number) => `line ${String(i).padStart(7, '0')}: año ñandú 日本語のテキスト — markdown\n`;
const parts: string[] = [];
let bytes = 0;
for (let i = 0; bytes < 12 * MiB; i++) {
  const l = line(i);
  parts.push(l);
  bytes += Buffer.byteLength(l);
}
const BIG = Buffer.from(parts.join(''), 'utf8');
const BIG_LINES = parts.length;
await alice.call('fs.write', { path: '/home/alice/big.md' }, { data: BIG });

function note(r: ToolResult): string {
  const c = r.content[1];
  return c && c.type === 'text' ? c.text : '';
}

/** Reads /home/alice/big.md page by page with read_file and checks each answer's bound and fields. */
async function pageThrough(t: Test, client: Client): Promise<void> {
  const first = await call(client, 'read_file', { path: 'big.md' });
  const d = data(first);
  t.equal(d.size, BIG.length, 'size is the whole file');
  t.equal(d.truncated, true, 'a 12 MiB file is cut');
  t.equal(d.offset, 0);
  t.ok(
    d.length <= ANSWER_MAX && d.length > ANSWER_MAX - 4,
    `one answer carries at most ${ANSWER_MAX} bytes (got ${d.length})`,
  );
  t.equal(d.next_offset, d.length);
  t.equal(d.content, undefined, 'the content is sent once (the text block), not again in structuredContent');
  t.match(note(first), /cut at 1048576 bytes per answer; read on with offset \d+/, 'a note says how to read on');
  const etag = d.etag as string;
  const got: Buffer[] = [Buffer.from(text(first), 'utf8')];
  let next: number | undefined = d.next_offset;
  let pages = 1;
  while (next !== undefined) {
    const r = data(await call(client, 'read_file', { path: 'big.md', offset: next, expected_etag: etag }));
    t.equal(r.offset, next);
    t.equal(r.encoding, 'utf8', `page at ${next} ends on a character boundary`);
    t.ok(r.length <= ANSWER_MAX);
    got.push(
      Buffer.from(text(await call(client, 'read_file', { path: 'big.md', offset: next, length: r.length })), 'utf8'),
    );
    next = r.next_offset;
    pages++;
    if (pages > 20) break;
  }
  t.equal(pages, 13, '12 MiB in 13 pages');
  t.ok(Buffer.concat(got).equals(BIG), 'the pages reassemble the exact bytes');
  // The session is alive: another call succeeds.
  t.equal(data(await call(client, 'list_directory', {})).path, '/home/alice', 'a later call succeeds');
}

void t.test('stdio: a 12 MiB file comes in bounded pages and the session survives', async (t) => {
  const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
  await pageThrough(t, client);
});

void t.test('HTTP /mcp: the same', async (t) => {
  const { client } = await httpClient(t, svc, { authorization: 'User alice' });
  await pageThrough(t, client);
});

void t.test(
  'resources/read: a file over the bound is refused with a pointer to read_file; the session survives',
  async (t) => {
    const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
    await t.rejects(client.readResource({ uri: 'mdvfs:///home/alice/big.md' }), {
      message:
        /EFBIG: the file is 12\d{6} bytes, more than one MCP answer carries \(1048576\); read it in parts with the read_file tool/,
      data: { code: 'EFBIG' },
    });
    await alice.call('fs.write', { path: '/home/alice/small.md' }, { data: Buffer.from('# small\n') });
    const r = await client.readResource({ uri: 'mdvfs:///home/alice/small.md' });
    t.same(
      r.contents,
      [{ uri: 'mdvfs:///home/alice/small.md', mimeType: 'text/markdown', text: '# small\n' }],
      'a small file is read whole, and the session is alive',
    );
  },
);

void t.test('read_file: head, tail, offset/length and their errors', async (t) => {
  const { client } = await httpClient(t, svc, { authorization: 'User alice' });
  const head = await call(client, 'read_file', { path: 'big.md', head: 3 });
  t.equal(text(head), line(0) + line(1) + line(2));
  t.equal(data(head).truncated, undefined, 'three lines fit');
  t.equal(data(head).next_offset, Buffer.byteLength(line(0) + line(1) + line(2)));
  const tail = await call(client, 'read_file', { path: 'big.md', tail: 2 });
  t.equal(text(tail), line(BIG_LINES - 2) + line(BIG_LINES - 1));
  t.equal(data(tail).next_offset, undefined, 'the tail reaches the end');
  t.equal(data(tail).offset + data(tail).length, BIG.length);
  const many = data(await call(client, 'read_file', { path: 'big.md', tail: 100000 }));
  t.equal(many.truncated, true, 'a tail over the bound is cut too');
  t.ok(many.length <= ANSWER_MAX);

  const mid = await call(client, 'read_file', { path: 'big.md', offset: 5, length: 10 });
  t.equal(text(mid), BIG.subarray(5, 15).toString('utf8'));
  t.equal(data(mid).truncated, undefined, 'the range asked for was returned whole');
  t.equal(data(mid).next_offset, 15);

  await alice.call('fs.write', { path: '/home/alice/lines.md' }, { data: Buffer.from('a\nb\nc') });
  t.equal(text(await call(client, 'read_file', { path: 'lines.md', tail: 1 })), 'c', 'last line without a newline');
  t.equal(
    text(await call(client, 'read_file', { path: 'lines.md', head: 5 })),
    'a\nb\nc',
    'more lines than the file has',
  );
  const whole = await call(client, 'read_file', { path: 'lines.md' });
  t.equal(whole.content.length, 1, 'a whole small file: one text block, no note');

  const both = await call(client, 'read_file', { path: 'lines.md', head: 1, tail: 1 });
  t.equal(errorCode(both), 'EINVAL');
  t.match(text(both), /head or tail, not both/);
  t.equal(errorCode(await call(client, 'read_file', { path: 'lines.md', head: 1, offset: 2 })), 'EINVAL');
  const stale = await call(client, 'read_file', { path: 'lines.md', offset: 2, expected_etag: 'f'.repeat(64) });
  t.equal(errorCode(stale), 'EPRECOND', 'paging with a stale etag fails');
  t.equal((stale._meta as { etag?: string }).etag, data(whole).etag, 'and says the current etag');
});

void t.test('search_files: 200 matches by default, pages by offset, binary files skipped', async (t) => {
  const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
  const body = Array.from({ length: 500 }, (_, i) => `match ${i}\n`).join('');
  await alice.call('fs.write', { path: '/home/alice/s/many.md' }, { data: Buffer.from(body) });
  await alice.call(
    'fs.write',
    { path: '/home/alice/s/blob.bin' },
    {
      data: Buffer.concat([
        Buffer.from('match in a binary\n'),
        Buffer.from([0, 1, 2, 255, 254]),
        Buffer.from('\nmatch again\n'),
      ]),
    },
  );
  const first = data(await call(client, 'search_files', { pattern: 'match', path: 's' }));
  t.equal(first.count, 200, 'capped at 200 by default');
  t.equal(first.truncated, true);
  t.equal(first.next_offset, 200);
  t.equal(first.skipped_binary, 1, 'the binary file is not searched');
  t.notOk(
    first.results.some((m: { file: string }) => m.file.endsWith('blob.bin')),
    'no garbage lines',
  );
  const seen = [...first.results];
  let next: number | undefined = first.next_offset;
  while (next !== undefined) {
    const page = data(await call(client, 'search_files', { pattern: 'match', path: 's', offset: next }));
    seen.push(...page.results);
    next = page.next_offset;
  }
  t.equal(seen.length, 500, 'the pages hold every match');
  t.same(
    seen.map((m: { line_num: number }) => m.line_num),
    Array.from({ length: 500 }, (_, i) => i + 1),
    'in order, none twice',
  );
  const last = data(
    await call(client, 'search_files', { pattern: 'match', path: 's', offset: 400, max_results: 1000 }),
  );
  t.equal(last.count, 100);
  t.equal(last.truncated, false);
  t.equal(last.next_offset, undefined, 'the last page says no more');

  // The answer's byte bound: 300 matches of 4 KiB lines (1.2 MB) do not all fit one answer.
  const wide = Array.from({ length: 300 }, (_, i) => `hit ${i} ${'x'.repeat(4000)}\n`).join('');
  await alice.call('fs.write', { path: '/home/alice/s/wide.md' }, { data: Buffer.from(wide) });
  const w = data(await call(client, 'search_files', { pattern: '^hit', path: 's/wide.md', max_results: 1000 }));
  t.ok(w.count < 300 && w.count > 200, `cut by bytes (${w.count} lines)`);
  t.equal(w.truncated, true);
  t.equal(w.next_offset, w.count);
});

void t.test('REST /search/grep: offset, next_offset, skipped_binary', async (t) => {
  const get = async (q: string) => {
    const res = await fetch(`${svc.base}/search/grep?${q}`, { headers: { authorization: 'User alice' } });
    t.equal(res.status, 200);
    return (await res.json()) as {
      results: { line_num: number }[];
      count: number;
      truncated: boolean;
      next_offset?: number;
      skipped_binary?: number;
    };
  };
  const a = await get('pattern=match&path=s&max_results=300');
  t.equal(a.count, 300);
  t.equal(a.truncated, true);
  t.equal(a.next_offset, 300);
  t.equal(a.skipped_binary, 1);
  const b = await get('pattern=match&path=s&max_results=300&offset=300');
  t.equal(b.count, 200);
  t.equal(b.results[0]!.line_num, 301);
  t.equal(b.truncated, false);
  t.equal(b.next_offset, undefined);
  const bad = await fetch(`${svc.base}/search/grep?pattern=x&offset=-1`, { headers: { authorization: 'User alice' } });
  t.equal(bad.status, 400);
});

void t.test('edit_file: exact replacements, a git-style diff, all or nothing', async (t) => {
  const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
  const original = '# Plan\n\n- buy milk\n- call bob\n- fix the roof\n';
  data(await call(client, 'write_file', { path: 'plan.md', content: original }));

  const dry = await call(client, 'edit_file', {
    path: 'plan.md',
    edits: [{ oldText: 'call bob', newText: 'call carol' }],
    dryRun: true,
  });
  t.equal(data(dry).dry_run, true);
  t.match(data(dry).diff, /-- call bob\n\+- call carol\n/);
  t.equal(text(await call(client, 'read_file', { path: 'plan.md' })), original, 'dryRun writes nothing');

  const r = await call(client, 'edit_file', {
    path: 'plan.md',
    edits: [
      { oldText: 'call bob', newText: 'call carol' },
      { oldText: '- fix the roof\n', newText: '- fix the roof\n- water plants\n' },
    ],
  });
  const d = data(r);
  t.equal(d.path, '/home/alice/plan.md');
  t.equal(d.dry_run, false);
  t.equal(
    d.diff,
    [
      '--- a/home/alice/plan.md',
      '+++ b/home/alice/plan.md',
      '@@ -1,5 +1,6 @@',
      ' # Plan',
      ' ',
      ' - buy milk',
      '-- call bob',
      '+- call carol',
      ' - fix the roof',
      '+- water plants',
      '',
    ].join('\n'),
    'the unified diff',
  );
  t.match(text(r), /^Edited \/home\/alice\/plan\.md\.\n```diff\n--- a\//, 'the text block shows the diff in a fence');
  const now = '# Plan\n\n- buy milk\n- call carol\n- fix the roof\n- water plants\n';
  const read = await call(client, 'read_file', { path: 'plan.md' });
  t.equal(text(read), now);
  t.equal(data(read).etag, d.etag, 'the answer gives the new etag');

  const missing = await call(client, 'edit_file', {
    path: 'plan.md',
    edits: [
      { oldText: 'call carol', newText: 'x' },
      { oldText: 'call dave', newText: 'y' },
    ],
  });
  t.equal(errorCode(missing), 'EINVAL');
  t.match(
    text(missing),
    /edit 2 of 2: oldText "call dave" is not in the file .*nothing was written, edit '\/home\/alice\/plan\.md'/,
  );
  const twice = await call(client, 'edit_file', { path: 'plan.md', edits: [{ oldText: '- ', newText: '* ' }] });
  t.equal(errorCode(twice), 'EINVAL');
  t.match(text(twice), /oldText "- " occurs 4 times/);
  t.equal(
    errorCode(await call(client, 'edit_file', { path: 'plan.md', edits: [{ oldText: '', newText: 'x' }] })),
    'EINVAL',
  );
  t.equal(text(await call(client, 'read_file', { path: 'plan.md' })), now, 'failed edits leave the content as it was');

  // Someone else changes the file after the agent read it: the agent's etag is stale.
  await alice.call('fs.write', { path: '/home/alice/plan.md' }, { data: Buffer.from(now + '- from REST\n') });
  const cur = (await alice.request('fs.read', { path: '/home/alice/plan.md' })).result.etag;
  const stale = await call(client, 'edit_file', {
    path: 'plan.md',
    edits: [{ oldText: 'buy milk', newText: 'buy oat milk' }],
    expected_etag: d.etag,
  });
  t.equal(errorCode(stale), 'EPRECOND');
  t.match(text(stale), new RegExp(`etag is now ${cur}`), 'the error gives the current etag');
  t.equal((stale._meta as { etag?: string }).etag, cur);
  const w = await call(client, 'write_file', { path: 'plan.md', content: 'overwrite', expected_etag: d.etag });
  t.equal(errorCode(w), 'EPRECOND', 'write_file refuses a stale etag too');
  t.equal((w._meta as { etag?: string }).etag, cur);
  t.equal(text(await call(client, 'read_file', { path: 'plan.md' })), now + '- from REST\n', 'nothing was written');
  const fresh = data(
    await call(client, 'edit_file', {
      path: 'plan.md',
      edits: [{ oldText: 'buy milk', newText: 'buy oat milk' }],
      expected_etag: cur,
    }),
  );
  t.match(fresh.diff, /\+- buy oat milk/, 'with the current etag the edit applies');

  // A big file: the diff is of the changed lines, numbered as in the whole file.
  const k = 100000;
  const big = await call(client, 'edit_file', {
    path: 'big.md',
    edits: [{ oldText: line(k), newText: line(k).replace('año', 'AÑO') }],
    dryRun: true,
  });
  t.equal(
    data(big).diff,
    [
      '--- a/home/alice/big.md',
      '+++ b/home/alice/big.md',
      `@@ -${k - 2},7 +${k - 2},7 @@`,
      ...[k - 3, k - 2, k - 1].map((i) => ` ${line(i)}`),
      `-${line(k)}`,
      `+${line(k).replace('año', 'AÑO')}`,
      ...[k + 1, k + 2, k + 3].map((i) => ` ${line(i)}`),
    ]
      .join('\n')
      .replace(/\n\n/g, '\n'),
    'a one-line edit in a 12 MiB file: one hunk at the right line',
  );

  // Not text: refused.
  await alice.call('fs.write', { path: '/home/alice/bin.dat' }, { data: Buffer.from([0xff, 0xfe, 0x00]) });
  t.equal(
    errorCode(await call(client, 'edit_file', { path: 'bin.dat', edits: [{ oldText: 'a', newText: 'b' }] })),
    'EINVAL',
  );
  // Permissions still apply (the read and the write go through the daemon as alice).
  const denied = await call(client, 'edit_file', { path: '/home/bob/x.md', edits: [{ oldText: 'a', newText: 'b' }] });
  t.ok(denied.isError);

  const { tools } = await client.listTools();
  const edit = tools.find((x) => x.name === 'edit_file')!;
  t.same(edit.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false });
});

void t.test('get_history: long commit messages are bounded too; the session survives', async (t) => {
  const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
  // 90 commits with 100,000-character messages: 9 MB of messages, twice that as text plus structuredContent.
  for (let i = 0; i < 90; i++) {
    await alice.call('fs.write', { path: '/home/alice/log.md' }, { data: Buffer.from(`v${i}\n`) });
    await alice.call('vcs.commit', { message: `commit ${i} ${'m'.repeat(99990)}` });
  }
  const r = await call(client, 'get_history', { limit: 90 });
  const d = data(r);
  t.equal(d.truncated, true, 'cut');
  t.ok(d.commits.length >= 1 && d.commits.length < 10, `only what fits one answer (${d.commits.length} commits)`);
  t.match(d.commits[0].message, /^commit 89 /, 'newest first');
  t.match(
    text(r),
    /newest shown; pass a path or a smaller limit\)\n\(older commits: pass cursor [0-9a-f]{12}\)$/,
    'the text says how to go on',
  );
  t.equal(d.next_cursor, d.commits[d.commits.length - 1].hash, 'next_cursor: the oldest commit shown');
  const more = data(await call(client, 'get_history', { limit: 90, cursor: d.next_cursor }));
  t.match(
    more.commits[0].message,
    new RegExp(`^commit ${89 - d.commits.length} `),
    'the cursor goes on with the next older commit',
  );
  t.equal(data(await call(client, 'list_directory', {})).path, '/home/alice', 'a later call succeeds');
});

void t.test('find_files: at most 1 MiB of paths per answer; the session survives', async (t) => {
  const { client } = await stdioClient(t, svc.dataDir, { SERVICE_AS_USER: 'alice' });
  // 12,000 paths of 173 characters (493 bytes: CJK names), more than the daemon's 2 M-character cut
  // lets through; as text plus structuredContent that was over 11 MB, past the SDK client's limit.
  const dir = `/home/alice/${'名'.repeat(80)}`;
  const cjk = (i: number) => String.fromCharCode(0x4e00 + ((i >> 8) & 0xff), 0x4e00 + (i & 0xff));
  for (let b = 0; b < 12000; b += 500) {
    await Promise.all(
      Array.from({ length: 500 }, (_, k) =>
        alice.call('fs.write', { path: `${dir}/${cjk(b + k)}${'字'.repeat(78)}` }, { data: Buffer.alloc(0) }),
      ),
    );
  }
  const r = await call(client, 'find_files', { path: dir, type: 'f' });
  const d = data(r);
  t.equal(d.truncated, true, 'cut');
  t.equal(d.count, d.results.length);
  t.ok(d.count > 500 && d.count < 2000, `at most 1 MiB of paths (${d.count} of them)`);
  t.match(text(r), /truncated after \d+ results; narrow the path or the name\)$/);
  t.equal(data(await call(client, 'list_directory', {})).path, '/home/alice', 'a later call succeeds');
});
