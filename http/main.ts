/** `mdvfs http`: the HTTP sidecar alone (implemented in the REST issue). */
export async function runHttp(): Promise<void> {
  throw new Error('mdvfs http is not implemented yet');
}
