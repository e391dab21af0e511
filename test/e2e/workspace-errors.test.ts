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
    const err = await a.then(() => undefined, (e: Error & { code: string; path?: string }) => e);
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
