/** Messages from the sidecar to `mdvfs serve` over the IPC channel (settings: daemon/rpc/settings.ts). */

export interface ListeningMessage {
  type: 'listening';
  host: string;
  port: number;
}
