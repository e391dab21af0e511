// Issue 30, item 3, over MCP (the SDK client on Streamable HTTP): the README's agent set-up (grant,
// share the folder, done) lets an agent acting for alice create, re-write, edit, move and delete
// notes with no chmod by hand; without her grant, or after she revokes it, it is refused.
import t from 'tap';
import { call, errorCode, httpClient, rawMcp, INIT, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon, botToken } = cast;
const rest = (method: string, path: string, auth: string, body?: object) =>
  fetch(new URL(path, svc.base), {
    method,
    headers: { Authorization: auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

void t.test('without her grant the agent cannot act for alice', async (t) => {
  const r = await rawMcp(svc, 'POST', INIT, { authorization: `Bearer ${botToken}`, 'x-service-on-behalf-of': 'alice' });
  t.equal(r.status, 403, 'refused');
  t.match(r.text, /no delegation grant: alice has not granted bot/);
  const asRoot = await rawMcp(svc, 'POST', INIT, {
    authorization: `Bearer ${botToken}`,
    'x-service-on-behalf-of': 'root',
  });
  t.equal(asRoot.status, 403);
  t.match(asRoot.text, /nobody acts on behalf of root but root/);
});

void t.test("the README's set-up: grant, share the folder, done", async (t) => {
  // alice alone: she grants it with `share` (it joins her personal group) and opens her home to that group
  t.equal((await rest('POST', '/auth/delegations', 'User alice', { agent: 'bot', share: true })).status, 200);
  t.equal((await rest('POST', '/admin/chmod/~', 'User alice', { mode: '0770' })).status, 200);

  const { client: agent } = await httpClient(t, svc, { authorization: `Bearer ${botToken}`, onBehalfOf: 'alice' });
  const w1 = await call(agent, 'write_file', { path: 'notes/agent-own.md', content: 'first\n' });
  t.notOk(w1.isError, text(w1));
  const w2 = await call(agent, 'write_file', { path: 'notes/agent-own.md', content: 'second\n' });
  t.notOk(w2.isError, `its second write works: ${text(w2)}`);
  const ed = await call(agent, 'edit_file', {
    path: 'notes/agent-own.md',
    edits: [{ oldText: 'second', newText: 'edited' }],
  });
  t.notOk(ed.isError, text(ed));
  const mv = await call(agent, 'move_file', { source: 'notes/agent-own.md', destination: 'notes/moved.md' });
  t.notOk(mv.isError, text(mv));
  const again = await call(agent, 'write_file', { path: 'notes/moved.md', content: 'after the move\n' });
  t.notOk(again.isError, text(again));
  const alice = daemon.as({ authorization: 'User alice' });
  const st = await alice.call('fs.stat', { path: 'notes/moved.md' });
  t.equal(st.mode, '0664', 'group write: the agent may revise what it wrote for her');
  t.equal(st.uid, (await alice.call('auth.whoami', {})).uid, 'and it is hers');
  const del = await call(agent, 'delete_file', { path: 'notes/moved.md' });
  t.notOk(del.isError, text(del));
  await t.rejects(alice.call('fs.stat', { path: 'notes/moved.md' }), { code: 'ENOENT' });

  // her own 0644 note: refused, and the refusal says who lacked what
  await alice.call('fs.write', { path: 'notes/todo.md' }, { data: Buffer.from('# Todo\n') });
  const denied = await call(agent, 'write_file', { path: 'notes/todo.md', content: 'x' });
  t.equal(errorCode(denied), 'EACCES');
  t.match(text(denied), 'bot (acting for alice) lacks write on /home/alice/notes/todo.md: group bits r--');
  // shared with her group, the agent revises it
  await alice.call('fs.chmod', { path: 'notes/todo.md', mode: '0664' });
  const ok = await call(agent, 'edit_file', { path: 'notes/todo.md', edits: [{ oldText: 'Todo', newText: 'Done' }] });
  t.notOk(ok.isError, text(ok));

  // alice revokes: the agent's next call is refused, in the same session
  t.equal((await rest('DELETE', '/auth/delegations/bot', 'User alice')).status, 200);
  let refused = false;
  try {
    const r = await call(agent, 'read_file', { path: 'notes/todo.md' });
    refused = r.isError === true && /no delegation grant/.test(text(r));
  } catch (err) {
    refused = /no delegation grant|403/.test(String(err));
  }
  t.ok(refused, 'revoked: refused at the next request');
});
