// Issue 12, low item: a resource subscription on a readable folder must not report changes inside
// private directories below it (bob's 0700 dir inside /shared). Real serve, the SDK client.
import t from 'tap';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { httpClient, until, withCast } from '../helpers/mcp.js';

t.test(
  "alice's subscription to /shared reports nothing from inside bob's private directory (nor does a delegate's)",
  async (t) => {
    const { svc, daemon, botToken } = await withCast(t);
    await daemon.call('fs.mkdir', { path: '/shared', mode: '0755' });
    await daemon.call('fs.mkdir', { path: '/shared/bob', mode: '0700' });
    await daemon.call('fs.chown', { path: '/shared/bob', owner: 'bob' });
    const bob = daemon.as({ authorization: 'User bob' });
    await bob.call('fs.write', { path: '/shared/bob/diary.md' }, { data: Buffer.from('v0') });

    const { client: alice } = await httpClient(t, svc, { authorization: 'User alice' });
    const seen: string[] = [];
    alice.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      seen.push(n.params.uri);
    });
    await alice.subscribeResource({ uri: 'mdvfs:///shared' });
    // The agent bot acting for alice: what both may read (bob's folder is open to bot, not to alice).
    await daemon.call('fs.chown', { path: '/shared/bob', owner: 'bob', group: 'bot' });
    await daemon.call('fs.chmod', { path: '/shared/bob', mode: '0750' });
    await daemon.call('auth.delegationAdd', { agent: 'bot', user: 'alice' }); // alice's consent
    const { client: delegated } = await httpClient(t, svc, {
      authorization: `Bearer ${botToken}`,
      onBehalfOf: 'alice',
    });
    const seenByDelegate: string[] = [];
    delegated.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      seenByDelegate.push(n.params.uri);
    });
    await delegated.subscribeResource({ uri: 'mdvfs:///shared' });
    // The SSE stream opens in the background: wait until a visible change is reported.
    let n = 0;
    await until(async () => {
      await daemon.call('fs.write', { path: '/shared/public.md' }, { data: Buffer.from(`v${++n}`) });
      await new Promise((r) => setTimeout(r, 100));
      return seen.length > 0 && seenByDelegate.length > 0;
    }, 'a first update');

    seen.length = 0;
    seenByDelegate.length = 0;
    await bob.call('fs.write', { path: '/shared/bob/diary.md' }, { data: Buffer.from('dear diary') });
    await bob.call('fs.write', { path: '/shared/bob/new-secret.md' }, { data: Buffer.from('x') });
    await bob.call('fs.mkdir', { path: '/shared/bob/plans' });
    await bob.call('fs.delete', { path: '/shared/bob/new-secret.md' });
    await new Promise((r) => setTimeout(r, 700));
    t.same(seen, [], 'no update for changes alice may not see');
    t.same(seenByDelegate, [], 'nor for bot acting for alice (bot alone could read them)');

    // A change alice may see (a new entry in /shared) is still reported.
    await daemon.call('fs.write', { path: '/shared/visible.md' }, { data: Buffer.from('hello') });
    await until(() => seen.length > 0 && seenByDelegate.length > 0, 'the visible update');
    t.same(seen, ['mdvfs:///shared']);
    t.same(seenByDelegate, ['mdvfs:///shared']);
  },
);
