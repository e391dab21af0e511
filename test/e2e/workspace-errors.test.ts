import t from 'tap';
import { spawnDaemon, makePersonas, text } from '../helpers/daemon.js';

t.test('workspace callers never see the workspace root in errors', async (t) => {
  const d = await spawnDaemon(t);
  const p = await makePersonas(d.client);
  await p.root.call('fs.write', { path: '/srv/secret-place/ws/readme.md' }, text('hi'));
  await p.root.call('fs.chown', { path: '/srv/secret-place/ws', owner: 'agent' });
  const ws = await p.root.call('ws.create', { name: 'w', root_path: '/srv/secret-place/ws' });
  const { secret } = await p.root.call('ws.token', { id: ws.id, name: 'ci', agent_token: p.tokens.agent });
  const inWs = d.client.as({ authorization: `Bearer ${secret}`, workspace: ws.id });
  const attempts = [
    inWs.call('fs.read', { path: 'missing.md' }),
    inWs.call('fs.list', { path: '/nope' }),
    inWs.call('fs.copy', { src: 'gone.md', dst: 'x.md' }),
    inWs.call('fs.rmdir', { path: '/' }),
    inWs.call('fs.symlink', { target: '/etc', path: '/' }),
  ];
  for (const a of attempts) {
    const err = await a.then(
      () => undefined,
      (e: Error & { code: string; path?: string }) => e,
    );
    t.ok(err, 'the operation fails');
    t.notMatch(err!.message, /secret-place/, `message hides the real root: ${err!.message}`);
  }
  const ok = await inWs.call('fs.stat', { path: 'readme.md' });
  t.equal(ok.path, '/readme.md', 'successes show workspace paths too');
});

t.test('a blank Authorization header fails closed instead of meaning root', async (t) => {
  const d = await spawnDaemon(t);
  await t.rejects(d.client.as({ authorization: '   ' }).call('auth.whoami', {}), { code: 'EAUTH' });
  t.equal((await d.client.as({}).call('auth.whoami', {})).user, 'root', 'no header at all is still root (contract)');
});

t.test(
  'REST and MCP name the same workspace path in an error (a root whose name is also a path inside it)',
  async (t) => {
    const { startService, request } = await import('../helpers/http.js');
    const { httpClient, call } = await import('../helpers/mcp.js');
    const svc = await startService(t);
    const root = 'User root';
    const agent = await request(svc, 'POST', '/admin/users', { auth: root, body: { name: 'bot', is_agent: true } });
    await request(svc, 'PUT', '/fs//p/p/kept.md', { auth: root, body: 'x' });
    await request(svc, 'POST', '/admin/chown//p', { auth: root, body: { owner: 'bot' } });
    const ws = await request(svc, 'POST', '/workspaces', { auth: root, body: { name: 'w', root_path: '/p' } });
    const tok = await request(svc, 'POST', `/workspaces/${ws.json.id as string}/tokens`, {
      auth: root,
      body: { name: 'ci', agent_token: agent.json.token },
    });
    const creds = { auth: `Bearer ${tok.json.secret as string}`, workspace: ws.json.id as string };
    // In the workspace, /p/missing.md is the real /p/p/missing.md.
    const rest = await request(svc, 'GET', '/fs//p/missing.md', creds);
    t.equal(rest.status, 404);
    t.match(rest.json.error, /'\/p\/missing\.md'/, `REST: ${rest.json.error as string}`);
    const { client } = await httpClient(
      t,
      { ...svc, url: new URL('/mcp', svc.base), stderr: svc.stderr },
      { authorization: creds.auth, workspace: creds.workspace },
    );
    const mcp = await call(client, 'read_file', { path: '/p/missing.md' });
    const mcpText = mcp.content[0]?.type === 'text' ? mcp.content[0].text : '';
    t.match(mcpText, /'\/p\/missing\.md'/, `MCP: ${mcpText}`);
    t.equal(rest.json.error, mcpText, 'the same message');
  },
);
