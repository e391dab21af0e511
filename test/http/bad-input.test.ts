// Bad input gets the documented 4xx, and the service keeps serving.
import t, { type Test } from 'tap';
import { request, withCast } from '../helpers/http.js';

const LIMIT = 64 * 1024;
const { svc, root, alice } = await withCast(t, { env: { SERVICE_MAX_FILE_SIZE: String(LIMIT) } });

async function expect4xx(
  t: Test,
  what: string,
  r: { status: number; json: { error?: unknown; code?: unknown } | undefined; text: string },
  status?: number,
  code?: string,
) {
  if (status === undefined)
    t.ok(r.status >= 400 && r.status < 500, `${what}: 4xx (got ${r.status} ${r.text.slice(0, 200)})`);
  else t.equal(r.status, status, `${what}: ${r.text.slice(0, 200)}`);
  t.type(r.json?.error, 'string', `${what}: JSON error body`);
  if (code !== undefined) t.equal(r.json?.code, code, `${what}: code`);
  t.notMatch(r.text, /\bat [\w.<>]+ \(/, `${what}: no stack trace`);
}

t.afterEach(async () => {
  const h = await root.get('/health');
  if (h.status !== 200) throw new Error('the service stopped serving');
});

t.test('missing and invalid parameters', async (t) => {
  await alice.put('/fs/a.md', 'a');
  await expect4xx(t, 'grep without pattern', await alice.get('/search/grep'), 400, 'EINVAL');
  await expect4xx(t, 'grep with empty pattern', await alice.get('/search/grep?pattern='), 400, 'EINVAL');
  await expect4xx(t, 'invalid regex', await alice.get('/search/grep?pattern=%28'), 400);
  await expect4xx(t, 'copy without dst', await alice.post('/fs/a.md?op=copy'), 400, 'EINVAL');
  await expect4xx(t, 'POST /fs without op', await alice.post('/fs/a.md'), 400, 'EINVAL');
  await expect4xx(t, 'unknown op', await alice.post('/fs/a.md?op=explode&dst=b.md'), 400, 'EINVAL');
  await expect4xx(t, 'repeated op', await alice.post('/fs/a.md?op=copy&op=move&dst=b.md'), 400, 'EINVAL');
  await expect4xx(t, 'bad boolean', await alice.del('/fs/a.md?recursive=maybe'), 400, 'EINVAL');
  await expect4xx(t, 'bad limit', await alice.get('/vcs/log?limit=-3'), 400, 'EINVAL');
  await expect4xx(t, 'bad find type', await alice.get('/search/find?type=x'), 400, 'EINVAL');
  await expect4xx(t, 'bad format', await alice.get('/vcs/status?format=xml'), 400, 'EINVAL');
  await expect4xx(t, 'user without name', await root.post('/admin/users', { is_agent: true }), 400, 'EINVAL');
  await expect4xx(
    t,
    'is_agent not a boolean',
    await root.post('/admin/users', { name: 'carol', is_agent: 'yes' }),
    400,
    'EINVAL',
  );
  await expect4xx(t, 'invalid user name', await root.post('/admin/users', { name: '../../etc', is_agent: false }), 400);
  await expect4xx(t, 'commit without message', await alice.post('/vcs/commit', {}), 400, 'EINVAL');
  await expect4xx(t, 'commit with an empty body', await alice.post('/vcs/commit'), 400, 'EINVAL');
  await expect4xx(t, 'revert without hash', await alice.post('/vcs/revert', {}), 400, 'EINVAL');
  await expect4xx(t, 'revert with a bad hash', await alice.post('/vcs/revert', { hash: 'zz' }), 400);
  await expect4xx(t, 'workspace without root_path', await root.post('/workspaces', { name: 'w' }), 400, 'EINVAL');
  await expect4xx(
    t,
    'workspace token without agent_token',
    await root.post('/workspaces/x/tokens', { name: 'w' }),
    400,
    'EINVAL',
  );
  await expect4xx(t, 'login without username', await root.post('/auth/login', {}), 400, 'EINVAL');
  await expect4xx(t, 'bad percent-encoding', await alice.get('/fs/a%2'), 400, 'EINVAL');
  await expect4xx(
    t,
    'symlink without target',
    await alice.put('/fs/l', '', { headers: { 'x-service-type': 'symlink' } }),
    400,
    'EINVAL',
  );
  await expect4xx(t, 'a path through a file', await alice.get('/fs/a.md/child'), undefined);
});

t.test('invalid JSON and wrong content types', async (t) => {
  await expect4xx(
    t,
    'malformed JSON',
    await alice.post('/vcs/commit', '{"message": ', { headers: { 'content-type': 'application/json' } }),
    400,
    'EINVAL',
  );
  await expect4xx(
    t,
    'JSON array',
    await alice.post('/vcs/commit', '["x"]', { headers: { 'content-type': 'application/json' } }),
    400,
    'EINVAL',
  );
  await expect4xx(
    t,
    'JSON string',
    await alice.post('/vcs/commit', '"x"', { headers: { 'content-type': 'application/json' } }),
    400,
    'EINVAL',
  );
  await expect4xx(t, 'message not a string', await alice.post('/vcs/commit', { message: 42 }), 400, 'EINVAL');
  await expect4xx(
    t,
    'text/plain body on a JSON route',
    await root.post('/admin/users', '{"name":"x","is_agent":false}', { headers: { 'content-type': 'text/plain' } }),
    400,
    'EINVAL',
  );
  await expect4xx(
    t,
    'form body on a JSON route',
    await root.post('/admin/groups', 'name=x', { headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
    400,
    'EINVAL',
  );
  t.equal(
    (await root.get('/admin/groups')).json.groups.some((g: { name: string }) => g.name === 'x'),
    false,
    'nothing was created',
  );
  const any = await alice.put('/fs/any.md', '# any', { headers: { 'content-type': 'application/x-anything' } });
  t.equal(any.status, 200, 'PUT /fs takes any content type');
  const json = await alice.put('/fs/j.md', '{"a": 1', { headers: { 'content-type': 'application/json' } });
  t.equal(json.status, 200, 'a PUT body is never parsed, even if labelled JSON');
  t.equal((await alice.get('/fs/j.md')).text, '{"a": 1');
});

t.test('NUL and overlong names', async (t) => {
  await expect4xx(t, 'NUL in a path', await alice.put('/fs/a%00b.md', 'x'), 400);
  await expect4xx(t, 'NUL in dst', await alice.post('/fs/a.md?op=copy&dst=b%00c.md'), 400);
  await expect4xx(t, 'NUL in grep path', await alice.get('/search/grep?pattern=a&path=x%00y'), 400);
  const long = 'n'.repeat(256);
  await expect4xx(t, 'a 256-byte name', await alice.put(`/fs/${long}.md`, 'x'), 400, 'ENAMETOOLONG');
  t.equal((await alice.put(`/fs/${'n'.repeat(252)}.md`, 'x')).status, 200, 'a 255-byte name is fine');
  await expect4xx(t, 'an overlong dst', await alice.post(`/fs/a.md?op=move&dst=${long}`), 400, 'ENAMETOOLONG');
  await expect4xx(t, 'a very long path', await alice.get(`/fs/${'d/'.repeat(4000)}x`), undefined);
  await expect4xx(t, 'NUL in a user name', await root.post('/admin/users', { name: 'a\u0000b', is_agent: false }), 400);
  await expect4xx(t, 'NUL in root_path', await root.post('/workspaces', { name: 'w', root_path: '/srv\u0000x' }), 400);
});

t.test('traversal in path-carrying parameters', async (t) => {
  await expect4xx(t, '.. in the URL path', await alice.put('/fs/../../../etc/evil.md', 'x'), 403);
  await expect4xx(t, '.. in dst', await alice.post('/fs/a.md?op=copy&dst=../../../../etc/evil.md'), undefined);
  await expect4xx(t, '.. in move dst', await alice.post('/fs/a.md?op=move&dst=../bob/taken.md'), undefined);
  t.equal((await root.get('/fs//etc/evil.md')).status, 404, 'nothing written outside');
  t.equal((await root.get('/fs//home/bob/taken.md')).status, 404);
  t.equal((await alice.get('/fs/a.md')).text, 'a', 'the source is untouched');
  await root.put('/fs//home/bob/private.md', 'bob private');
  await root.post('/admin/chown//home/bob/private.md', { owner: 'bob' });
  const g = await alice.get('/search/grep?pattern=private&path=../bob&recursive=true');
  t.notOk(g.text.includes('bob private'), `.. in grep path (${g.status})`);
  const f = await alice.get('/search/find?path=../../home/bob&name=*');
  t.notOk(f.text.includes('private.md'), `.. in find path (${f.status})`);
  await expect4xx(
    t,
    '.. in root_path',
    await alice.post('/workspaces', { name: 'w', root_path: '/home/alice/../bob' }),
    403,
  );
  await expect4xx(t, '.. in chmod path', await alice.post('/admin/chmod/../bob/private.md', { mode: '0777' }), 403);
});

t.test('oversize bodies', async (t) => {
  await expect4xx(
    t,
    'PUT over SERVICE_MAX_FILE_SIZE',
    await alice.put('/fs/big.md', Buffer.alloc(LIMIT + 1, 97)),
    413,
    'EFBIG',
  );
  t.equal((await alice.get('/fs/big.md')).status, 404, 'nothing written');
  t.equal((await alice.put('/fs/max.md', Buffer.alloc(LIMIT, 97))).status, 200, 'exactly the limit is fine');
  await expect4xx(
    t,
    'a huge JSON body',
    await alice.post('/vcs/commit', { message: 'x'.repeat(2 * 1024 * 1024) }),
    413,
    'EFBIG',
  );
  // chunked, without Content-Length
  const chunked = await new Promise<number>((resolve, reject) => {
    import('node:http').then(({ default: http }) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: svc.port,
          method: 'PUT',
          path: '/fs/chunked.md',
          headers: { authorization: 'User alice', 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      for (let i = 0; i < 20; i++) req.write(Buffer.alloc(8192, 98));
      req.end();
    }, reject);
  }).catch(() => 413); // the server may cut the upload short, which is also a refusal
  t.equal(chunked, 413, 'a chunked body over the limit');
});

t.test('invalid modes', async (t) => {
  for (const mode of ['999', 'rwxr-xr-x', '77777', '-1', '', 'abc']) {
    await expect4xx(t, `chmod ${JSON.stringify(mode)}`, await alice.post('/admin/chmod/a.md', { mode }), 400);
  }
  await expect4xx(t, 'chmod 99999 (number)', await alice.post('/admin/chmod/a.md', { mode: 99999 }), 400);
  await expect4xx(t, 'chmod 1.5', await alice.post('/admin/chmod/a.md', { mode: 1.5 }), 400);
  await expect4xx(t, 'chmod without mode', await alice.post('/admin/chmod/a.md', {}), 400, 'EINVAL');
  await expect4xx(t, 'PUT ?mode=8888', await alice.put('/fs/m.md?mode=8888', 'x'), 400);
  t.equal((await alice.get('/fs/a.md?stat=true')).json.mode, '0644', 'mode unchanged');
});

t.test('hostile regex', async (t) => {
  await alice.put('/fs/redos.md', `${'a'.repeat(50000)}!\n`);
  const r = await alice.get('/search/grep?pattern=(a%2B)%2B%24&path=redos.md');
  await expect4xx(t, 'catastrophic backtracking', r, 400);
  const h = await request(svc, 'GET', '/health');
  t.equal(h.status, 200, 'still serving');
  t.equal((await alice.get('/fs/a.md')).text, 'a', 'and still reading');
});

t.test('requests node:http rejects still get JSON errors', async (t) => {
  await expect4xx(t, 'a 20 kB request line', await alice.get(`/fs/${'a'.repeat(20000)}`), 400, 'EINVAL');
  const raw = await new Promise<string>((resolve, reject) => {
    import('node:net').then(({ default: net }) => {
      const sock = net.connect(svc.port, '127.0.0.1', () => sock.write('NOT HTTP AT ALL\r\n\r\n'));
      let out = '';
      sock.on('data', (b: Buffer) => (out += b.toString()));
      sock.on('close', () => resolve(out));
      sock.on('error', reject);
    }, reject);
  });
  t.match(raw, /^HTTP\/1\.1 400 /, 'a malformed request gets 400');
  t.match(raw, /"code":"EINVAL"/, 'with a JSON body');
});

t.test('bad credentials headers', async (t) => {
  await expect4xx(t, 'User with no name', await request(svc, 'GET', '/fs/', { auth: 'User ' }), 401, 'EAUTH');
  await expect4xx(
    t,
    'User that does not exist',
    await request(svc, 'GET', '/fs/', { auth: 'User ghost' }),
    401,
    'EAUTH',
  );
  await expect4xx(
    t,
    'a huge Authorization',
    await request(svc, 'GET', '/fs/', { auth: `Bearer ${'x'.repeat(5000)}` }),
    undefined,
  );
});
