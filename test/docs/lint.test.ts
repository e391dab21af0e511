// The lint checks run with the suite: Prettier (the sources keep one format), ESLint (types, the front ends' import boundary), the lint
// tsconfig (tests and benchmarks type-check), knip (no unused files, exports or dependencies) and
// scripts/check-cycles.mjs (no module reaches itself through its imports).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = (name: string): string =>
  name === 'node' ? process.execPath : path.join(ROOT, 'node_modules', '.bin', name);

for (const [name, args] of [
  ['prettier', ['--check', '.']],
  ['eslint', ['.']],
  ['tsc', ['-p', 'tsconfig.lint.json']],
  ['knip', []],
  ['node', ['scripts/check-cycles.mjs']],
] as const) {
  t.test(`${name} ${args.join(' ')}`, async (t) => {
    const r = spawnSync(bin(name), [...args], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    t.equal(r.status, 0, `${name} passes:\n${r.stdout}${r.stderr}`.slice(0, 4000));
  });
}
