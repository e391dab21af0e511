/** Does a change at `changed` affect `watched`? (itself, something inside it, or an ancestor moved or deleted) */
export function affects(changed: string, watched: string): boolean {
  if (changed === watched) return true;
  if (changed === '/' || watched === '/') return true;
  return watched.startsWith(`${changed}/`) || changed.startsWith(`${watched}/`);
}
