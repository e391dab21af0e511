/** A one-line progress bar on stderr, drawn only when stderr is a terminal and the job is large. */

export class Progress {
  private done = 0;
  private lastDraw = 0;
  private readonly enabled: boolean;

  constructor(
    private readonly label: string,
    private readonly total: number,
    stream: NodeJS.WriteStream = process.stderr,
    threshold = 100,
  ) {
    this.stream = stream;
    this.enabled = stream.isTTY === true && total >= threshold;
  }

  private readonly stream: NodeJS.WriteStream;

  tick(n = 1): void {
    this.done += n;
    if (!this.enabled) return;
    const now = Date.now();
    // Redrawing on every file would cost more than the import itself on a slow terminal.
    if (now - this.lastDraw < 80 && this.done < this.total) return;
    this.lastDraw = now;
    const width = Math.max(10, Math.min(40, (this.stream.columns ?? 80) - this.label.length - 30));
    const frac = this.total === 0 ? 1 : Math.min(1, this.done / this.total);
    const fill = Math.round(frac * width);
    this.stream.write(
      `\r${this.label} [${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${this.done}/${this.total} ${Math.floor(frac * 100)}%`,
    );
  }

  /** Erases the bar so that later messages start on a clean line. */
  finish(): void {
    if (this.enabled && this.lastDraw !== 0) this.stream.write('\r\x1b[K');
  }

  /** Writes a message above the bar (errors while it is drawn). */
  interrupt(): void {
    if (this.enabled && this.lastDraw !== 0) {
      this.stream.write('\r\x1b[K');
      this.lastDraw = 0;
    }
  }
}

/** Runs `fn` over `items` with at most `limit` in flight (requests to the daemon are pipelined). */
export async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
