#!/usr/bin/env bash
# File-to-file copies on the local filesystem, same work, one run:
#  1. overwrite a cached file in place (conv=notrunc): ddx vs dd bs=1M, and
#     ddx's other ways (the kernel's copy_file_range, io_uring)
#  2. copy to a new file: ddx vs dd bs=1M vs cp
#  3. page cache left behind after copying a CACHE_MiB file from a cold
#     cache (fincore), as ddx exits and after sync: ddx vs dd
# Times are medians of RUNS runs (hyperfine); ratios are against the first.
#
# usage: bench/file-copy.sh [SIZE_MiB] (default 1024); CACHE_MiB (default
# 2048); DIR=... picks the directory (default: a temp dir under /var/tmp,
# i.e. a real filesystem).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)"; exit 1; }
dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
src=$dir/src dst=$dir/dst
head -c "$((size_mib << 20))" /dev/urandom > "$src"
cp "$src" "$dst"
runs=${RUNS:-10}
cache_mib=${CACHE_MiB:-2048}
echo "file copies of $size_mib MiB in $dir ($(df -T "$dir" | awk 'NR==2 {print $2}')); $(nproc) CPUs; ddx $("$ddx" --version | head -n1 | cut -d' ' -f2)"

report() {
  python3 - "$1" "$dir/" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
for r in results:
    print(f"  {r['command'].replace(sys.argv[2], ''):62s} median {r['median']:.3f} s  time/first = {r['median']/base:.2f}")
PY
}

# Each run starts from clean cached pages (sync before it): otherwise the
# kernel's writeback of the previous run's gigabyte lands in the next one.
echo "1. overwrite a cached file in place"
hyperfine --warmup 1 --runs "$((runs * 3 / 2))" --prepare sync --export-json "$dir/1.json" \
  "dd if=$src of=$dst bs=1M conv=notrunc status=none" \
  "$ddx if=$src of=$dst bs=1M conv=notrunc status=none" \
  "$ddx --offload if=$src of=$dst bs=1M conv=notrunc status=none" \
  "$ddx --no-offload --backend=uring if=$src of=$dst bs=1M conv=notrunc status=none" >/dev/null 2>&1
report "$dir/1.json"

# By default ddx waits for the data it wrote to reach the disk before it
# drops it from the cache (section 3); cp returns with the data still dirty
# in memory. "&& sync" rows compare the two at the same point: on disk.
echo "2. copy to a new file"
hyperfine --warmup 1 --runs "$runs" --prepare "rm -f $dst" --export-json "$dir/2.json" \
  "dd if=$src of=$dst bs=1M status=none" \
  "$ddx if=$src of=$dst bs=1M status=none" \
  "$ddx if=$src of=$dst status=none" \
  "$ddx --keep-cache if=$src of=$dst bs=1M status=none" \
  "$ddx --offload if=$src of=$dst bs=1M status=none" \
  "cp $src $dst" \
  "cp $src $dst && sync" \
  "$ddx if=$src of=$dst bs=1M status=none && sync" >/dev/null 2>&1
report "$dir/2.json"

echo "3. page cache left behind (fincore after copying $cache_mib MiB from a cold cache)"
rm -f "$dst"
big=$dir/big
head -c "$((cache_mib << 20))" /dev/urandom > "$big"
cached_percent() {
  local cached
  cached=$(fincore -nb -o RES "$big" "$dst" | awk '{s += $1} END {print s}')
  python3 -c "print(f'{100*$cached/(2*($cache_mib << 20)):5.1f}%')"
}
for tool in dd "$ddx"; do
  rm -f "$dst"; sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  "$tool" if="$big" of="$dst" bs=1M status=none
  at_exit=$(cached_percent)
  sync
  printf '  %-12s %s of both files cached as it exits, %s after sync\n' "$(basename "$tool") bs=1M" "$at_exit" "$(cached_percent)"
done
cmp "$big" "$dst" && echo "  (ddx's copy is byte-identical)"
