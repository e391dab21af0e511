/**
 * Security (issue 30, low): a directory's entry count (its size) and its number of subdirectories
 * (nlink) are part of its listing. bob may not list alice's 0700 home, so no stat may tell him how
 * many entries or subdirectories it holds: REST stat, REST listings of /home, and MCP's
 * get_file_info and list_directory. alice, wheel and root still see the counts.
 */
import t from 'tap';
import { client, request } from '../helpers/http.js';
import { call, data, httpClient, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon } = cast;
const alice = daemon.as({ authorization: 'User alice' });
for (const name of ['a.md', 'b.md', 'c.md']) await alice.call('fs.write', { path: name }, { data: Buffer.from('x') });
for (const name of ['d1', 'd2']) await alice.call('fs.mkdir', { path: name });
// /home/alice: 5 entries, 2 of them directories (nlink 4).

const rest = (auth: string) => client(svc, { auth });

t.test('REST stat: bob sees no counts of a directory he may not list', async (t) => {
  const bob = await rest('User bob').get('/fs//home/alice?stat=true');
  t.equal(bob.status, 200, bob.text);
  t.equal(bob.json.kind, 'directory');
  t.equal(bob.json.size, 0, 'no entry count');
  t.equal(bob.json.nlink, 1, 'no subdirectory count');
  const own = (await rest('User alice').get('/fs//home/alice?stat=true')).json;
  t.equal(own.size, 5, 'alice sees her 5 entries');
  t.equal(own.nlink, 4, 'and her 2 subdirectories');
  const root = (await request(svc, 'GET', '/fs//home/alice?stat=true')).json;
  t.same([root.size, root.nlink], [5, 4], 'root too');
});

t.test("REST listing of /home: the entry of alice's home shows no count to bob", async (t) => {
  const entries = (await rest('User bob').get('/fs//home')).json.entries as { name: string; size: number }[];
  t.equal(entries.find((e) => e.name === 'alice')?.size, 0);
  const own = (await rest('User alice').get('/fs//home')).json.entries as { name: string; size: number }[];
  t.equal(own.find((e) => e.name === 'alice')?.size, 5);
});

t.test('MCP: get_file_info and list_directory hide the counts from bob', async (t) => {
  const { client: bob } = await httpClient(t, svc, { authorization: 'User bob' });
  const info = await call(bob, 'get_file_info', { path: '/home/alice' });
  t.notOk(info.isError, text(info));
  t.equal(data(info).size, 0);
  t.equal(data(info).nlink, 1);
  t.match(text(info), / 0 bytes/);
  const list = await call(bob, 'list_directory', { path: '/home' });
  t.match(text(list), /\[DIR\] +0700 +0 {2}alice\//, 'the listing line shows size 0');
  const { client: al } = await httpClient(t, svc, { authorization: 'User alice' });
  t.equal(data(await call(al, 'get_file_info', { path: '/home/alice' })).size, 5);
});
