#!/usr/bin/env bash
# What independent frames do to --decompress: the same SIZE MiB (default
# 2048, half random, half runs of one byte) compressed as one zstd frame
# (`zstd -3 -T0`, as the zstd tool writes even with threads) and as the
# frames of 16 MiB of input that `ddx --compress=zstd` writes (which a
# resumable upload's parts end on), each decompressed by
# `ddx --decompress` to /dev/null and, for reference, by `zstd -d`. All
# files on DIR (default /dev/shm), so the disk is out of it. Prints the
# median times and the ratio one frame / many frames for ddx: above 1.0
# means the frames made --decompress faster.
#
# usage: bench/zstd-frames.sh [SIZE_MiB]; RUNS= rounds (default 5);
# DDX= the binary (default target/release/ddx); DIR= where files go.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-2048}
runs=${RUNS:-5}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
for tool in zstd python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-frames.XXXXXX")
trap 'rm -rf "$dir"' EXIT

input=$dir/input
python3 - "$input" "$size_mib" <<'PY'
import os, sys
path, mib = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    for n in range(mib):
        f.write(os.urandom(1 << 19))
        f.write(bytes([n % 251]) * (1 << 19))
PY
zstd -q -3 -T0 -c "$input" >"$dir/one.zst"
"$ddx" if="$input" of="$dir/many.zst" bs=8M --compress=zstd:3 status=none
for file in one many; do
  zstd -d -c -q "$dir/$file.zst" | cmp -s - "$input" || { echo "$file.zst is not the input" >&2; exit 1; }
done
frames() {
  python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at, frames = 0, 0
while at < len(data):
    frames += 1
    # Skip one frame: its header gives no compressed size, so walk blocks.
    fhd = data[at + 4]
    single = (fhd >> 5) & 1
    fcs = [0, 2, 4, 8][fhd >> 6]
    if fcs == 0 and single:
        fcs = 1
    dictid = [0, 1, 2, 4][fhd & 3]
    pos = at + 5 + (0 if single else 1) + dictid + fcs
    while True:
        header = int.from_bytes(data[pos:pos + 3], "little")
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        pos += 3 + (1 if kind == 1 else size)
        if last:
            break
    at = pos + (4 if (fhd >> 2) & 1 else 0)
print(frames)
PY
}

timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

echo "--decompress, one frame against frames of 16 MiB: $size_mib MiB, $(nproc) CPUs, $(zstd --version)"
echo "  one.zst: $(stat -c %s "$dir/one.zst") bytes, $(frames "$dir/one.zst") frame(s); many.zst: $(stat -c %s "$dir/many.zst") bytes, $(frames "$dir/many.zst") frames"
for run in $(seq "$runs"); do
  for file in one many; do
    echo "ddx $file $(timed "$ddx" if="$dir/$file.zst" of=/dev/null bs=8M --decompress status=none)" >>"$dir/times"
    echo "zstd $file $(timed zstd -d -c -q "$dir/$file.zst")" >>"$dir/times"
  done
done
python3 - "$dir/times" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    tool, file, seconds = line.split()
    times.setdefault((tool, file), []).append(float(seconds))
for tool in ("ddx", "zstd"):
    one = statistics.median(times[(tool, "one")])
    many = statistics.median(times[(tool, "many")])
    print(f"  {tool:4s} one frame {one:6.2f} s  many frames {many:6.2f} s  one / many: {one / many:.2f}x")
PY
