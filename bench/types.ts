/**
 * The one result shape every comparison module returns; `bench/run.ts` turns these into
 * `bench/results/latest.json`, `docs/benchmarks.md` and `docs/benchmarks.svg`.
 *
 * Conventions (so one chart can show every row):
 * - `ours` / `baseline`: the medians of the paired repetitions, in `unit` (null when not measured).
 * - `ratio`: oriented so that higher is better for mdvfs (a speed-up such as baseline time / our time,
 *   or a fraction such as our req/s / baseline req/s). null when there is nothing to compare.
 * - `target`: human text whose first number is the threshold the ratio must reach, e.g. `≥ 10` or
 *   `≥ 0.7`; `—` when the row is informational.
 * - `met`: whether the ratio reaches the target; null when there is no target or the row failed (then
 *   `note` says why).
 */
export interface BenchRow {
  name: string;
  ours: number | null;
  baseline: number | null;
  unit: string;
  ratio: number | null;
  target: string;
  met: boolean | null;
  note?: string;
}

export interface BenchTable {
  title: string;
  rows: BenchRow[];
}

export interface BenchOptions {
  quick: boolean;
}

export type BenchFn = (opts: BenchOptions) => Promise<BenchTable | BenchTable[]>;
