#!/usr/bin/env bash
# A rescue of a healthy disk at its own pace: `ddx --rescue` with no bs=
# (ddrescue's 64 KiB clusters), reading a 64 MiB nbdkit export of random
# data through its NBD URI, against GNU ddrescue reading the same export
# through nbdfuse (a file, as ddrescue reads disks), each writing a fresh
# file and map on a tmpfs. The server and the FUSE mount are started and
# stopped here; both outputs are compared with the image every round.
# Prints each median and ddx / ddrescue (target <= 1.2).
#
# usage (root: tmpfs, FUSE): bench/rescue.sh [MIB]; RUNS= sets the
# rounds (default 7), DDX= the binary (default target/release/ddx).
# Needs nbdkit (file plugin), nbdfuse (libnbd-bin, fuse3), gddrescue.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/rescue.sh needs root (tmpfs, FUSE)"; exit 1; }
for tool in nbdkit nbdfuse fusermount3 ddrescue python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
runs=${RUNS:-7}
mib=${1:-64}

dir=$(mktemp -d /var/tmp/ddx-rescue.XXXXXX)
# stop PIDFILE: end the process it names, and wait until it has (the
# server holds the image on the tmpfs until then).
stop() {
  [ -s "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
}
cleanup() {
  fusermount3 -u "$dir/dev" 2>/dev/null || true
  stop "$dir/fuse.pid"
  stop "$dir/nbdkit.pid"
  umount "$dir/tmpfs" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/tmpfs"
mount -t tmpfs -o size=$((mib * 4 + 64))M ddx-rescue-bench "$dir/tmpfs"
t=$dir/tmpfs
head -c "${mib}M" /dev/urandom >"$t/image"

nbdkit --unix "$dir/sock" --pidfile "$dir/nbdkit.pid" file "file=$t/image"
for _ in $(seq 100); do [ -s "$dir/nbdkit.pid" ] && break; sleep 0.05; done
uri="nbd+unix:///?socket=$dir/sock"
: >"$dir/dev"
setsid nbdfuse --pidfile "$dir/fuse.pid" "$dir/dev" --unix "$dir/sock" &
for _ in $(seq 200); do
  [ "$(stat -c %s "$dir/dev")" = "$((mib << 20))" ] && break
  sleep 0.05
done
[ "$(stat -c %s "$dir/dev")" = "$((mib << 20))" ] || { echo "nbdfuse did not start"; exit 1; }

# seconds CMD...: the wall time of one run, the output checked after it.
seconds() {
  rm -f "$t/out" "$t/map"
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  cmp -s "$t/image" "$t/out" || { echo "$1: the output is not the image"; exit 1; }
  python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end"
}

ours=()
theirs=()
for round in $(seq "$runs"); do
  # Alternating order, so that each sees the machine's drift alike.
  if [ $((round % 2)) -eq 1 ]; then
    ours+=("$(seconds "$ddx" "if=$uri" "of=$t/out" --rescue "--map=$t/map")")
    theirs+=("$(seconds ddrescue -q "$dir/dev" "$t/out" "$t/map")")
  else
    theirs+=("$(seconds ddrescue -q "$dir/dev" "$t/out" "$t/map")")
    ours+=("$(seconds "$ddx" "if=$uri" "of=$t/out" --rescue "--map=$t/map")")
  fi
done

python3 - "${ours[*]}" "${theirs[*]}" "$mib" <<'PY'
import statistics, sys
ours = [float(x) for x in sys.argv[1].split()]
theirs = [float(x) for x in sys.argv[2].split()]
mib = sys.argv[3]
print(f"== {mib} MiB healthy export, {len(ours)} rounds (median, min-max)")
for name, runs in (("ddx --rescue (nbd URI, no bs=)", ours), ("ddrescue (nbdfuse)", theirs)):
    print(f"  {name:32} {statistics.median(runs):8.3f} s  ({min(runs):.3f}-{max(runs):.3f})")
print(f"  ddx / ddrescue                   {statistics.median(ours) / statistics.median(theirs):8.2f}x  (target <= 1.2)")
PY
