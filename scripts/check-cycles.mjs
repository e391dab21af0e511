#!/usr/bin/env node
/**
 * Fails when a module of the project reaches itself through its imports (static, dynamic and
 * type-only imports and re-exports alike: each is a dependency between layers). Imports are read
 * with TypeScript's own pre-processor; `./x.js` resolves to `./x.ts` as the compiler does.
 * Usage: node scripts/check-cycles.mjs (prints each cycle and exits 1, or exits 0 silently).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = ['daemon', 'http', 'mcp', 'cli', 'fuse', 'web', 'bench', 'test'];

function files(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (name === 'node_modules' || name === 'dist' || name === 'build') continue;
    if (statSync(p).isDirectory()) files(p, out);
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function resolve(from, spec) {
  if (!spec.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), spec);
  for (const c of [base.replace(/\.js$/, '.ts'), `${base}.ts`, path.join(base, 'index.ts')])
    if (existsSync(c)) return c;
  return undefined;
}

const graph = new Map();
for (const d of DIRS) {
  if (!existsSync(path.join(ROOT, d))) continue;
  for (const f of files(path.join(ROOT, d))) {
    const info = ts.preProcessFile(readFileSync(f, 'utf8'), true, true);
    graph.set(f, [...new Set(info.importedFiles.map((i) => resolve(f, i.fileName)).filter((x) => x !== undefined))]);
  }
}

// Tarjan's strongly connected components, iterative (no recursion limit on long chains).
let index = 0;
const idx = new Map(),
  low = new Map(),
  onStack = new Set(),
  stack = [],
  cycles = [];
for (const start of graph.keys()) {
  if (idx.has(start)) continue;
  const work = [[start, 0]];
  idx.set(start, index);
  low.set(start, index);
  index++;
  stack.push(start);
  onStack.add(start);
  while (work.length > 0) {
    const top = work[work.length - 1];
    const [v, i] = top;
    const next = (graph.get(v) ?? [])[i];
    if (next !== undefined) {
      top[1]++;
      if (!graph.has(next)) continue;
      if (!idx.has(next)) {
        idx.set(next, index);
        low.set(next, index);
        index++;
        stack.push(next);
        onStack.add(next);
        work.push([next, 0]);
      } else if (onStack.has(next)) low.set(v, Math.min(low.get(v), idx.get(next)));
      continue;
    }
    work.pop();
    if (work.length > 0) {
      const u = work[work.length - 1][0];
      low.set(u, Math.min(low.get(u), low.get(v)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v))
        cycles.push(scc.map((f) => path.relative(ROOT, f)).sort());
    }
  }
}

if (cycles.length > 0) {
  for (const c of cycles) process.stderr.write(`import cycle among: ${c.join(', ')}\n`);
  process.exit(1);
}
