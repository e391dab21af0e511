/**
 * The daemon's change feed keeps the newest RING events for resume (`since`): a subscriber that names
 * an event still in the ring gets exactly the events after it, in order, also after the ring has
 * wrapped many times; an id older than the ring asks for a reset.
 */
import t from 'tap';
import type { FeedEvent } from '../../daemon/rpc/protocol.js';
import { coreFrom } from '../helpers/core.js';

const { RING } = (await import(
  new URL('../../dist/daemon/events.js', import.meta.url).href
)) as typeof import('../../daemon/events.js');

const { core, root } = await coreFrom(t, { '/n': { dir: true } });
const feed = core.service.events;
const writes = RING * 2 + 17; // wraps the ring twice and then some
const ids: string[] = [];
for (let i = 0; i < writes; i++) {
  await root.call('fs.write', { path: `/n/${i % 50}.md` }, { data: Buffer.from(String(i)) });
  ids.push(feed.lastId);
}
const rootCred = core.service.authenticate({});

function resume(since: string): { reset: boolean; got: FeedEvent[] } {
  const got: FeedEvent[] = [];
  const key = `t:${since}`;
  const r = feed.subscribe(
    key,
    {},
    rootCred,
    since,
    (ev) => got.push(ev),
    () => undefined,
  );
  feed.unsubscribe(key);
  return { reset: r.reset, got };
}

void t.test('resuming from an event still in the ring replays exactly what followed it', async (t) => {
  for (const back of [0, 1, 5, RING - 1]) {
    const since = ids[ids.length - 1 - back]!;
    const { reset, got } = resume(since);
    t.equal(reset, false, `${back} behind`);
    t.same(
      got.map((e) => e.id),
      ids.slice(ids.length - back),
      `${back} behind: the ${back} newest events, oldest first`,
    );
  }
});

void t.test('an id older than the ring asks for a reset', async (t) => {
  t.equal(resume(ids[ids.length - 1 - RING - 1]!).reset, true);
  t.equal(resume(ids[0]!).reset, true);
});
