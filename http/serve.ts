/** `mdvfs serve`: daemon + HTTP sidecar as two processes (implemented in the REST issue). */
export async function runServe(): Promise<void> {
  throw new Error('mdvfs serve is not implemented yet');
}
