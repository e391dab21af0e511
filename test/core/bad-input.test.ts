/**
 * Bad input is refused with a typed error and changes nothing: names, paths, users, groups,
 * modes, credentials. Tokens: format, hashing at rest, regeneration.
 */
import t, { type Test } from 'tap';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Caller } from '../../daemon/rpc/client.js';
import { authSnapshot, makePersonas, spawnDaemon, text, treeSnapshot } from '../helpers/daemon.js';

t.test('bad input', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root, alice } = p;
  await alice.call('fs.write', { path: 'file.md' }, text('a file'));
  await root.call('fs.write', { path: '/tmp/file.md' }, text('tmp file'));

  /** Every call must be refused with `code`, and neither the tree nor the user tables may change. */
  const refuses = async (t: Test, cases: [string, () => Promise<unknown>, string][]): Promise<void> => {
    const tree = await treeSnapshot(root);
    const auth = await authSnapshot(root);
    for (const [what, fn, code] of cases) await t.rejects(fn(), { code }, what);
    t.equal(await treeSnapshot(root), tree, 'the tree is unchanged');
    t.equal(await authSnapshot(root), auth, 'users, groups and workspaces are unchanged');
  };

  t.test('names: empty, overlong, NUL, "." and ".."', async (t) => {
    const long = 'n'.repeat(256);
    const longUtf8 = 'é'.repeat(128); // 256 bytes in UTF-8
    await refuses(t, [
      ['256-byte name (write)', () => alice.call('fs.write', { path: long }, text('x')), 'ENAMETOOLONG'],
      [
        '256-byte UTF-8 name (write)',
        () => alice.call('fs.write', { path: `d/${longUtf8}` }, text('x')),
        'ENAMETOOLONG',
      ],
      [
        'overlong directory component',
        () => alice.call('fs.write', { path: `new/${long}/x.md` }, text('x')),
        'ENAMETOOLONG',
      ],
      ['overlong name (mkdir)', () => alice.call('fs.mkdir', { path: long }), 'ENAMETOOLONG'],
      [
        'overlong name (mkdir -p)',
        () => alice.call('fs.mkdir', { path: `a/${long}/b`, parents: true }),
        'ENAMETOOLONG',
      ],
      ['overlong name (symlink)', () => alice.call('fs.symlink', { target: 'file.md', path: long }), 'ENAMETOOLONG'],
      ['overlong name (move)', () => alice.call('fs.move', { src: 'file.md', dst: long }), 'ENAMETOOLONG'],
      ['overlong name (copy)', () => alice.call('fs.copy', { src: 'file.md', dst: `x/${long}` }), 'ENAMETOOLONG'],
      [
        'overlong path (> 4096 bytes)',
        () => alice.call('fs.write', { path: 'd/'.repeat(2100) + 'x' }, text('x')),
        'ENAMETOOLONG',
      ],
      ['NUL in a name (write)', () => alice.call('fs.write', { path: 'a\0b.md' }, text('x')), 'EINVAL'],
      ['NUL in a directory (write)', () => alice.call('fs.write', { path: 'dir\0/b.md' }, text('x')), 'EINVAL'],
      ['NUL (mkdir)', () => alice.call('fs.mkdir', { path: 'a\0', parents: true }), 'EINVAL'],
      ['NUL (stat)', () => alice.call('fs.stat', { path: 'file.md\0' }), 'EINVAL'],
      ['NUL (move dst)', () => alice.call('fs.move', { src: 'file.md', dst: 'x\0y' }), 'EINVAL'],
      ['NUL in a symlink target', () => alice.call('fs.symlink', { target: 'a\0b', path: 'ln' }), 'EINVAL'],
      ['empty symlink target', () => alice.call('fs.symlink', { target: '', path: 'ln' }), 'EINVAL'],
      [
        'symlink target over 4096 bytes',
        () => alice.call('fs.symlink', { target: 'x/'.repeat(2049), path: 'ln' }),
        'EINVAL',
      ],
      ['"." as the last name of a write', () => alice.call('fs.write', { path: 'sub/.' }, text('x')), 'EINVAL'],
      [
        '"." naming an existing directory (write)',
        () => alice.call('fs.write', { path: '/tmp/.' }, text('x')),
        'EINVAL',
      ],
      ['".." as the last name of a write', () => alice.call('fs.write', { path: '/tmp/..' }, text('x')), 'EINVAL'],
      ['mkdir "."', () => alice.call('fs.mkdir', { path: '.' }), 'EINVAL'],
      ['mkdir -p "x/.."', () => alice.call('fs.mkdir', { path: 'x/..', parents: true }), 'EINVAL'],
      ['symlink named "."', () => alice.call('fs.symlink', { target: 'file.md', path: '/tmp/.' }), 'EINVAL'],
      ['symlink named ".."', () => alice.call('fs.symlink', { target: 'file.md', path: 'x/..' }), 'EINVAL'],
      ['move to "."', () => alice.call('fs.move', { src: 'file.md', dst: '.' }), 'EINVAL'],
      ['move to "x/.."', () => alice.call('fs.move', { src: 'file.md', dst: 'x/..' }), 'EINVAL'],
      ['move of "."', () => alice.call('fs.move', { src: '.', dst: '/tmp/home-of-alice' }), 'EINVAL'],
      ['copy to ".."', () => alice.call('fs.copy', { src: 'file.md', dst: '..' }), 'EINVAL'],
      ['unlink "file.md/."', () => alice.call('fs.unlink', { path: 'file.md/.' }), 'EINVAL'],
      ['rmdir "sub/.."', () => alice.call('fs.rmdir', { path: 'sub/..' }), 'EINVAL'],
      [
        'delete -r "x/.." (would be the home)',
        () => alice.call('fs.delete', { path: 'x/..', recursive: true }),
        'EINVAL',
      ],
      [
        'delete -r "/home/alice/.." as root',
        () => root.call('fs.delete', { path: '/home/alice/..', recursive: true }),
        'EINVAL',
      ],
      ['delete -r "/tmp/./" as root', () => root.call('fs.delete', { path: '/tmp/./', recursive: true }), 'EINVAL'],
      ['the root cannot be written', () => root.call('fs.write', { path: '/' }, text('x')), 'EINVAL'],
      ['the root cannot be removed', () => root.call('fs.delete', { path: '/', recursive: true }), 'EBUSY'],
      ['the root cannot be moved', () => root.call('fs.move', { src: '/', dst: '/tmp/root' }), 'EBUSY'],
      ['the empty path is the home: not a file', () => alice.call('fs.write', { path: '' }, text('x')), 'EISDIR'],
    ]);
    // 255 bytes is fine, and names are otherwise free-form
    for (const n of [
      'n'.repeat(255),
      'é'.repeat(127) + 'x',
      ' spaces and\ttabs ',
      '...',
      '.hidden',
      '-rf',
      '*?[]',
      'a\\b',
      '日本語.md',
    ]) {
      await alice.call('fs.write', { path: `names/${n}` }, text(n));
    }
    t.equal((await alice.call('fs.list', { path: 'names' })).entries.length, 9);
  });

  t.test('paths through files are ENOTDIR', async (t) => {
    await alice.call('fs.symlink', { target: 'file.md', path: 'to-file' });
    await refuses(t, [
      ['write below a file', () => alice.call('fs.write', { path: 'file.md/x.md' }, text('x')), 'ENOTDIR'],
      ['write deep below a file', () => alice.call('fs.write', { path: 'file.md/x/y.md' }, text('x')), 'ENOTDIR'],
      ['mkdir -p below a file', () => alice.call('fs.mkdir', { path: 'file.md/x/y', parents: true }), 'ENOTDIR'],
      ['mkdir below a file', () => alice.call('fs.mkdir', { path: 'file.md/x' }), 'ENOTDIR'],
      ['stat below a file', () => alice.call('fs.stat', { path: 'file.md/x' }), 'ENOTDIR'],
      ['read below a file', () => alice.call('fs.read', { path: '/tmp/file.md/x' }), 'ENOTDIR'],
      ['list a file', () => alice.call('fs.list', { path: 'file.md' }), 'ENOTDIR'],
      ['copy below a file', () => alice.call('fs.copy', { src: 'file.md', dst: 'file.md/copy' }), 'ENOTDIR'],
      ['move below a file', () => alice.call('fs.move', { src: '/tmp/file.md', dst: '/tmp/file.md/x' }), 'ENOTDIR'],
      ['symlink below a file', () => alice.call('fs.symlink', { target: 'x', path: 'file.md/ln' }), 'ENOTDIR'],
      ['rmdir a file', () => alice.call('fs.rmdir', { path: 'file.md' }), 'ENOTDIR'],
      ['read through a link to a file', () => alice.call('fs.read', { path: 'to-file/x' }), 'ENOTDIR'],
      ['write through a link to a file', () => alice.call('fs.write', { path: 'to-file/x' }, text('x')), 'ENOTDIR'],
    ]);
  });

  t.test('users and groups: invalid names, duplicates, unknowns', async (t) => {
    const invalid = ['', 'Alice', '1abc', '-x', '.x', 'a b', 'a/b', 'a:b', 'x'.repeat(33), 'é', 'a\0', ' alice'];
    const cases: [string, () => Promise<unknown>, string][] = [];
    for (const n of invalid) {
      cases.push([`user ${JSON.stringify(n)}`, () => root.call('admin.userAdd', { name: n }), 'EINVAL']);
      cases.push([`group ${JSON.stringify(n)}`, () => root.call('admin.groupAdd', { name: n }), 'EINVAL']);
    }
    cases.push(
      ['duplicate user', () => root.call('admin.userAdd', { name: 'alice' }), 'EEXIST'],
      ['user named like root', () => root.call('admin.userAdd', { name: 'root' }), 'EEXIST'],
      ['user named like a group', () => root.call('admin.userAdd', { name: 'team' }), 'EEXIST'],
      ['user named wheel', () => root.call('admin.userAdd', { name: 'wheel', is_agent: true }), 'EEXIST'],
      ['duplicate group', () => root.call('admin.groupAdd', { name: 'team' }), 'EEXIST'],
      ["group named like a user's personal group", () => root.call('admin.groupAdd', { name: 'carol' }), 'EEXIST'],
      ['member: unknown user', () => root.call('admin.groupMemberAdd', { user: 'nobody', group: 'team' }), 'ENOENT'],
      ['member: unknown group', () => root.call('admin.groupMemberAdd', { user: 'alice', group: 'nogroup' }), 'ENOENT'],
      [
        'remove from primary group',
        () => root.call('admin.groupMemberDel', { user: 'alice', group: 'alice' }),
        'EINVAL',
      ],
      ['root leaves wheel', () => root.call('admin.groupMemberDel', { user: 'root', group: 'wheel' }), 'EPERM'],
      ['delete unknown user', () => root.call('admin.userDel', { name: 'nobody' }), 'ENOENT'],
      ['token for unknown user', () => root.call('admin.token', { name: 'nobody' }), 'ENOENT'],
      ['chown to an unknown user', () => root.call('fs.chown', { path: '/tmp/file.md', owner: 'nobody' }), 'EINVAL'],
      ['chown to uid 2^32 - 1', () => root.call('fs.chown', { path: '/tmp/file.md', owner: 4294967295 }), 'EINVAL'],
      ['chown to an unknown group', () => root.call('fs.chown', { path: '/tmp/file.md', group: 'nogroup' }), 'EINVAL'],
      [
        'chown to a gid beyond 32 bits',
        () => root.call('fs.chown', { path: '/tmp/file.md', group: '99999999999' }),
        'EINVAL',
      ],
      ['chown of a missing file', () => root.call('fs.chown', { path: '/tmp/missing', owner: 'alice' }), 'ENOENT'],
      [
        'on behalf of an unknown user',
        () => d.client.as({ onBehalfOf: 'nobody' }).call('fs.list', { path: '/' }),
        'EAUTH',
      ],
      [
        'as an unknown user',
        () => d.client.as({ authorization: 'User nobody' }).call('fs.list', { path: '/' }),
        'EAUTH',
      ],
      ['workspace at a relative path', () => root.call('ws.create', { name: 'w', root_path: 'relative' }), 'EINVAL'],
      ['workspace with an empty name', () => root.call('ws.create', { name: '', root_path: '/tmp' }), 'EINVAL'],
      ['workspace on a file', () => root.call('ws.create', { name: 'w', root_path: '/tmp/file.md' }), 'EEXIST'],
      [
        'token for an unknown workspace',
        () => root.call('ws.token', { id: 'nope', name: 'x', agent_token: p.tokens.agent }),
        'ENOENT',
      ],
    );
    await refuses(t, cases);
    // the boundaries that are fine
    const ok = await root.call('admin.userAdd', { name: '_a.b-c9' + 'x'.repeat(25) });
    t.equal(ok.name.length, 32);
    await root.call('admin.userDel', { name: ok.name });
  });

  t.test('invalid modes', async (t) => {
    const bad: (string | number)[] = [
      '999',
      '8',
      '0o644',
      '77777',
      '-1',
      'rwx',
      '',
      ' 644',
      '0x1ff',
      -1,
      0o10000,
      1.5,
      4096,
    ];
    const cases: [string, () => Promise<unknown>, string][] = [];
    for (const m of bad) {
      cases.push([`chmod ${JSON.stringify(m)}`, () => alice.call('fs.chmod', { path: 'file.md', mode: m }), 'EINVAL']);
      cases.push([
        `mkdir mode ${JSON.stringify(m)}`,
        () => alice.call('fs.mkdir', { path: 'badmode', mode: m }),
        'EINVAL',
      ]);
      cases.push([
        `write mode ${JSON.stringify(m)}`,
        () => alice.call('fs.write', { path: 'badmode.md', mode: m }, text('x')),
        'EINVAL',
      ]);
    }
    cases.push(['access mode 8', () => alice.call('fs.access', { path: 'file.md', mode: 8 }), 'EINVAL']);
    cases.push(['negative truncate', () => alice.call('fs.truncate', { path: 'file.md', size: -1 }), 'EINVAL']);
    cases.push(['fractional truncate', () => alice.call('fs.truncate', { path: 'file.md', size: 1.5 }), 'EINVAL']);
    cases.push(['bad time', () => alice.call('fs.utimens', { path: 'file.md', mtime: '12abc' }), 'EINVAL']);
    cases.push([
      'infinite time',
      () => alice.call('fs.utimens', { path: 'file.md', mtime: Number.POSITIVE_INFINITY }),
      'EINVAL',
    ]);
    await refuses(t, cases);
  });
});

/** Every row of every table of the PostgreSQL database at `url`, as text. */
async function storeRows(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out: string[] = [];
    const tables = await c.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'",
    );
    for (const { name } of tables.rows)
      for (const r of (await c.query<{ r: string }>(`SELECT t::text AS r FROM "${name}" t`)).rows) out.push(r.r);
    return out;
  } finally {
    await c.end();
  }
}

t.test('tokens', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  const { root } = p;
  const as = (auth: string): Caller => d.client.as({ authorization: auth });

  t.test('format: a recognisable prefix and 256 random bits in base64url', async (t) => {
    const seen = new Set<string>();
    for (const tok of [p.tokens.admin, p.tokens.agent]) {
      t.match(tok, /^mdvfs_[A-Za-z0-9_-]{43}$/);
      t.equal(Buffer.from(tok.slice('mdvfs_'.length), 'base64url').length, 32);
      seen.add(tok);
    }
    for (let i = 0; i < 5; i++) seen.add((await root.call('admin.token', { name: 'carol' })).token);
    t.equal(seen.size, 7, 'every token is different');
  });

  t.test('never listed; only has_token', async (t) => {
    const list = await root.call('admin.userList', {});
    const json = JSON.stringify(list);
    t.notOk(json.includes(p.tokens.admin) || json.includes(p.tokens.agent), 'no raw token in the listing');
    t.notOk(/mdvfs_/.test(json));
    const by = Object.fromEntries(list.users.map((u) => [u.name, u]));
    t.equal(by.admin!.has_token, true);
    t.equal(by.agent!.has_token, true);
    t.equal(by.alice!.has_token, false);
    t.notOk('token' in by.admin!);
    t.notOk('token_hash' in by.admin! || 'tokenHash' in by.admin!);
  });

  t.test('stored only as a hash', async (t) => {
    const tok = (await root.call('admin.token', { name: 'bob' })).token;
    const store = d.env.SERVICE_STORE ?? '';
    if (store.startsWith('postgres')) {
      // PostgreSQL mode (MDVFS_TEST_STORE=postgres): every row of every table, as text.
      const rows = await storeRows(store);
      t.ok(
        rows.some((r) => r.includes('bob')),
        'the scan sees the users table',
      );
      const raw = tok.slice(6);
      t.notOk(
        rows.some((r) => r.includes(raw) || r.includes(Buffer.from(raw).toString('hex'))),
        'no row holds the raw token',
      );
    } else {
      const files = ['store.db', 'store.db-wal'].map((f) => path.join(d.dataDir, f)).filter((f) => existsSync(f));
      t.ok(files.length > 0);
      for (const f of files)
        t.notOk(readFileSync(f).includes(Buffer.from(tok.slice(6))), `${path.basename(f)} does not hold the raw token`);
    }
    t.equal((await as(`Bearer ${tok}`).call('auth.whoami', {})).user, 'bob');
  });

  t.test('regenerating invalidates the old token', async (t) => {
    const first = (await root.call('admin.token', { name: 'alice' })).token;
    t.equal((await as(`Bearer ${first}`).call('auth.whoami', {})).user, 'alice');
    const second = (await root.call('admin.token', { name: 'alice' })).token;
    t.not(first, second);
    await t.rejects(as(`Bearer ${first}`).call('auth.whoami', {}), { code: 'EAUTH' });
    await t.rejects(as(`Bearer ${first}`).call('fs.list', {}), { code: 'EAUTH' });
    t.equal((await as(`Bearer ${second}`).call('auth.whoami', {})).user, 'alice');
    // and after a restart, the new one still works and the old one still does not
    await d.kill('SIGKILL');
    await d.restart();
    t.equal((await d.client.as({ authorization: `Bearer ${second}` }).call('auth.whoami', {})).user, 'alice');
    await t.rejects(d.client.as({ authorization: `Bearer ${first}` }).call('auth.whoami', {}), { code: 'EAUTH' });
  });

  t.test('bad tokens and unknown schemes fail closed', async (t) => {
    const c = d.client;
    const good = p.tokens.agent;
    for (const auth of [
      'Bearer ',
      'Bearer',
      'Bearer x',
      `Bearer ${good}x`,
      `Bearer ${good.slice(0, -1)}`,
      `Bearer ${good.toUpperCase()}`,
      'Basic YWxpY2U6cGFzc3dvcmQ=',
      `Token ${good}`,
      'alice',
      'User',
      'User ',
      'User Alice',
      'User alice bob',
      `${good}`,
    ]) {
      await t.rejects(c.as({ authorization: auth }).call('auth.whoami', {}), { code: 'EAUTH' }, JSON.stringify(auth));
    }
    await t.rejects(
      c
        .as({ authorization: `Bearer ${good}`, workspace: '00000000-0000-0000-0000-000000000000' })
        .call('auth.whoami', {}),
      { code: 'EAUTH' },
      'an agent token is no workspace secret',
    );
    await t.rejects(
      c.as({ workspace: 'x' }).call('auth.whoami', {}),
      { code: 'EAUTH' },
      'a workspace without a secret',
    );
    t.equal(
      (await c.as({ authorization: `  Bearer   ${good}  ` }).call('auth.whoami', {})).user,
      'agent',
      'surrounding blanks are tolerated',
    );
  });
});

t.test('SERVICE_ANONYMOUS=deny and SERVICE_USER_AUTH=off apply to remote requests only', async (t) => {
  const d = await spawnDaemon(t, { SERVICE_ANONYMOUS: 'deny', SERVICE_USER_AUTH: 'off' });
  const c = d.client;
  const root = c.as({});
  await root.call('admin.userAdd', { name: 'alice' });
  const tok = (await root.call('admin.token', { name: 'alice' })).token;
  await t.rejects(c.as({ origin: 'remote' }).call('auth.whoami', {}), { code: 'EAUTH' });
  await t.rejects(c.as({ origin: 'remote' }).call('fs.list', { path: '/' }), { code: 'EAUTH' });
  await t.rejects(c.as({ origin: 'remote' }).call('fs.write', { path: '/tmp/anon.md' }, { data: Buffer.from('x') }), {
    code: 'EAUTH',
  });
  await t.rejects(c.as({ origin: 'remote', authorization: 'User alice' }).call('auth.whoami', {}), { code: 'EAUTH' });
  await t.rejects(c.as({ origin: 'remote' }).call('auth.login', { username: 'alice' }), { code: 'EAUTH' });
  t.equal((await c.as({ origin: 'remote', authorization: `Bearer ${tok}` }).call('auth.whoami', {})).user, 'alice');
  t.equal((await c.as({ origin: 'local' }).call('auth.whoami', {})).uid, 0);
  t.equal((await c.as({}).call('auth.whoami', {})).uid, 0);
  t.equal((await c.as({ origin: 'local', authorization: 'User alice' }).call('auth.whoami', {})).user, 'alice');
  await t.rejects(root.call('fs.stat', { path: '/tmp/anon.md' }), { code: 'ENOENT' });
});
