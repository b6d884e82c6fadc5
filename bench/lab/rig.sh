#!/usr/bin/env bash
# Slow-device lab: two emulated slow block devices, exposed as plain files.
#
#   bench/lab/rig.sh up DIR [--size=N] [--latency-ms=X] [--per64k-ms=Y] [--parallel]
#   bench/lab/rig.sh down DIR
#   bench/lab/rig.sh status DIR
#
# `up` mounts a tmpfs on DIR (which must be empty or missing), puts two
# backing files on it (DIR/.lab/src.img filled with random bytes,
# DIR/.lab/dst.img zero) and makes each one a device, as files DIR/src and
# DIR/dst:
#
#   DIR/src  <- nbdfuse (naked file mount over DIR/src)
#            <- outer nbdkit: nbd plugin -> inner socket,
#                 --filter=noparallel serialize=all-requests  (one request at
#                   a time on the whole device, whatever the connection)
#                 --filter=delay delay-read/-write=X ms       (per request)
#            <- inner nbdkit: file plugin over DIR/.lab/src.img,
#                 --filter=blocksize maxdata=64k  (requests cut to <=64 KiB)
#                 --filter=delay delay-read/-write=Y ms       (per 64 KiB piece)
#
# So a request of L bytes costs about X + ceil(L/64k)*Y ms, and requests to
# one device never overlap. Both devices are independent of each other, so a
# copy that reads one while it writes the other can take max(read, write)
# time; a strictly sequential one takes the sum. All traffic is on Unix
# sockets inside DIR/.lab; nothing listens on TCP; no real disk is touched.
#
# --parallel drops the noparallel filter: requests to one device then
# overlap (each still pays its latency), as on a device with several
# queues (an SSD, a network volume), where queue depth pays.
#
# Defaults: --size=64M --latency-ms=1 --per64k-ms=2, so reading or writing
# 64 MiB at bs=64k takes ~3-4 s (at bs=1M with O_DIRECT ~2.2-2.6 s).
#
# Always write to the devices with conv=notrunc,nocreat (they cannot grow).
# `down` unmounts and stops everything `up` started; it is idempotent and
# safe to run on a half-built rig. Needs root (mount, FUSE).
# Packages (Debian): nbdkit (file + nbd plugins, delay/blocksize/noparallel
# filters), libnbd-bin (nbdfuse), fuse3 (fusermount3); installed if missing.
set -euo pipefail

die() { echo "rig.sh: $*" >&2; exit 1; }
say() { echo "rig.sh: $*" >&2; }

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

ensure_tools() {
  local missing=()
  command -v nbdkit >/dev/null || missing+=(nbdkit)
  command -v nbdfuse >/dev/null || missing+=(libnbd-bin)
  command -v fusermount3 >/dev/null || missing+=(fuse3)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
  fi
  nbdkit --filter=noparallel --filter=blocksize --filter=delay nbd --version >/dev/null 2>&1 ||
    die "nbdkit lacks the nbd plugin or the noparallel/blocksize/delay filters"
  nbdkit --filter=blocksize --filter=delay file --version >/dev/null 2>&1 ||
    die "nbdkit lacks the file plugin"
  [ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
  [ -e /dev/fuse ] || die "/dev/fuse is missing (no FUSE in this kernel?)"
}

# The mount's target exactly as /proc/self/mountinfo has it (or nothing).
is_mounted() { findmnt -rn --mountpoint "$1" >/dev/null 2>&1; }

# Is PID alive and an nbdkit/nbdfuse of this lab? (guards against pid reuse)
ours() {
  local pid=$1 lab=$2 cmd
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  case "$cmd" in *"$lab"*) return 0 ;; *) return 1 ;; esac
}

wait_gone() { # PID TENTHS
  local i
  for ((i = 0; i < $2; i++)); do
    [ -d "/proc/$1" ] || return 0
    # a zombie is gone for our purposes
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.1
  done
  return 1
}

stop_pid() { # PIDFILE LAB
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1" 2>/dev/null || true)
  if ours "$pid" "$2"; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" 50 || { kill -KILL "$pid" 2>/dev/null || true; wait_gone "$pid" 20 || true; }
  fi
  rm -f "$1"
}

wait_file() { # FILE TENTHS [PID that must stay alive meanwhile]
  local i
  for ((i = 0; i < $2; i++)); do
    [ -s "$1" ] && return 0
    [ -z "${3:-}" ] || kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

cmd_down() {
  local dir=$1 lab dev
  [ -d "$dir" ] || return 0
  dir=$(realpath "$dir")
  lab=$dir/.lab
  for dev in src dst; do
    if is_mounted "$dir/$dev"; then
      fusermount3 -u "$dir/$dev" 2>/dev/null || {
        # busy (a copy still running?): cut the connection, then lazy-unmount
        stop_pid "$lab/$dev-fuse.pid" "$dir"
        fusermount3 -uz "$dir/$dev" 2>/dev/null || umount -l "$dir/$dev" 2>/dev/null || true
      }
    fi
    stop_pid "$lab/$dev-fuse.pid" "$dir"
  done
  for dev in src dst; do
    stop_pid "$lab/$dev-out.pid" "$dir"
    stop_pid "$lab/$dev-in.pid" "$dir"
  done
  if [ "$(findmnt -rn -o SOURCE,FSTYPE --mountpoint "$dir" 2>/dev/null)" = "ddx-lab tmpfs" ]; then
    umount "$dir" 2>/dev/null || umount -l "$dir"
  fi
  return 0
}

cmd_status() {
  local dir lab dev f
  dir=$(realpath "$1")
  lab=$dir/.lab
  is_mounted "$dir" || { echo "down"; return 1; }
  [ -f "$lab/params" ] && cat "$lab/params"
  for dev in src dst; do
    for f in in out fuse; do
      printf '%s-%s pid=%s %s\n' "$dev" "$f" "$(cat "$lab/$dev-$f.pid" 2>/dev/null || echo -)" \
        "$(ours "$(cat "$lab/$dev-$f.pid" 2>/dev/null)" "$dir" && echo alive || echo DEAD)"
    done
    is_mounted "$dir/$dev" && echo "$dir/$dev mounted, $(stat -c %s "$dir/$dev") bytes" ||
      echo "$dir/$dev NOT mounted"
  done
}

cmd_up() {
  local dir=$1; shift
  local size=64M latency=1 per64k=2 parallel=0 arg bytes lab dev
  for arg in "$@"; do
    case "$arg" in
      --size=*) size=${arg#*=} ;;
      --latency-ms=*) latency=${arg#*=} ;;
      --per64k-ms=*) per64k=${arg#*=} ;;
      --parallel) parallel=1 ;;
      *) usage ;;
    esac
  done
  size=${size^^}
  bytes=$(numfmt --from=iec "${size%B}" 2>/dev/null) || die "bad --size: $size"
  if [ "$bytes" -le 0 ] || [ $((bytes % 65536)) -ne 0 ]; then die "--size must be a positive multiple of 64K"; fi
  [[ $latency =~ ^[0-9]+$ && $per64k =~ ^[0-9]+$ ]] || die "delays are whole milliseconds"
  [ "$(id -u)" -eq 0 ] || die "needs root (mount -t tmpfs, FUSE)"
  ensure_tools

  mkdir -p "$dir"
  dir=$(realpath "$dir")
  case "$dir" in / | /tmp | /home | /root | /work | /var | /mnt) die "refusing DIR=$dir" ;; esac
  is_mounted "$dir" && die "$dir is already a mount point (rig already up? try: $0 down $dir)"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"

  # From here on, a failure (or ^C) tears down whatever was built.
  RIG_DIR=$dir RIG_OK=0
  trap '[ "$RIG_OK" = 1 ] || { say "up failed; tearing down"; cmd_down "$RIG_DIR"; }' EXIT
  trap 'exit 130' INT TERM

  # tmpfs: both images plus slack (logs, a copy of the binary under test)
  mount -t tmpfs -o "size=$((2 * bytes + 64 * 1024 * 1024)),mode=0755" ddx-lab "$dir"
  lab=$dir/.lab
  mkdir "$lab"
  head -c "$bytes" /dev/urandom >"$lab/src.img"
  truncate -s "$bytes" "$lab/dst.img"

  for dev in src dst; do
    rm -f "$lab/$dev-in.sock" "$lab/$dev-out.sock" # nbdkit leaves stale sockets
    # inner: per-64k transfer time
    nbdkit --unix "$lab/$dev-in.sock" --pidfile "$lab/$dev-in.pid" \
      --filter=blocksize --filter=delay \
      file file="$lab/$dev.img" \
      maxdata=64k delay-read="${per64k}ms" delay-write="${per64k}ms" \
      2>>"$lab/$dev-in.log"
    wait_file "$lab/$dev-in.pid" 100 || die "inner nbdkit for $dev did not start"
    # outer: one request at a time on the device (unless --parallel),
    # fixed latency each
    local serial=(--filter=noparallel)
    local serial_args=(serialize=all-requests)
    if [ "$parallel" = 1 ]; then serial=() serial_args=(); fi
    nbdkit --unix "$lab/$dev-out.sock" --pidfile "$lab/$dev-out.pid" \
      "${serial[@]}" --filter=delay \
      nbd socket="$lab/$dev-in.sock" \
      "${serial_args[@]}" delay-read="${latency}ms" delay-write="${latency}ms" \
      2>>"$lab/$dev-out.log"
    wait_file "$lab/$dev-out.pid" 100 || die "outer nbdkit for $dev did not start"
    # the device as a file: a naked nbdfuse mount over the regular file DIR/dev
    : >"$dir/$dev"
    setsid nbdfuse --pidfile "$lab/$dev-fuse.pid" "$dir/$dev" --unix "$lab/$dev-out.sock" \
      </dev/null >>"$lab/$dev-fuse.log" 2>&1 &
    wait_file "$lab/$dev-fuse.pid" 100 $! || die "nbdfuse for $dev did not start: $(cat "$lab/$dev-fuse.log")"
    is_mounted "$dir/$dev" || die "$dir/$dev is not mounted"
    [ "$(stat -c %s "$dir/$dev")" -eq "$bytes" ] || die "$dir/$dev has the wrong size"
  done

  cat >"$lab/params" <<EOF
size=$bytes
latency_ms=$latency
per64k_ms=$per64k
parallel=$parallel
EOF
  RIG_OK=1
  trap - INT TERM
  local how="serialized per device"
  [ "$parallel" = 1 ] && how="requests overlap (--parallel)"
  say "up: $dir/src and $dir/dst, $bytes bytes each; ${latency} ms per request + ${per64k} ms per 64 KiB, $how"
}

[ $# -ge 2 ] || usage
action=$1 dir=$2
shift 2
case "$action" in
  up) cmd_up "$dir" "$@" ;;
  down) [ $# -eq 0 ] || usage; cmd_down "$dir" ;;
  status) cmd_status "$dir" ;;
  *) usage ;;
esac
