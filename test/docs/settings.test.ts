// The README's settings table lists exactly the SERVICE_* variables the code reads (settings.ts's
// SETTINGS), and the code reads no SERVICE_* variable that is not in that list.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../../daemon/rpc/settings.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

t.test('the README settings table and SETTINGS agree', async (t) => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const rows = readme.split('\n').filter((l) => /^\| `SERVICE_/.test(l));
  const documented = new Set(
    rows.flatMap((l) => [...l.split('|')[1]!.matchAll(/`(SERVICE_[A-Z_]+)`/g)].map((m) => m[1]!)),
  );
  t.same([...documented].sort(), [...SETTINGS].sort());
});

t.test('the code reads only listed SERVICE_* variables', async (t) => {
  const used = new Set<string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = path.join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts'))
        for (const m of readFileSync(p, 'utf8').matchAll(/\bSERVICE_[A-Z][A-Z_]*[A-Z]\b/g)) used.add(m[0]);
    }
  };
  for (const d of ['daemon', 'http', 'mcp', 'cli', 'fuse']) walk(path.join(ROOT, d));
  const listed = new Set<string>(SETTINGS);
  t.same([...used].filter((n) => !listed.has(n)).sort(), [], 'every SERVICE_* name in the code is in SETTINGS');
});
