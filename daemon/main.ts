/** `mdvfs daemon`: runs the daemon in the foreground (being implemented in the foundation issue). */
export async function runDaemon(): Promise<void> {
  throw new Error('not implemented yet');
}
