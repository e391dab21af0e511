/**
 * Metrics in the Prometheus text exposition format (version 0.0.4), written by hand: counters,
 * gauges and histograms with fixed buckets. The daemon keeps its own (daemon/metrics.ts) and hands
 * them over in `sys.metrics`; each HTTP worker keeps its requests' and renders both at `GET /metrics`.
 */

/** Latency buckets in seconds, for HTTP requests and store batches alike. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** A histogram as it crosses the socket: `counts[i]` observations up to `le[i]` (cumulative), then all of them in `count`. */
export interface HistogramSnapshot {
  le: number[];
  counts: number[];
  count: number;
  sum: number;
}

/** Observations counted in fixed buckets (upper bounds in seconds, ascending). */
export class Histogram {
  private readonly counts: number[];
  private count = 0;
  private sum = 0;

  constructor(private readonly le: readonly number[] = LATENCY_BUCKETS) {
    this.counts = le.map(() => 0);
  }

  observe(seconds: number): void {
    this.count++;
    this.sum += seconds;
    // Non-cumulative here (one increment per observation); the snapshot accumulates.
    const i = this.le.findIndex((b) => seconds <= b);
    if (i >= 0) this.counts[i]!++;
  }

  snapshot(): HistogramSnapshot {
    let acc = 0;
    return { le: [...this.le], counts: this.counts.map((c) => (acc += c)), count: this.count, sum: this.sum };
  }
}

export type Labels = Record<string, string>;

/** A label value escaped as the format says (backslash, double quote, newline). */
function labelText(labels: Labels | undefined): string {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return '';
  return `{${entries.map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')}}`;
}

function num(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** One exposition: metric families in the order they are added, each with its HELP and TYPE lines. */
export class Exposition {
  private readonly lines: string[] = [];
  /** Labels every sample carries (e.g. the HTTP worker). */
  constructor(private readonly common: Labels = {}) {}

  private family(name: string, type: string, help: string): void {
    this.lines.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`);
  }

  private sample(name: string, labels: Labels | undefined, value: number): void {
    this.lines.push(`${name}${labelText({ ...this.common, ...labels })} ${num(value)}`);
  }

  counter(name: string, help: string, samples: readonly { labels?: Labels; value: number }[]): this {
    this.family(name, 'counter', help);
    for (const s of samples) this.sample(name, s.labels, s.value);
    return this;
  }

  gauge(name: string, help: string, samples: readonly { labels?: Labels; value: number }[]): this {
    this.family(name, 'gauge', help);
    for (const s of samples) this.sample(name, s.labels, s.value);
    return this;
  }

  histogram(name: string, help: string, series: readonly { labels?: Labels; h: HistogramSnapshot }[]): this {
    this.family(name, 'histogram', help);
    for (const { labels, h } of series) {
      h.le.forEach((le, i) => this.sample(`${name}_bucket`, { ...labels, le: num(le) }, h.counts[i] ?? 0));
      this.sample(`${name}_bucket`, { ...labels, le: '+Inf' }, h.count);
      this.sample(`${name}_sum`, labels, h.sum);
      this.sample(`${name}_count`, labels, h.count);
    }
    return this;
  }

  toString(): string {
    return `${this.lines.join('\n')}\n`;
  }
}
