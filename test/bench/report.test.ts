/**
 * The benchmark harness's own logic (it never runs in the test suite itself): statistics, paired
 * repetitions, row ratios and targets, and the report: every row in its table, unmet targets listed
 * with their finding, failed modules shown with the reason, and a chart bar per ratio.
 */
import t from 'tap';
import { ANALYSIS, renderMarkdown, renderSvg, type Results } from '../../bench/report.js';
import { compareRow, errorRow, median, paired, percentile, targetValue } from '../../bench/util.js';

void t.test('median and percentile', async (t) => {
  t.equal(median([5, 1, 3]), 3);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.ok(Number.isNaN(median([])));
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
  t.equal(percentile(xs, 99), 99);
  t.equal(percentile(xs, 50), 50);
  t.equal(percentile([7], 99), 7);
});

void t.test('paired runs a warm-up, at least 5 repetitions, and alternates which side goes first', async (t) => {
  const order: string[] = [];
  let o = 0;
  let b = 0;
  const r = await paired({
    warmup: 1,
    reps: 3, // raised to the minimum of 5
    ours: async () => {
      order.push('o');
      return ++o;
    },
    baseline: async () => {
      order.push('b');
      return 10 * ++b;
    },
  });
  t.equal(r.oursAll.length, 5);
  t.equal(r.baselineAll.length, 5);
  t.same(order, ['o', 'b', 'o', 'b', 'b', 'o', 'o', 'b', 'b', 'o', 'o', 'b']);
  t.same(r.oursAll, [2, 3, 4, 5, 6], 'the warm-up is not measured');
  t.equal(r.ours, 4);
  t.equal(r.baseline, 40);
});

void t.test('rows: ratio oriented so that higher is better, target met or not', async (t) => {
  const faster = compareRow({ name: 'x', unit: 'ms', better: 'lower', ours: 10, baseline: 200, target: 10 });
  t.equal(faster.ratio, 20);
  t.equal(faster.met, true);
  t.equal(faster.target, '≥ 10');
  const slower = compareRow({ name: 'y', unit: 'req/s', better: 'higher', ours: 300, baseline: 1000, target: 0.7 });
  t.equal(slower.ratio, 0.3);
  t.equal(slower.met, false);
  const info = compareRow({ name: 'z', unit: 'MiB', better: 'lower', ours: 5, baseline: 5 });
  t.equal(info.met, null);
  t.equal(info.target, '—');
  const failed = errorRow('w', new Error('boom\nstack'));
  t.equal(failed.met, null);
  t.equal(failed.note, 'error: boom');
  t.equal(targetValue('≥ 0.33 (within 3×)'), 0.33);
  t.ok(Number.isNaN(targetValue('—')));
});

void t.test('the report lists every row, the unmet targets with their finding, and what did not run', async (t) => {
  const restFinding = ANALYSIS.find((a) => a.module === 'rest' && a.row.test('GET 4 KiB, c=32: mdvfs vs bare express'));
  t.ok(restFinding, 'the REST c=32 rows have a finding');
  const res: Results = {
    date: '2026-01-01T00:00:00.000Z',
    command: 'npm run bench -- --quick',
    quick: true,
    seconds: 100,
    meta: {
      cpu: 'cpu',
      cores: 2,
      memoryGiB: 4,
      node: 'v20',
      kernel: '6.1',
      os: 'linux',
      commit: 'abcdef0123456789',
      dirty: false,
      libraries: { express: '5.0.0' },
      tools: { git: 'git', grep: 'grep', bindfs: 'bindfs', sqlite: '12' },
    },
    modules: [
      {
        key: 'writes',
        seconds: 3,
        tables: [
          {
            title: 'Group commit',
            rows: [
              compareRow({ name: 'burst', unit: 'writes/s', better: 'higher', ours: 5000, baseline: 200, target: 10 }),
            ],
          },
        ],
      },
      {
        key: 'rest',
        seconds: 3,
        tables: [
          {
            title: 'REST',
            rows: [
              compareRow({
                name: 'GET 4 KiB, c=32: mdvfs vs bare express',
                unit: 'req/s',
                better: 'higher',
                ours: 300,
                baseline: 1000,
                target: 0.7,
              }),
              compareRow({ name: 'unexplained', unit: 'req/s', better: 'higher', ours: 1, baseline: 2, target: 1 }),
            ],
          },
        ],
      },
      {
        key: 'fuse',
        seconds: 0,
        tables: [
          { title: 'FUSE', rows: [{ ...errorRow('FUSE', 'x'), note: 'not run: bench/fuse.ts does not exist yet' }] },
        ],
      },
    ],
  };
  const md = renderMarkdown(res);
  t.match(md, /`npm run bench -- --quick`/);
  t.match(md, /\| burst \| 5,000 \| 200 \| writes\/s \| 25\.0× \| ≥ 10 \| ✅ yes \|/);
  t.match(md, /\| GET 4 KiB, c=32: mdvfs vs bare express \| REST \| 0\.30× \| ≥ 0\.7 \| finding 1 \|/);
  t.match(md, /\| unexplained \| REST \| 0\.50× \| ≥ 1 \| not profiled yet \|/);
  t.match(md, new RegExp(`### Finding 1: ${restFinding!.title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
  t.match(md, /## Comparisons that did not run\n\n- FUSE: not run: bench\/fuse\.ts does not exist yet/);
  t.notMatch(md, /Finding 2/, 'one finding per cause, not per row');

  const svg = renderSvg(res);
  t.match(svg, /^<svg [^>]*>/);
  t.match(svg, /<\/svg>\n$/);
  t.equal((svg.match(/<rect x="450"/g) ?? []).length, 3, 'one bar per row with a ratio');
  t.match(svg, /fill="#2e8b57"/, 'a met target is green');
  t.match(svg, /fill="#c0392b"/, 'a missed target is red');
  t.match(svg, />not run</);
});
