/**
 * Security (issue 12, low): workspace secrets can be listed (never the secret) and revoked; rotating
 * or deleting the agent's token revokes the secrets issued against it; a workspace caller never
 * learns where its workspace really lives; a symlink inside a workspace does not tell which
 * outside paths exist. All through the real `mdvfs serve`.
 */
import t from 'tap';
import { client, withCast } from '../helpers/http.js';

const ROOT_PATH = '/srv/hidden-location-4c1d';

t.test('workspace secrets', async (t) => {
  const cast = await withCast(t);
  const { admin, root, svc } = cast;
  const ws = await root.post('/workspaces', { name: 'proj', root_path: ROOT_PATH });
  t.equal(ws.status, 200, ws.text);
  const id: string = ws.json.id;
  const issue = async (name: string, agentToken = cast.botToken) => {
    const r = await admin.post(`/workspaces/${id}/tokens`, { name, agent_token: agentToken });
    t.equal(r.status, 200, r.text);
    return { secret: r.json.secret as string, tokenId: r.json.token_id as string };
  };
  const asWs = (secret: string) => client(svc, { auth: `Bearer ${secret}`, workspace: id });
  t.equal((await root.put(`/fs/${ROOT_PATH}/a.md`, 'inside\n')).status, 200);

  t.test('listed without the secret, and revoked by id', async (t) => {
    const { secret, tokenId } = await issue('ci');
    t.equal((await asWs(secret).get('/fs//a.md')).text, 'inside\n', 'the secret works');
    const list = await admin.get(`/workspaces/${id}/tokens`);
    t.equal(list.status, 200, list.text);
    const mine = list.json.tokens.find((x: { id: string }) => x.id === tokenId);
    t.match(mine, { id: tokenId, name: 'ci', agent: 'bot' });
    t.same(Object.keys(mine).sort(), ['agent', 'created', 'id', 'name'], 'only id, name, agent, created');
    t.notOk(list.text.includes(secret), 'the secret is not in the listing');
    t.equal((await asWs(secret).get(`/workspaces/${id}/tokens`)).status, 403, 'a workspace caller cannot list secrets');
    t.equal((await cast.alice.get(`/workspaces/${id}/tokens`)).status, 403, 'nor can another user');
    const del = await admin.del(`/workspaces/${id}/tokens/${tokenId}`);
    t.equal(del.status, 200, del.text);
    t.same(del.json, { workspace_id: id, revoked: tokenId });
    t.equal((await asWs(secret).get('/fs//a.md')).status, 401, 'a revoked secret is refused');
    t.notOk(
      (await admin.get(`/workspaces/${id}/tokens`)).json.tokens.some((x: { id: string }) => x.id === tokenId),
      'and no longer listed',
    );
    t.equal((await admin.del(`/workspaces/${id}/tokens/${tokenId}`)).status, 404, 'revoking twice is 404');
  });

  t.test("rotating the agent's token revokes the secrets issued against it", async (t) => {
    const { secret } = await issue('before-rotation');
    t.equal((await asWs(secret).get('/fs//a.md')).status, 200);
    const rot = await admin.post('/admin/users/bot/tokens');
    t.equal(rot.status, 200);
    const newToken: string = rot.json.token;
    t.equal((await asWs(secret).get('/fs//a.md')).status, 401, 'the old secret died with the old token');
    t.same((await admin.get(`/workspaces/${id}/tokens`)).json.tokens, [], 'and is gone from the listing');
    const fresh = await issue('after-rotation', newToken);
    t.equal((await asWs(fresh.secret).get('/fs//a.md')).status, 200, 'a secret against the new token works');
    t.equal((await admin.del('/admin/users/bot')).status, 200);
    t.equal((await asWs(fresh.secret).get('/fs//a.md')).status, 401, 'deleting the agent revokes its secrets');
  });
});

t.test('a workspace caller never sees root_path', async (t) => {
  const cast = await withCast(t);
  const ws = await cast.root.post('/workspaces', { name: 'proj', root_path: ROOT_PATH });
  const id: string = ws.json.id;
  const secret: string = (await cast.admin.post(`/workspaces/${id}/tokens`, { name: 'ci', agent_token: cast.botToken }))
    .json.secret;
  const me = client(cast.svc, { auth: `Bearer ${secret}`, workspace: id });
  const list = await me.get('/workspaces');
  t.equal(list.status, 200);
  t.equal(list.json.workspaces.length, 1);
  t.equal(list.json.workspaces[0].root_path, '/', 'its own workspace is `/`');
  t.notOk(list.text.includes('hidden-location'), 'GET /workspaces does not show the real root');
  const who = await me.get('/auth/whoami');
  t.equal(who.status, 200);
  t.notOk(who.text.includes('hidden-location'), '/auth/whoami does not show it');
  t.equal((await cast.admin.get('/workspaces')).json.workspaces[0].root_path, ROOT_PATH, 'its owner still sees it');
});

t.test('a symlink in a workspace does not reveal which outside paths exist', async (t) => {
  const cast = await withCast(t);
  const { root: admin } = cast;
  const ws = await admin.post('/workspaces', { name: 'proj', root_path: `${ROOT_PATH}/ws` });
  const id: string = ws.json.id;
  const secret: string = (await admin.post(`/workspaces/${id}/tokens`, { name: 'ci', agent_token: cast.botToken })).json
    .secret;
  const me = client(cast.svc, { auth: `Bearer ${secret}`, workspace: id });
  t.equal((await admin.put(`/fs/${ROOT_PATH}/exists.md`, 'outside\n')).status, 200);
  const links: Record<string, string> = {
    absExisting: `${ROOT_PATH}/exists.md`,
    absMissing: `${ROOT_PATH}/missing.md`,
    relExisting: '../exists.md',
    relMissing: '../missing.md',
    dirExisting: '../exists.md/x',
    dirMissing: '../missing.md/x',
  };
  for (const [name, target] of Object.entries(links)) {
    const r = await admin.put(`/fs/${ROOT_PATH}/ws/${name}`, target, { headers: { 'x-service-type': 'symlink' } });
    t.equal(r.status, 200, `link ${name} -> ${target}: ${r.text}`);
  }
  const answer = async (name: string, how: 'read' | 'stat' | 'write') => {
    const r =
      how === 'read'
        ? await me.get(`/fs//${name}`)
        : how === 'stat'
          ? await me.get(`/fs//${name}?stat=true&follow=true`)
          : await me.put(`/fs//${name}`, 'x');
    return `${r.status} ${r.text.replaceAll(name, '<link>')}`;
  };
  for (const how of ['read', 'stat', 'write'] as const) {
    for (const kind of ['abs', 'rel', 'dir']) {
      const existing = await answer(`${kind}Existing`, how);
      const missing = await answer(`${kind}Missing`, how);
      t.equal(missing, existing, `${how} through a ${kind} link: the same answer whether the outside path exists`);
      t.notOk(existing.includes('hidden-location'), 'and the real location is not shown');
    }
  }
});
