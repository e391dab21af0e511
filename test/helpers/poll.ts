/** Polls until `fn` is true (a guard against hanging, not an assertion on timing). */
export async function until(fn: () => Promise<boolean> | boolean, what: string, ms = 30000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
