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
#
# PJDFSTEST_SHARED=1: the tests that act as other users run as those users too. The mount is then
# `mdvfs mount --shared`, each id the tests use gets a local user or group (an existing one, or one
# made here named pjd<id> and removed at the end) and an mdvfs user or group of the same name, every
# such mdvfs user in every such mdvfs group (the kernel checks the process's own groups first:
# default_permissions), e.g.  PJDFSTEST_SHARED=1 scripts/pjdfstest.sh ~/src/pjdfstest
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
# ---- PJDFSTEST_SHARED=1 ----
# The ids pjdfstest's tests act as (-u, -g: the first gid is the effective one, the others
# supplementary, e.g. -g 65533,65532) or give to chown/lchown/fchown, besides 0 (root, which mdvfs has
# as user and group root):
#   uids: 65534 (-u, most tests), 65533 (-u), 65532 and 65530 (chown targets), 123 (chown/00.t, as root)
#   gids: 65534 (-g, most tests), 65533, 65532 and 65531 (-g, also as supplementary groups), 65530 and
#         456 (chown targets)
# Found with: grep -rhoE -- '-[ug] +[0-9]+(,[0-9]+)*' tests; grep -rhoE '(l|f)?chown +[^ ]+ +[0-9-]+ +[0-9-]+' tests
shared=
[ "${PJDFSTEST_SHARED:-}" = 1 ] && shared=1
shared_uids=(65534 65533 65532 65530 123)
shared_gids=(65534 65533 65532 65531 65530 456)
created_users=()
created_groups=()
cleanup() {
  [ -n "$mount_pid" ] && kill "$mount_pid" 2>/dev/null && wait "$mount_pid" 2>/dev/null || true
  mountpoint -q "$work/mnt" && fusermount3 -uz "$work/mnt" 2>/dev/null || true
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  for u in "${created_users[@]}"; do userdel "$u" || echo "pjdfstest.sh: could not remove local user $u" >&2; done
  # (userdel may have removed a user's primary group of the same name already)
  for g in "${created_groups[@]}"; do
    ! getent group "$g" >/dev/null || groupdel "$g" || echo "pjdfstest.sh: could not remove local group $g" >&2
  done
  mountpoint -q "$work/mnt" || rm -rf "$work/data" "$work/build"
  rmdir "$work/mnt" 2>/dev/null || true
  [ -n "${PJDFSTEST_OUT:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
# Local users made here go away on an interrupt too.
[ -z "$shared" ] || trap 'exit 130' INT HUP TERM

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

# ---- PJDFSTEST_SHARED=1: a local user and group for each id (named pjd<id> when there is none) ----
shared_users=()
shared_groups=()
if [ -n "$shared" ]; then
  for gid in "${shared_gids[@]}"; do
    name=$(getent group "$gid" | cut -d: -f1 || true)
    if [ -z "$name" ]; then
      name=pjd$gid
      groupadd -g "$gid" "$name"
    fi
    # Ours also when left over from an interrupted run.
    [ "$name" = "pjd$gid" ] && created_groups+=("$name")
    shared_groups+=("$name")
  done
  for uid in "${shared_uids[@]}"; do
    name=$(getent passwd "$uid" | cut -d: -f1 || true)
    if [ -z "$name" ]; then
      name=pjd$uid
      primary=65534
      getent group "$uid" >/dev/null && primary=$uid
      # (quiet unless it fails: it warns about ids outside UID_MIN..UID_MAX)
      msg=$(useradd -M -N -u "$uid" -g "$primary" -d /nonexistent -s /usr/sbin/nologin "$name" 2>&1) || { echo "$msg" >&2; exit 1; }
    fi
    [ "$name" = "pjd$uid" ] && created_users=("$name" "${created_users[@]}")
    shared_users+=("$name")
  done
  # A mount as a local user other than root needs a way down to it.
  chmod 0711 "$work"
fi

# ---- a daemon and a mount of its own ----
export SERVICE_DATA_DIR="$work/data"
node "$cli" daemon 2>"$out/daemon.log" &
daemon_pid=$!
mount_args=()
if [ -n "$shared" ]; then
  for _ in $(seq 300); do
    grep -q '"daemon ready"' "$out/daemon.log" 2>/dev/null && break
    kill -0 "$daemon_pid" 2>/dev/null || { echo "pjdfstest.sh: the daemon exited:" >&2; cat "$out/daemon.log" >&2; exit 1; }
    sleep 0.1
  done
  # mdvfs users and groups of the same names (useradd also makes a personal group of the user's
  # name: pjd65533's is the group pjd65533 wanted anyway).
  for u in "${shared_users[@]}"; do node "$cli" useradd "$u" >/dev/null; done
  for g in "${shared_groups[@]}"; do
    if ! err=$(node "$cli" groupadd "$g" 2>&1 >/dev/null); then
      case "$err" in *EEXIST*) ;; *) echo "$err" >&2; exit 1 ;; esac
    fi
  done
  # Each user in every one of those groups, and in every user's personal group: nobody's new files
  # get its personal group, nobody, which has no local namesake and so shows as 65534, the local
  # nogroup; the kernel lets nogroup's members in by that, so the daemon should too.
  all_groups=$(printf '%s\n' "${shared_groups[@]}" "${shared_users[@]}" | awk '!seen[$0]++' | paste -sd, -)
  for u in "${shared_users[@]}"; do node "$cli" usermod -aG "$all_groups" "$u"; done
  echo "pjdfstest.sh: shared mount; local and mdvfs users ${shared_users[*]}, groups ${shared_groups[*]}; each user in mdvfs groups $all_groups" >&2
  mount_args=(--shared)
fi
node "$cli" mount "$work/mnt" "${mount_args[@]}" 2>"$out/mount.log" &
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
