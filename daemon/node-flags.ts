/**
 * Node flags of the daemon's processes and threads, declared once for everyone who starts them
 * (`connectDaemon`, `mdvfs serve`, the benchmarks) and for the grep workers.
 */

/**
 * V8 flags of every daemon process. A 64 MiB young generation (default 16): a listing page or a
 * diff makes megabytes of short-lived objects, which with the default were promoted and brought on
 * full collections of a heap holding a million inodes (the stall benchmark's listing row: worst
 * small read 104 ms with the default, 69 ms with this; rm -r 73 → 49 ms, `docs/benchmarks.md`).
 * The young generation grows to it only under such load.
 */
export const DAEMON_V8_FLAGS: readonly string[] = ['--max-semi-space-size=64'];

/**
 * The module-loading flags of `argv` (what a child or a worker needs to load TypeScript sources:
 * --import, --loader, --require, --conditions, --enable-source-maps), nothing else: not code to run
 * (`-e`, `--test`), not V8 heap flags, which a worker thread refuses.
 */
export function loaderFlags(argv: readonly string[]): string[] {
  const keep: string[] = [];
  const withValue = new Set(['--import', '--loader', '--experimental-loader', '--require', '-r', '--conditions', '-C']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--enable-source-maps' || /^--(import|loader|experimental-loader|require|conditions)=/.test(a))
      keep.push(a);
    else if (withValue.has(a) && i + 1 < argv.length) keep.push(a, argv[++i]!);
  }
  return keep;
}
