/**
 * grep, find and tree through the daemon: options, ordering, errors.
 */
import t from 'tap';
import { text } from '../helpers/daemon.js';
import { quickCore } from '../vcs/lib.js';
import type { Caller } from '../../daemon/rpc/client.js';

async function fixture(r: Caller): Promise<void> {
  const files: Record<string, string> = {
    '/srv/s/a.md': '# Alpha\nthe Needle is here\nnothing\nneedle again, needle twice\n',
    '/srv/s/b.txt': 'no match\nNEEDLE shouting\n',
    '/srv/s/c.md': 'plain\n',
    '/srv/s/d/e.md': 'needle deep\n',
    '/srv/s/d/f/g.md': '# Gamma\nneedle deeper\n',
    '/srv/s/.hidden.md': 'needle hidden\n',
    '/srv/s/z.md': 'ünïcödé needle\nline2',
  };
  await Promise.all(Object.entries(files).map(([p, body]) => r.call('fs.write', { path: p }, text(body))));
  await r.call('fs.mkdir', { path: '/srv/s/dir.md' });
  await r.call('fs.symlink', { target: 'a.md', path: '/srv/s/link' });
}

t.test('grep', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await fixture(r);

  const flat = await r.call('search.grep', { pattern: 'needle', path: '/srv/s' });
  t.same(
    flat.results,
    [
      { file: '/srv/s/.hidden.md', line_num: 1, line: 'needle hidden' },
      { file: '/srv/s/a.md', line_num: 4, line: 'needle again, needle twice' },
      { file: '/srv/s/z.md', line_num: 1, line: 'ünïcödé needle' },
    ],
    "not recursive by default: only the directory's own files; 1-based line numbers, one result per line",
  );
  t.equal(flat.count, 3);
  t.equal(flat.truncated, false);

  const deep = await r.call('search.grep', { pattern: 'needle', path: '/srv/s', recursive: true });
  t.same(
    deep.results.map((m) => `${m.file}:${m.line_num}`),
    ['/srv/s/.hidden.md:1', '/srv/s/a.md:4', '/srv/s/d/e.md:1', '/srv/s/d/f/g.md:2', '/srv/s/z.md:1'],
    'recursive, in path order',
  );

  const ci = await r.call('search.grep', { pattern: 'needle', path: '/srv/s', recursive: true, ignore_case: true });
  t.same(
    ci.results.map((m) => `${m.file}:${m.line_num}`),
    [
      '/srv/s/.hidden.md:1',
      '/srv/s/a.md:2',
      '/srv/s/a.md:4',
      '/srv/s/b.txt:2',
      '/srv/s/d/e.md:1',
      '/srv/s/d/f/g.md:2',
      '/srv/s/z.md:1',
    ],
    'ignore_case',
  );

  const capped = await r.call('search.grep', {
    pattern: 'needle',
    path: '/srv/s',
    recursive: true,
    ignore_case: true,
    max_results: 3,
  });
  t.equal(capped.count, 3);
  t.equal(capped.truncated, true, 'more matches than max_results');
  t.same(capped.results, ci.results.slice(0, 3), 'the first matches in path order');
  const exact = await r.call('search.grep', {
    pattern: 'needle',
    path: '/srv/s',
    recursive: true,
    ignore_case: true,
    max_results: 7,
  });
  t.equal(exact.truncated, false, 'exactly max_results matches is not truncated');

  t.same(
    (await r.call('search.grep', { pattern: '^# [A-Z]', path: '/srv/s', recursive: true })).results,
    [
      { file: '/srv/s/a.md', line_num: 1, line: '# Alpha' },
      { file: '/srv/s/d/f/g.md', line_num: 1, line: '# Gamma' },
    ],
    'anchors apply per line',
  );
  t.same(
    (await r.call('search.grep', { pattern: 'line2$', path: '/srv/s/z.md' })).results,
    [{ file: '/srv/s/z.md', line_num: 2, line: 'line2' }],
    'a file path; a last line without newline',
  );
  t.same(
    (await r.call('search.grep', { pattern: 'c\\u00f6d', path: '/srv/s/z.md' })).results.length,
    1,
    'JavaScript regex syntax, Unicode',
  );
  t.same(
    (await r.call('search.grep', { pattern: 'Alpha', path: '/srv/s/link' })).results.map((m) => m.line_num),
    [1],
    'a symlink to a file is followed',
  );
  t.same((await r.call('search.grep', { pattern: 'absent-word', path: '/srv/s', recursive: true })).results, []);
  // path order is sorted paths: '.' sorts before '/', so sub.md comes before sub/x.md
  await r.call('fs.write', { path: '/srv/o/sub/x.md' }, text('hit\n'));
  await r.call('fs.write', { path: '/srv/o/sub.md' }, text('hit\n'));
  await r.call('fs.write', { path: '/srv/o/sub-b.md' }, text('hit\n'));
  const ordered = ['/srv/o/sub-b.md', '/srv/o/sub.md', '/srv/o/sub/x.md'];
  t.same(
    (await r.call('search.grep', { pattern: 'hit', path: '/srv/o', recursive: true })).results.map((m) => m.file),
    ordered,
    'grep: sorted paths',
  );
  t.same((await r.call('search.find', { path: '/srv/o', name: '*.md' })).results, ordered, 'find: sorted paths');
  await r.call('fs.write', { path: '/srv/e/empty.md' }, text(''));
  await r.call('fs.write', { path: '/srv/e/blank.md' }, text('x\n\ny\n'));
  t.same(
    (await r.call('search.grep', { pattern: '^$', path: '/srv/e' })).results,
    [{ file: '/srv/e/blank.md', line_num: 2, line: '' }],
    'an empty file has no lines; the final newline does not make one',
  );

  for (const pattern of ['(unclosed', '[z-a]', '*x', ''])
    await t.rejects(
      r.call('search.grep', { pattern, path: '/srv/s' }),
      { code: 'EINVAL' },
      `invalid pattern ${JSON.stringify(pattern)}`,
    );
  await t.rejects(r.call('search.grep', { pattern: 'x', path: '/srv/nope' }), { code: 'ENOENT' });

  // relative paths resolve at the caller's home, and results show what the caller wrote as absolute
  const alice = await d.client.as({}).call('admin.userAdd', { name: 'alice' });
  const a = d.client.as({ authorization: 'User alice' });
  await a.call('fs.write', { path: 'notes/n.md' }, text('find me\n'));
  t.same((await a.call('search.grep', { pattern: 'find me', path: 'notes' })).results, [
    { file: `${alice.home}/notes/n.md`, line_num: 1, line: 'find me' },
  ]);
  t.equal((await a.call('search.grep', { pattern: 'find me', recursive: true })).count, 1, 'no path means home');
});

t.test('find', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await fixture(r);
  const find = async (p: { name?: string; type?: 'f' | 'd' | 'l'; path?: string }) =>
    (await r.call('search.find', { path: '/srv/s', ...p })).results;

  t.same(
    await find({ name: '*.md' }),
    [
      '/srv/s/.hidden.md',
      '/srv/s/a.md',
      '/srv/s/c.md',
      '/srv/s/d/e.md',
      '/srv/s/d/f/g.md',
      '/srv/s/dir.md',
      '/srv/s/z.md',
    ],
    '*.md at any depth, path order',
  );
  t.same(
    await find({ name: '*.md', type: 'f' }),
    ['/srv/s/.hidden.md', '/srv/s/a.md', '/srv/s/c.md', '/srv/s/d/e.md', '/srv/s/d/f/g.md', '/srv/s/z.md'],
    'type f',
  );
  t.same(await find({ type: 'd' }), ['/srv/s/d', '/srv/s/d/f', '/srv/s/dir.md'], 'type d');
  t.same(await find({ type: 'l' }), ['/srv/s/link'], 'type l');
  t.same(
    await find({ name: '?.md', type: 'f' }),
    ['/srv/s/a.md', '/srv/s/c.md', '/srv/s/d/e.md', '/srv/s/d/f/g.md', '/srv/s/z.md'],
    '? is one character',
  );
  t.same(await find({ name: '{a,z}.*' }), ['/srv/s/a.md', '/srv/s/z.md'], 'braces');
  t.same(await find({ name: '[b-c]*' }), ['/srv/s/b.txt', '/srv/s/c.md'], 'classes');
  t.same(await find({ name: '*.MD' }), [], 'case-sensitive like find -name');
  t.same(
    await find({ name: 'd/**/*.md' }),
    ['/srv/s/d/e.md', '/srv/s/d/f/g.md'],
    'a pattern with / matches the path below the start',
  );
  const r2 = await r.call('search.find', { path: '/srv/s/a.md', name: '*.md' });
  t.same(r2, { results: ['/srv/s/a.md'], count: 1 }, 'a file as the start');
  await t.rejects(r.call('search.find', { path: '/srv/none', name: '*' }), { code: 'ENOENT' });
});

t.test('tree', async (t) => {
  const d = await quickCore(t);
  const r = d.client.as({});
  await r.call('fs.write', { path: '/srv/t/a.md' }, text('a'));
  await r.call('fs.write', { path: '/srv/t/d/b.md' }, text('b'));
  await r.call('fs.symlink', { target: '../a.md', path: '/srv/t/d/ln' });
  await r.call('fs.write', { path: '/srv/t/z.md' }, text('z'));
  const full = await r.call('search.tree', { path: '/srv/t' });
  t.equal(
    full.text,
    [
      '/srv/t',
      '├── a.md',
      '├── d',
      '│   ├── b.md',
      '│   └── ln -> ../a.md',
      '└── z.md',
      '',
      '1 directory, 4 files',
      '',
    ].join('\n'),
  );
  t.equal(full.directories, 1);
  t.equal(full.files, 4);
  const shallow = await r.call('search.tree', { path: '/srv/t', depth: 1 });
  t.equal(
    shallow.text,
    ['/srv/t', '├── a.md', '├── d', '└── z.md', '', '1 directory, 2 files', ''].join('\n'),
    'depth 1 like tree -L 1',
  );
  await t.rejects(r.call('search.tree', { path: '/srv/t/a.md' }), { code: 'ENOTDIR' });
});
