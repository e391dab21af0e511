/**
 * Issue 12 (Low): grep workers are shared fairly. One caller fires six catastrophic regexes at once
 * (each runs to its time bound); alice's grep, sent after them, is answered before that batch is
 * done: callers are served round-robin and no caller holds every worker.
 */
import t from 'tap';
import { text } from '../helpers/daemon.js';
import { quickDaemon, settle } from '../vcs/lib.js';

t.test("one caller's hostile batch does not hold another caller's grep behind it", async (t) => {
  const d = await quickDaemon(t, { SERVICE_REGEX_TIMEOUT_MS: '1500' });
  const root = d.client.as({});
  await root.call('admin.userAdd', { name: 'alice' });
  await root.call('admin.userAdd', { name: 'mallory' });
  const mallory = d.client.as({ authorization: 'User mallory' });
  const alice = d.client.as({ authorization: 'User alice' });
  await mallory.call('fs.write', { path: 'evil.md' }, text('a'.repeat(50000) + '!\n'));
  await alice.call('fs.write', { path: 'notes.md' }, text('# notes\nneedle\n'));

  let hostileDone = 0;
  const batch = Array.from({ length: 6 }, () =>
    settle(mallory.call('search.grep', { pattern: '(a+)+$', path: 'evil.md' })).then((x) => (hostileDone++, x)),
  );
  // alice asks after all six were sent (the client keeps the order of requests on the connection)
  const mine = await alice.call('search.grep', { pattern: 'needle', path: 'notes.md' });
  const doneWhenAliceAnswered = hostileDone;
  t.same(mine.results, [{ file: '/home/alice/notes.md', line_num: 2, line: 'needle' }], "alice's grep is answered");
  t.ok(doneWhenAliceAnswered < 6, `before the hostile batch is done (${doneWhenAliceAnswered} of 6 done)`);
  t.ok(doneWhenAliceAnswered <= 1, 'in fact before the second hostile regex ends');
  for (const r of await Promise.all(batch))
    t.equal(r.ok ? 'ok' : r.error.code, 'ETIMEDOUT', 'each hostile regex hits its time bound');
});
