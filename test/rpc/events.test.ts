/**
 * Change events (`sys.subscribe`): a subscriber hears the paths a mutation touched, and `paths: []`
 * ("anything may have changed") when identities, groups, tokens or workspaces change, since those alter
 * access without touching any path (the FUSE mount drops its caches on it). `fs.write` with `stat`
 * answers with the new attributes.
 */
import t from 'tap';
import { connectSocket } from '../../daemon/rpc/client.js';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import type { ChangeEvent } from '../../daemon/rpc/protocol.js';
import { spawnDaemon, text } from '../helpers/daemon.js';

const d = await spawnDaemon(t);
const root = d.client;
const sub = await connectSocket(socketPathFor(d.dataDir));
t.teardown(() => sub.close());
const events: ChangeEvent[] = [];
sub.on('event', (ev: ChangeEvent) => events.push(ev));
await sub.call('sys.subscribe', {});

/** Runs `fn`, then returns the events that arrived for it (a ping on the subscriber's socket flushes them). */
async function eventsOf(fn: () => Promise<unknown>): Promise<ChangeEvent[]> {
  events.length = 0;
  await fn();
  await sub.call('sys.ping', {});
  return [...events];
}

void t.test('a write reports its path', async (t) => {
  const evs = await eventsOf(() => root.call('fs.write', { path: '/a.md' }, text('x')));
  t.same(evs, [{ kind: 'change', paths: ['/a.md'] }]);
});

void t.test('every subscribed connection hears the event (encoded once for all of them)', async (t) => {
  const second = await connectSocket(socketPathFor(d.dataDir));
  t.teardown(() => second.close());
  const heard: ChangeEvent[] = [];
  second.on('event', (ev: ChangeEvent) => heard.push(ev));
  await second.call('sys.subscribe', {});
  const evs = await eventsOf(() => root.call('fs.write', { path: '/both.md' }, text('x')));
  await second.call('sys.ping', {});
  t.same(evs, [{ kind: 'change', paths: ['/both.md'] }]);
  t.same(heard, evs);
});

void t.test('identity, group, token and workspace changes report paths: []', async (t) => {
  const all = [{ kind: 'change', paths: [] }];
  const added = await eventsOf(() => root.call('admin.userAdd', { name: 'carol' }));
  t.ok(
    added.some((e) => e.paths.length === 0),
    'userAdd',
  );
  t.same(await eventsOf(() => root.call('admin.groupAdd', { name: 'team' })), all, 'groupAdd');
  t.same(
    await eventsOf(() => root.call('admin.groupMemberAdd', { user: 'carol', group: 'team' })),
    all,
    'groupMemberAdd',
  );
  t.same(
    await eventsOf(() => root.call('admin.groupMemberDel', { user: 'carol', group: 'team' })),
    all,
    'groupMemberDel',
  );
  t.same(await eventsOf(() => root.call('admin.token', { name: 'carol' })), all, 'token');
  const ws = await eventsOf(() => root.call('ws.create', { name: 'w', root_path: '/home/carol' }));
  t.ok(
    ws.some((e) => e.paths.length === 0),
    'ws.create',
  );
  const { workspaces } = await root.call('ws.list', {});
  await root.call('admin.userAdd', { name: 'bot', is_agent: true });
  const { token } = await root.call('admin.token', { name: 'bot' });
  t.same(
    await eventsOf(() => root.call('ws.token', { id: workspaces[0]!.id, name: 'agent', agent_token: token })),
    all,
    'ws.token',
  );
  t.same(await eventsOf(() => root.call('admin.userDel', { name: 'carol' })), all, 'userDel');
  t.same(await eventsOf(() => root.call('admin.userList', {})), [], 'reading the registry reports nothing');
});

void t.test('a time change reports its path (utimens, touch -h on a symlink)', async (t) => {
  await root.call('fs.write', { path: '/times.md' }, text('t'));
  await root.call('fs.symlink', { target: 'times.md', path: '/times-link' });
  t.same(await eventsOf(() => root.call('fs.utimens', { path: '/times.md', mtime: '1500000000000000001' })), [
    { kind: 'change', paths: ['/times.md'] },
  ]);
  t.same(await eventsOf(() => root.call('fs.utimens', { path: '/times-link', nofollow: true })), [
    { kind: 'change', paths: ['/times-link'] },
  ]);
});

void t.test('fs.write with stat answers with the attributes after the write', async (t) => {
  const r = await root.call('fs.write', { path: '/s.md', mode: '0640', stat: true }, text('hello'));
  const st = await root.call('fs.stat', { path: '/s.md' });
  t.ok(r.stat, 'stat present');
  t.equal(r.stat!.mode, '0640');
  t.equal(r.stat!.size, 5);
  t.equal(r.stat!.etag, r.etag);
  t.equal(r.stat!.inode_id, st.inode_id);
  t.equal(r.stat!.mtime_ns, st.mtime_ns);
  const plain = await root.call('fs.write', { path: '/s.md' }, text('again'));
  t.equal(plain.stat, undefined, 'not without the option');
});
