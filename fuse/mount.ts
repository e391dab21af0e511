/** `mdvfs mount` / `mdvfs umount` (implemented in the FUSE issue). */
export interface MountOptions {
  user?: string;
  token?: string;
  onBehalfOf?: string;
  readOnly?: boolean;
}
export async function runMount(_dir: string, _opts: MountOptions): Promise<void> {
  throw new Error('mdvfs mount is not implemented yet');
}
export async function runUmount(_dir: string): Promise<void> {
  throw new Error('mdvfs umount is not implemented yet');
}
