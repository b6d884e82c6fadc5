#!/usr/bin/env bash
# casync indexes, ddx against casync in one run, as ratios of ddx to casync:
#
# 1. make: the index and store of release N, a SIZE MiB disk image (default
#    1024: GPT, a FAT32 and an ext4 holding files from /usr, about 60%
#    full), by `casync make` and by ddx, each into an empty store; bar:
#    ddx's time <= 0.5x casync's. The two indexes must be the same bytes,
#    each tool must extract the other's (round trips, checked with cmp),
#    and release N+1 (5% of its 4 KiB blocks changed, here and there) made
#    into the same store must add exactly the chunks release N lacks.
# 2. update in place: a loop device holding release N takes release N+1
#    from the store and index served over HTTP (rclone serve http), the
#    device its own seed (ddx --seed=DEVICE; casync's --seed-output, its
#    default); bars: the bytes the server sent ddx <= 1.1x the stored bytes
#    of the chunks release N lacks (the server's own count, /proc/PID/io,
#    HTTP headers included), the bytes written to the device <= 1.2x the
#    bytes that differ between the releases (the device's own count,
#    /sys/block/loopN/stat), and ddx's time <= 0.5x casync's.
#
# Every figure is the median of RUNS runs (default 3); the device is reset
# to release N and the page cache dropped before each. Everything lives on
# DIR (default /dev/shm, a tmpfs), so the disk is out of the measurement.
# Run it on a quiet machine: nothing else building, testing or measuring.
#
# usage: bench/chunks.sh [SIZE_MiB]; RUNS= runs; DDX= the binary (default
# target/release/ddx); DIR= where the files go. Needs root (a loop device,
# drop_caches), casync, rclone, sfdisk, mkfs.vfat, mtools, mkfs.ext4 and
# python3.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${RUNS:-3}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
for tool in casync rclone sfdisk mkfs.vfat mcopy mkfs.ext4 python3 losetup; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "root is needed (a loop device, drop_caches)"; exit 1; }

dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-chunks.XXXXXX")
server_pid=
loop=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  [ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# --- The releases -----------------------------------------------------------
size=$((size_mib << 20))
fat_sectors=$((64 << 11))
ext_start=$((2048 + fat_sectors))
ext_sectors=$(((size >> 9) - ext_start - 2048))
content=$dir/content
mkdir -p "$content"
# Files from /usr (text, libraries, programs) up to 60% of the ext4.
python3 - "$content" "$((ext_sectors * 512 * 6 / 10))" <<'PY'
import os, shutil, sys
out, budget = sys.argv[1], int(sys.argv[2])
used = 0
for root, dirs, files in os.walk("/usr"):
    dirs.sort()
    for name in sorted(files):
        path = os.path.join(root, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        size = os.path.getsize(path)
        if size > 64 << 20 or used + size > budget:
            continue
        target = os.path.join(out, os.path.relpath(path, "/usr"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(path, target)
        used += size
    if used > budget * 0.98:
        break
PY
release_n=$dir/release-1.img
truncate -s "$size" "$release_n"
printf 'label: gpt\nstart=2048, size=%d, type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\nstart=%d, size=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n' \
  "$fat_sectors" "$ext_start" "$ext_sectors" | sfdisk -q --no-reread --no-tell-kernel "$release_n"
mkfs.vfat --offset=2048 -F 32 -s 1 -S 512 -n BOOT "$release_n" $((fat_sectors / 2)) >/dev/null 2>&1
# Files of 1-4 MiB, at most 12: within the 64 MiB FAT whatever the size.
first=$(find "$content" -type f -size +1M -size -4M | head -n 12)
# shellcheck disable=SC2086
mcopy -i "$release_n@@$((2048 * 512))" $first ::/
mkfs.ext4 -q -F -E "offset=$((ext_start * 512))" -d "$content" "$release_n" "$((ext_sectors / 2))k"
release_next=$dir/release-2.img
python3 - "$release_n" "$release_next" <<'PY'
import random, sys
data = bytearray(open(sys.argv[1], "rb").read())
blocks = len(data) // 4096
rng = random.Random(2)
for block in rng.sample(range(blocks), blocks // 20):
    data[block * 4096:(block + 1) * 4096] = rng.randbytes(4096)
open(sys.argv[2], "wb").write(data)
PY

# Wall time of a command, in seconds, on stdout.
timed() {
  local start end
  sync
  echo 3 >/proc/sys/vm/drop_caches
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$end" -v b="$start" 'BEGIN { printf "%.3f\n", a - b }'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }

# --- 1. make ----------------------------------------------------------------
echo "make: a $size_mib MiB image, $runs runs"
: >"$dir/make.casync"
: >"$dir/make.ddx"
for _ in $(seq "$runs"); do
  rm -rf "$dir/cs" "$dir/ds" "$dir/casync.caibx" "$dir/ddx.caibx"
  timed casync make --store="$dir/cs" "$dir/casync.caibx" "$release_n" >>"$dir/make.casync"
  timed "$ddx" if="$release_n" of="$dir/ddx.caibx" --store="$dir/ds" bs=1M >>"$dir/make.ddx"
done
cmp "$dir/casync.caibx" "$dir/ddx.caibx" || { echo "the indexes differ"; exit 1; }
casync_make=$(median <"$dir/make.casync")
ddx_make=$(median <"$dir/make.ddx")
echo "  casync make ${casync_make}s, ddx ${ddx_make}s: ratio $(ratio "$ddx_make" "$casync_make") (bar <= 0.5); the indexes are the same bytes"
casync extract --store="$dir/ds" "$dir/ddx.caibx" "$dir/by-casync.img"
cmp "$dir/by-casync.img" "$release_n"
"$ddx" if="$dir/casync.caibx" of="$dir/by-ddx.img" --store="$dir/cs" bs=1M status=none
cmp "$dir/by-ddx.img" "$release_n"
rm -f "$dir/by-casync.img" "$dir/by-ddx.img"
echo "  round trips: casync extracts ddx's, ddx casync's, byte for byte"

www=$dir/www
mkdir -p "$www"
mv "$dir/ds" "$www/store"
mv "$dir/ddx.caibx" "$www/release-1.caibx"
added=$("$ddx" if="$release_next" of="$www/release-2.caibx" --store="$www/store" bs=1M 2>&1 |
  sed -n 's/.*; \([0-9]*\) were new to the store.*/\1/p')
read -r lacking lacking_bytes differ < <(python3 - "$www" "$release_n" "$release_next" <<'PY'
import os, struct, sys
www, old, new = sys.argv[1:4]
def ids(path):
    data = open(path, "rb").read()
    return {data[i + 8:i + 40] for i in range(64, len(data) - 40, 40)}
lacked = ids(f"{www}/release-2.caibx") - ids(f"{www}/release-1.caibx")
stored = sum(os.path.getsize(f"{www}/store/{i.hex()[:4]}/{i.hex()}.cacnk") for i in lacked)
a, b = open(old, "rb"), open(new, "rb")
differ = 0
while True:
    x, y = a.read(1 << 20), b.read(1 << 20)
    if not x:
        break
    differ += sum(4096 for o in range(0, len(x), 4096) if x[o:o + 4096] != y[o:o + 4096])
print(len(lacked), stored, differ)
PY
)
echo "  release N+1 added $added chunks to the store; it has $lacking release N lacks (${lacking_bytes} bytes stored)"
[ "$added" = "$lacking" ] || { echo "release N+1 added $added chunks, not the $lacking release N lacks"; exit 1; }

# --- 2. update in place -----------------------------------------------------
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RCLONE_CONFIG=/dev/null rclone serve http --addr "127.0.0.1:$port" "$www" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
url=http://127.0.0.1:$port
cp "$release_n" "$dir/card"
loop=$(losetup --find --show "$dir/card")
sent() { awk '/^wchar/ {print $2}' "/proc/$server_pid/io"; }
written() { awk '{printf "%.0f\n", $7 * 512}' "/sys/block/$(basename "$loop")/stat"; }
echo "update in place: $runs runs; $differ bytes differ between the releases"
for tool in casync ddx; do
  : >"$dir/update.$tool"
  : >"$dir/sent.$tool"
  : >"$dir/written.$tool"
done
for _ in $(seq "$runs"); do
  for tool in casync ddx; do
    "$ddx" if="$release_n" of="$loop" bs=4M conv=fsync --force status=none
    sent_before=$(sent)
    written_before=$(written)
    if [ "$tool" = casync ]; then
      timed casync extract --store="$url/store" "$url/release-2.caibx" "$loop" >>"$dir/update.casync"
    else
      timed "$ddx" if="$url/release-2.caibx" of="$loop" --store="$url/store" --seed="$loop" \
        bs=4M conv=fsync --force >>"$dir/update.ddx"
    fi
    echo $(($(sent) - sent_before)) >>"$dir/sent.$tool"
    echo $(($(written) - written_before)) >>"$dir/written.$tool"
    cmp "$loop" "$release_next" || { echo "$tool: the device is not release N+1"; exit 1; }
  done
done
for tool in casync ddx; do
  t=$(median <"$dir/update.$tool")
  s=$(median <"$dir/sent.$tool")
  w=$(median <"$dir/written.$tool")
  echo "  $tool: ${t}s; the server sent $s bytes ($(ratio "$s" "$lacking_bytes")x the chunks N lacks); $w bytes written ($(ratio "$w" "$differ")x what differs)"
done
casync_update=$(median <"$dir/update.casync")
ddx_update=$(median <"$dir/update.ddx")
echo "  ddx/casync time: $(ratio "$ddx_update" "$casync_update") (bar <= 0.5); fetched <= 1.1x, written <= 1.2x"
