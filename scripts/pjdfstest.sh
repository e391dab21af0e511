#!/usr/bin/env bash
# pjdfstest (https://github.com/pjd/pjdfstest) through a real mdvfs mount, with pass/fail counts per
# group of tests. pjdfstest's code is not part of this repository: give its source directory (a
# checkout or an unpacked snapshot). It is built in a temporary directory (a config.h for Linux/glibc
# written here, no autotools needed), a fresh daemon and a mount as root are started there, and each
# test file runs with the mount as its working directory. Needs root, /dev/fuse, gcc, `npm run build`.
#
#   scripts/pjdfstest.sh <pjdfstest-source-dir> [group...]    e.g. ... ~/src/pjdfstest chmod rename
#
# Writes the TAP output of every test file under $PJDFSTEST_OUT (default: the temporary directory, kept when it is set).
set -euo pipefail

src=${1:?usage: scripts/pjdfstest.sh <pjdfstest-source-dir> [group...]}
shift
src=$(cd "$src" && pwd)
[ -f "$src/pjdfstest.c" ] && [ -d "$src/tests" ] || { echo "pjdfstest.sh: $src is not a pjdfstest source directory" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "pjdfstest.sh: run as root (chown tests, and the mount needs /dev/fuse)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cli="$repo/dist/cli/main.js"
[ -f "$cli" ] || { echo "pjdfstest.sh: $cli is missing: run npm run build first" >&2; exit 2; }

work=$(mktemp -d /tmp/mdvfs-pjdfstest-XXXXXX)
out=${PJDFSTEST_OUT:-$work/out}
mkdir -p "$out" "$work/data" "$work/mnt"
daemon_pid=
mount_pid=
cleanup() {
  [ -n "$mount_pid" ] && kill "$mount_pid" 2>/dev/null && wait "$mount_pid" 2>/dev/null || true
  mountpoint -q "$work/mnt" && fusermount3 -uz "$work/mnt" 2>/dev/null || true
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  mountpoint -q "$work/mnt" || rm -rf "$work/data" "$work/build"
  rmdir "$work/mnt" 2>/dev/null || true
  [ -n "${PJDFSTEST_OUT:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# ---- build pjdfstest (Linux, glibc: what its configure script would find) ----
mkdir -p "$work/build"
cp -r "$src/pjdfstest.c" "$src/tests" "$work/build/"
cat > "$work/build/config.h" <<'EOF'
#define _GNU_SOURCE 1
#define HAVE_SYS_SYSMACROS_H 1
#define HAVE_FACCESSAT 1
#define HAVE_FCHMODAT 1
#define HAVE_FCHOWNAT 1
#define HAVE_FSTATAT 1
#define HAVE_LINKAT 1
#define HAVE_MKDIRAT 1
#define HAVE_MKFIFOAT 1
#define HAVE_MKNODAT 1
#define HAVE_OPENAT 1
#define HAVE_POSIX_FALLOCATE 1
#define HAVE_READLINKAT 1
#define HAVE_RENAMEAT 1
#define HAVE_SYMLINKAT 1
#define HAVE_UNLINKAT 1
#define HAVE_UTIMENSAT 1
#define HAVE_STRUCT_STAT_ST_ATIM 1
#define HAVE_STRUCT_STAT_ST_MTIM 1
#define HAVE_STRUCT_STAT_ST_CTIM 1
EOF
gcc -O1 -w -I"$work/build" -o "$work/build/pjdfstest" "$work/build/pjdfstest.c"

# ---- a daemon and a mount of its own ----
export SERVICE_DATA_DIR="$work/data"
node "$cli" daemon 2>"$out/daemon.log" &
daemon_pid=$!
node "$cli" mount "$work/mnt" 2>"$out/mount.log" &
mount_pid=$!
for _ in $(seq 300); do
  grep -q 'mounted .* at ' "$out/mount.log" 2>/dev/null && break
  kill -0 "$mount_pid" 2>/dev/null || { echo "pjdfstest.sh: the mount exited:" >&2; cat "$out/mount.log" >&2; exit 1; }
  sleep 0.1
done
grep -q 'mounted .* at ' "$out/mount.log" || { echo "pjdfstest.sh: the mount did not come up" >&2; exit 1; }

# ---- run: every test file in its own directory under the mount ----
cd "$work/build/tests"
groups=("$@")
[ ${#groups[@]} -gt 0 ] || mapfile -t groups < <(find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
total_pass=0
total_fail=0
printf '%-16s %7s %7s %7s\n' group pass fail files
for g in "${groups[@]}"; do
  pass=0
  fail=0
  files=0
  for t in $(find "$g" -name '*.t' | sort); do
    files=$((files + 1))
    dir="$work/mnt/run-${t//\//-}"
    mkdir -p "$dir"
    log="$out/${t//\//-}.tap"
    (cd "$dir" && timeout 600 bash "$work/build/tests/$t" >"$log" 2>&1) || true
    p=$(grep -c '^ok ' "$log" || true)
    f=$(grep -c '^not ok ' "$log" || true)
    # A test file that died before its plan was done: its missing tests count as failed.
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$log" | head -1)
    if [ -n "$plan" ] && [ $((p + f)) -lt "$plan" ]; then f=$((plan - p)); fi
    pass=$((pass + p))
    fail=$((fail + f))
    rm -rf "$dir" 2>/dev/null || true
  done
  printf '%-16s %7d %7d %7d\n' "$g" "$pass" "$fail" "$files"
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
done
printf '%-16s %7d %7d\n' total "$total_pass" "$total_fail"
[ -z "${PJDFSTEST_OUT:-}" ] || echo "TAP output of each test file: $out" >&2
