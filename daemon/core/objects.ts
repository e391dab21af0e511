/**
 * Content-addressed objects, as pure models: blobs, trees and commits are hashed as
 * SHA-256 over `<type> <length>\0<payload>` (git's scheme with a stronger hash), serialised
 * canonically, and verified whenever they are read back.
 */
import { createHash } from 'node:crypto';
import { VfsError } from '../errors.js';

export type ObjectType = 'blob' | 'tree' | 'commit';

export function objectId(type: ObjectType, payload: Buffer): string {
  const h = createHash('sha256');
  h.update(`${type} ${payload.length}\0`);
  h.update(payload);
  return h.digest('hex');
}

/** Throws EIO when a payload does not hash to its id (a corrupt store). */
export function verifyObject(id: string, type: ObjectType, payload: Buffer): void {
  if (objectId(type, payload) !== id)
    throw new VfsError(
      'EIO',
      'verify',
      undefined,
      `object ${id.slice(0, 12)} (${type}) is corrupt: its content does not match its hash`,
    );
}

export type TreeEntryKind = 'f' | 'd' | 'l'; // file, directory, symlink

export interface TreeEntry {
  name: string;
  kind: TreeEntryKind;
  mode: number;
  uid: number;
  gid: number;
  /** blob id for files, tree id for directories, link target for symlinks */
  ref: string;
  size: number;
}

/** Canonical tree payload: entries sorted by name, one JSON array per entry. */
export function encodeTree(entries: readonly TreeEntry[]): Buffer {
  const rows = entries.map((e) => [e.name, e.kind, e.mode, e.uid, e.gid, e.ref, e.size]);
  return Buffer.from(JSON.stringify(rows), 'utf8');
}

export function decodeTree(payload: Buffer): TreeEntry[] {
  const rows = JSON.parse(payload.toString('utf8')) as [
    string,
    TreeEntryKind,
    number,
    number,
    number,
    string,
    number,
  ][];
  return rows.map(([name, kind, mode, uid, gid, ref, size]) => ({ name, kind, mode, uid, gid, ref, size }));
}

export interface CommitObject {
  tree: string; // tree id of the scope's root
  parent: string | null;
  author: string;
  on_behalf_of?: string;
  /** '' for the whole filesystem, a workspace id for a workspace's own history */
  scope: string;
  /** absolute path the tree was taken at ('/' or a workspace root) */
  root: string;
  message: string;
  timestamp: number; // Unix seconds
  changes: number;
  revert_of?: string;
  /** Changed paths (scope-relative) last changed by someone other than the committer; absent in older commits. */
  attribution?: CommitAttribution[];
}

/** [path, by] or [path, by, on_behalf_of]: who last changed a committed path. */
export type CommitAttribution = [string, string] | [string, string, string];

export function encodeCommit(c: CommitObject): Buffer {
  const ordered: CommitObject = {
    tree: c.tree,
    parent: c.parent,
    author: c.author,
    scope: c.scope,
    root: c.root,
    message: c.message,
    timestamp: c.timestamp,
    changes: c.changes,
  };
  if (c.on_behalf_of !== undefined) ordered.on_behalf_of = c.on_behalf_of;
  if (c.revert_of !== undefined) ordered.revert_of = c.revert_of;
  if (c.attribution !== undefined) ordered.attribution = c.attribution;
  return Buffer.from(JSON.stringify(ordered), 'utf8');
}

export function decodeCommit(payload: Buffer): CommitObject {
  return JSON.parse(payload.toString('utf8')) as CommitObject;
}

export const SHORT = 12;
export function shortId(id: string): string {
  return id.slice(0, SHORT);
}
