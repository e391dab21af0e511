/**
 * `.mdvfsignore`: paths kept out of history (status, commits, diffs against the working tree,
 * reverts), in gitignore syntax matched by the `ignore` package. The rules are a default list
 * (editors' swap and backup files, `.git/` and the like) plus the `.mdvfsignore` file of every
 * directory above an entry, the deeper file deciding (as with git). They depend only on where an
 * entry is, never on who asks or on the scope: a workspace's history follows the files above its
 * root too, and an unreadable ignore file still applies to everyone.
 *
 * Applied where the working tree is hashed (`Trees.hashDir`): an ignored entry is left out of its
 * directory's tree, so everything built on those trees (status, commit, diff, revert) never sees
 * it, at no cost beyond one test per entry hashed. Compiled rules are kept by content id (a changed
 * file is a new id), and decisions per name for the default list.
 */
import ignore from 'ignore';
import type { DirNode } from '../core/inode.js';

export const IGNORE_FILE = '.mdvfsignore';

/** Applied everywhere, below every `.mdvfsignore` (a `!pattern` there brings a name back). */
export const DEFAULT_IGNORES: readonly string[] = [
  // vim: swap files, and the file it creates to test whether a directory is writable
  '*.swp',
  '*.swo',
  '*.swn',
  '*.swx',
  '4913',
  // emacs and others: backups, lock links, auto-saves
  '*~',
  '.#*',
  '\\#*#',
  // LibreOffice locks, files FUSE keeps while deleted but open, macOS and Windows metadata
  '.~lock.*#',
  '.fuse_hidden*',
  '.DS_Store',
  '._*',
  'Thumbs.db',
  // other version control inside the tree
  '.git/',
  '.hg/',
  '.svn/',
];

/**
 * Security: gitignore globs become regular expressions, and several `*` in one pattern backtrack
 * polynomially on long names (`*a*a*a*a*b` on 255 `a`s holds the event loop for seconds); the rules
 * run for every entry hashed, for every user. A line with more than MAX_STARS `*` is skipped, and
 * only the first MAX_RULES rules and MAX_BYTES bytes of a file count.
 */
export const MAX_STARS = 3;
export const MAX_RULES = 256;
export const MAX_BYTES = 64 * 1024;

/**
 * The longest run of plain characters of a gitignore rule: text that every path the rule matches
 * contains ('' when it has none, e.g. `*`). Only what comes before a class (`[`) counts, and
 * wildcards, escapes, spaces and slashes end a run, so a run is never more than the rule requires.
 */
export function requiredText(rule: string): string {
  const body = (rule.startsWith('!') ? rule.slice(1) : rule).split('[')[0]!;
  let best = '';
  for (const run of body.split(/[*?\\\s/]/)) if (run.length > best.length) best = run;
  return best;
}

/**
 * A compiled rule set with its own bounded memo (the `ignore` package's caches grow with every path
 * tested). A path holding none of the rules' `requiredText` matches no rule and is answered at
 * once, without the package or the memo: most names a hash of the working tree tests (hundreds of
 * thousands of distinct file names against the default list) then cost a few substring searches
 * and leave nothing behind for the garbage collector.
 */
class Matcher {
  private ig: ignore.Ignore;
  private readonly memo = new Map<string, 0 | 1 | 2>(); // 0 no match, 1 ignored, 2 re-included
  /** each rule's `requiredText`, or undefined when a rule has none (every path then goes to the package) */
  private readonly needles: readonly string[] | undefined;
  constructor(private readonly rules: readonly string[]) {
    this.ig = this.compile();
    const needles = [...new Set(rules.map(requiredText))];
    this.needles = needles.includes('') ? undefined : needles;
  }

  private compile(): ignore.Ignore {
    return ignore({ ignorecase: false }).add([...this.rules]);
  }

  test(path: string): 0 | 1 | 2 {
    if (this.needles !== undefined && !holdsAny(path, this.needles)) return 0;
    const known = this.memo.get(path);
    if (known !== undefined) return known;
    if (this.memo.size >= MEMO_MAX) {
      this.memo.clear();
      this.ig = this.compile(); // drops the package's own caches with ours
    }
    let v: 0 | 1 | 2 = 0;
    ignoreStats.compiled++;
    try {
      const r = this.ig.test(path);
      v = r.ignored ? 1 : r.unignored ? 2 : 0;
    } catch {
      // a name the package refuses as a path: no rule matches it
    }
    this.memo.set(path, v);
    return v;
  }
}
const MEMO_MAX = 100_000;

function holdsAny(path: string, needles: readonly string[]): boolean {
  for (const n of needles) if (path.includes(n)) return true;
  return false;
}

/** Debug counter (tests): paths a compiled rule set was run on (the others were answered by `requiredText` or the memo). */
export const ignoreStats = { compiled: 0 };

/** The rules of one ignore file, from its bytes. */
export function parseRules(data: Buffer): string[] {
  const out: string[] = [];
  for (const raw of data.subarray(0, MAX_BYTES).toString('utf8').split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '' || line.startsWith('#')) continue;
    let stars = 0;
    for (const ch of line) if (ch === '*') stars++;
    if (stars > MAX_STARS) continue;
    out.push(line);
    if (out.length >= MAX_RULES) break;
  }
  return out;
}

/** One ignore file on the way down to a directory: its matcher, and the directory's path below it (`a/b/`, or ''). */
export interface Layer {
  m: Matcher;
  prefix: string;
}

export class Ignores {
  private readonly defaults = new Matcher(DEFAULT_IGNORES);
  /** compiled ignore files by content id (a changed file is a new id; the map is emptied at 1,024) */
  private readonly byBlob = new Map<string, Matcher>();

  constructor(private readonly content: (blob: string) => Buffer) {}

  /**
   * The ignore files that govern the entries of `dir`, outermost first (O(depth) lookups). The
   * prefixes are built only up to the outermost ignore file: with none above (the usual case), a
   * deep directory costs no string at all.
   */
  layersOf(dir: DirNode): Layer[] {
    let outermost: DirNode | undefined;
    for (let d: DirNode | null = dir; d !== null; d = d.parent)
      if (d.children.get(IGNORE_FILE)?.kind === 'file') outermost = d;
    if (outermost === undefined) return [];
    const layers: Layer[] = [];
    let below = '';
    for (let d: DirNode | null = dir; d !== null; d = d.parent) {
      const f = d.children.get(IGNORE_FILE);
      if (f !== undefined && f.kind === 'file') layers.push({ m: this.matcher(f.blob), prefix: below });
      if (d === outermost) break;
      below = d.name + '/' + below;
    }
    return layers.reverse();
  }

  /**
   * What `layersOf(child)` returns, from the layers of its parent (O(layers), no walk up): a
   * traversal going down passes them along, so a deep chain costs O(depth), not O(depth²).
   */
  childLayers(parent: readonly Layer[], child: DirNode): Layer[] {
    const out = parent.map((l) => ({ m: l.m, prefix: l.prefix + child.name + '/' }));
    const f = child.children.get(IGNORE_FILE);
    if (f !== undefined && f.kind === 'file') out.push({ m: this.matcher(f.blob), prefix: '' });
    return out;
  }

  /** Whether `dir` or a directory above it holds an ignore file. */
  governed(dir: DirNode | null): boolean {
    for (let d = dir; d !== null; d = d.parent) if (d.children.get(IGNORE_FILE)?.kind === 'file') return true;
    return false;
  }

  /** Whether an entry `name` (a directory when `isDir`) of a directory governed by `layers` is ignored. */
  ignored(layers: readonly Layer[], name: string, isDir: boolean): boolean {
    const leaf = isDir ? name + '/' : name;
    let out = this.defaults.test(leaf) === 1;
    for (const l of layers) {
      const r = l.m.test(l.prefix + leaf);
      if (r !== 0) out = r === 1;
    }
    return out;
  }

  private matcher(blob: string): Matcher {
    let m = this.byBlob.get(blob);
    if (m === undefined) {
      if (this.byBlob.size >= 1024) this.byBlob.clear();
      m = new Matcher(parseRules(this.content(blob)));
      this.byBlob.set(blob, m);
    }
    return m;
  }
}
