/** Search: grep over contents (in the worker pool), find by name, the tree outline. */
import { callerKey, capPaths, compilePattern, find, grepFiles, tree } from '../search/search.js';
import type { AreaOps, Kit } from './context.js';

export const searchOps = (k: Kit): AreaOps<'search'> => ({
  'search.grep': async (p, { cred }) => {
    const flags = compilePattern(p.pattern, p.ignore_case === true);
    const files = await grepFiles(k.d.vfs, cred, p.path, p.recursive === true, (x) => k.show(cred, x));
    const offset = p.offset ?? 0;
    const r = await k.d.grep.run(
      { pattern: p.pattern, flags, max: p.max_results ?? 10000, offset, files },
      callerKey(cred),
    );
    return {
      results: r.results,
      count: r.results.length,
      truncated: r.truncated,
      ...(r.skipped_binary > 0 ? { skipped_binary: r.skipped_binary } : {}),
      ...(r.more ? { next_offset: offset + r.results.length } : {}),
    };
  },
  'search.find': async (p, { cred }) => {
    const all = await find(k.d.vfs, k.d.grep, cred, p.path, p.name, p.type, (x) => k.show(cred, x));
    const { results, truncated } = capPaths(all);
    return truncated ? { results, count: results.length, truncated } : { results, count: results.length };
  },
  'search.tree': (p, { cred }) => tree(k.d.vfs, cred, p.path, k.show(cred, p.path), p.depth),
});
