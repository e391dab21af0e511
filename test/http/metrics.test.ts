// Issue 31 (operations): GET /metrics is Prometheus text, for root/wheel only (like /admin/*), with the
// worker's requests and latencies, the daemon's queue, store batch times and lease state, and
// counters that grow with the requests served.
import t from 'tap';
import { withCast } from '../helpers/http.js';

const cast = await withCast(t, { env: { SERVICE_HTTP_WORKERS: '1' } });

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A strict reader of the text format: every sample belongs to a family declared by HELP and TYPE. */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line);
    if (help) {
      helps.add(help[1]!);
      continue;
    }
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$/.exec(line);
    if (type) {
      if (!helps.has(type[1]!)) throw new Error(`TYPE before HELP: ${line}`);
      types.set(type[1]!, type[2]!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const name = m[1]!;
    const family = name.replace(/_(bucket|sum|count)$/, '');
    if (!types.has(name) && !(types.get(family) === 'histogram'))
      throw new Error(`a sample of an undeclared family: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    const value = m[3] === '+Inf' ? Infinity : Number(m[3]);
    if (Number.isNaN(value)) throw new Error(`not a number: ${line}`);
    samples.push({ name, labels, value });
  }
  return { samples, types };
}

const pick = (samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
const value = (samples: Sample[], name: string, labels: Record<string, string> = {}): number =>
  pick(samples, name, labels).reduce((n, s) => n + s.value, 0);

t.test('a user who is not root or wheel gets 403; bad credentials 401', async (t) => {
  const r = await cast.alice.get('/metrics');
  t.equal(r.status, 403, r.text);
  t.equal(r.json?.code, 'EACCES');
  t.notMatch(r.text, /mdvfs_/, 'no metric in the refusal');
  const agent = await cast.bot.get('/metrics');
  t.equal(agent.status, 403, 'an agent neither');
  const bad = await cast.root.get('/metrics', { auth: 'Bearer not-a-token' });
  t.equal(bad.status, 401);
});

t.test('root and a wheel member get Prometheus text that parses, and the counters grow', async (t) => {
  const first = await cast.admin.get('/metrics');
  t.equal(first.status, 200, first.text);
  t.match(first.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const a = parse(first.text);
  for (const [name, type] of [
    ['mdvfs_http_requests_total', 'counter'],
    ['mdvfs_http_request_duration_seconds', 'histogram'],
    ['mdvfs_http_requests_in_flight', 'gauge'],
    ['mdvfs_http_daemon_requests_in_flight', 'gauge'],
    ['mdvfs_http_daemon_connects_total', 'counter'],
    ['mdvfs_daemon_requests_in_flight', 'gauge'],
    ['mdvfs_daemon_requests_total', 'counter'],
    ['mdvfs_store_batch_duration_seconds', 'histogram'],
    ['mdvfs_lease_state', 'gauge'],
    ['mdvfs_lease_epoch', 'gauge'],
    ['mdvfs_daemon_takeovers_total', 'counter'],
  ] as const)
    t.equal(a.types.get(name), type, `${name} is a ${type}`);
  t.ok(
    a.samples.every((s) => s.labels.worker === '1'),
    'every sample names the worker',
  );
  t.equal(value(a.samples, 'mdvfs_lease_state', { state: 'active' }), 1, 'the daemon is active');
  t.equal(value(a.samples, 'mdvfs_lease_state'), 1, 'and in one state only');
  t.equal(value(a.samples, 'mdvfs_http_daemon_connects_total'), 1, 'one daemon connection so far');
  t.ok(value(a.samples, 'mdvfs_daemon_requests_in_flight') >= 1, 'the daemon counts this scrape as in flight');

  const fsBefore = value(a.samples, 'mdvfs_http_requests_total', { route: 'fs', status: '200' });
  const missingBefore = value(a.samples, 'mdvfs_http_requests_total', { route: 'fs', status: '404' });
  const batchesBefore = value(a.samples, 'mdvfs_store_batch_duration_seconds_count');
  const rpcBefore = value(a.samples, 'mdvfs_daemon_requests_total');
  for (let i = 0; i < 3; i++) t.equal((await cast.alice.put(`/fs/m${i}.md`, `# ${i}\n`)).status, 200);
  t.equal((await cast.alice.get('/fs/m0.md')).status, 200);
  t.equal((await cast.alice.get('/fs/nothing-here.md')).status, 404);

  // root (no credentials in local mode) may read it too
  const second = await cast.root.get('/metrics');
  t.equal(second.status, 200);
  const b = parse(second.text).samples;
  t.equal(
    value(b, 'mdvfs_http_requests_total', { route: 'fs', status: '200' }),
    fsBefore + 4,
    'four more fs answers with 200',
  );
  t.equal(value(b, 'mdvfs_http_requests_total', { route: 'fs', status: '404' }), missingBefore + 1, 'one more 404');
  t.ok(value(b, 'mdvfs_http_requests_total', { route: 'metrics', status: '200' }) >= 1, 'the first scrape counted');
  t.ok(value(b, 'mdvfs_store_batch_duration_seconds_count') >= batchesBefore + 1, 'the writes took store batches');
  t.ok(value(b, 'mdvfs_daemon_requests_total') >= rpcBefore + 5, 'the daemon answered the requests');
  // a histogram's buckets are cumulative and end at +Inf = _count
  for (const [name, labels] of [
    ['mdvfs_http_request_duration_seconds', { route: 'fs' }],
    ['mdvfs_store_batch_duration_seconds', {}],
  ] as const) {
    const buckets = pick(b, `${name}_bucket`, labels);
    t.ok(buckets.length > 2, `${name} has buckets`);
    for (let i = 1; i < buckets.length; i++) t.ok(buckets[i]!.value >= buckets[i - 1]!.value, 'cumulative');
    t.equal(buckets.at(-1)!.labels.le, '+Inf');
    t.equal(buckets.at(-1)!.value, value(b, `${name}_count`, labels), '+Inf is the count');
    t.ok(value(b, `${name}_count`, labels) > 0);
  }
});
