/**
 * Fixes a bug in @cocalc/fuse-native 2.4.3 (runs as this package's postinstall, after npm has built
 * the binding): its utimens hands JavaScript the access time in place of the modification time
 * (`FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)` where `l->mtime` belongs), so `touch -m -d`, `cp -p` and
 * `tar x` could not set a file's mtime through the mount. The one-line fix is applied to the C source
 * and the binding recompiled with the node-gyp that npm runs install scripts with; nothing is fetched.
 *
 * Idempotent: a binding already rebuilt from the fixed source (a stamp file beside it says so), or a
 * later release with another text, is left alone.
 * The binding is optional: when it is absent nothing happens; when the rebuild fails the source is
 * restored, the old binary stays in place (make stops before linking) and a warning is printed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** [buggy text, fixed text, where]: each applied once, inside the named region of fuse-native.c. */
const EDITS = [
  // utimens hands JS the access time twice: the second pair of arguments must be the mtime.
  ['FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)', 'FUSE_UINT64_TO_INTS_ARGV(l->mtime, 5)', 'utimens'],
  // UTIME_OMIT / UTIME_NOW reach JS as the distinct values 0 and 1 (ms), instead of both ~1073 ms.
  [
    'l->atime = timespec_to_uint64(&tv[0]);',
    'l->atime = tv[0].tv_nsec == UTIME_OMIT ? 0 : tv[0].tv_nsec == UTIME_NOW ? 1 : timespec_to_uint64(&tv[0]);',
    'utimens',
  ],
  [
    'l->mtime = timespec_to_uint64(&tv[1]);',
    'l->mtime = tv[1].tv_nsec == UTIME_OMIT ? 0 : tv[1].tv_nsec == UTIME_NOW ? 1 : timespec_to_uint64(&tv[1]);',
    'utimens',
  ],
  // Without this flag libfuse 2 silently drops a utimens that sets only one time (touch -m, touch -a).
  [
    'if (implemented[op_utimens]) ops.utimens = fuse_native_utimens;',
    'if (implemented[op_utimens]) { ops.utimens = fuse_native_utimens; ops.flag_utime_omit_ok = 1; }',
    'ops',
  ],
];

function warn(msg) {
  process.stderr.write(`mdvfs postinstall: ${msg}\n`);
}

function packageDir() {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@cocalc/fuse-native/package.json'));
  } catch {
    return undefined; // optional dependency not installed (no libfuse on this machine)
  }
}

function nodeGyp() {
  // npm sets this for lifecycle scripts; by hand, fall back to the copy bundled with npm.
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(
      path.dirname(process.execPath),
      '..',
      'lib',
      'node_modules',
      'npm',
      'node_modules',
      'node-gyp',
      'bin',
      'node-gyp.js',
    ),
  ];
  return candidates.find((p) => p !== undefined && p !== '' && existsSync(p));
}

function region(text, where) {
  const from =
    where === 'utimens' ? text.indexOf('FUSE_METHOD_VOID(utimens') : text.indexOf('struct fuse_operations ops');
  const to = where === 'utimens' ? text.indexOf('FUSE_METHOD_VOID(release') : text.indexOf('fuse_bindings_dummy');
  return from >= 0 && to > from ? [from, to] : undefined;
}

/** The source with every edit applied, or undefined when it is not the text these edits were made for. */
function patched(text) {
  let out = text;
  for (const [bug, fix, where] of EDITS) {
    const r = region(out, where);
    if (r === undefined) return undefined;
    const part = out.slice(r[0], r[1]);
    if (part.includes(fix)) continue; // this edit is in already
    if (!part.includes(bug)) return undefined; // another release: leave it alone
    out = out.slice(0, r[0]) + part.replace(bug, fix) + out.slice(r[1]);
  }
  return out;
}

const dir = packageDir();
if (dir !== undefined) {
  const src = path.join(dir, 'fuse-native.c');
  // Written only after a build of the fixed source succeeded: a source already fixed without it (an
  // install interrupted during the rebuild) is built again.
  const stamp = path.join(dir, 'build', 'Release', '.mdvfs-utimens-fix');
  const text = existsSync(src) ? readFileSync(src, 'utf8') : '';
  const fixed = patched(text);
  if (fixed === undefined) {
    if (text !== '') warn('@cocalc/fuse-native is not the 2.4.3 source this patch was made for; left as it is');
  } else if (fixed !== text || !existsSync(stamp)) {
    const gyp = nodeGyp();
    if (gyp === undefined) {
      warn('node-gyp not found: the FUSE binding keeps its utimens bug (mtime cannot be set through a mount)');
    } else {
      writeFileSync(src, fixed);
      try {
        execFileSync(
          process.execPath,
          [gyp, existsSync(path.join(dir, 'build', 'config.gypi')) ? 'build' : 'rebuild', '--loglevel=warn'],
          { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] },
        );
        writeFileSync(
          stamp,
          'utimens: mtime argument, UTIME_OMIT/UTIME_NOW, utime_omit_ok (scripts/patch-fuse-native.mjs)\n',
        );
        warn('patched @cocalc/fuse-native utimens (mtime, UTIME_OMIT/UTIME_NOW) and rebuilt the binding');
      } catch (err) {
        if (fixed !== text) writeFileSync(src, text);
        warn(`could not rebuild the patched FUSE binding (${err.message}); it keeps its utimens bug`);
      }
    }
  }
}
