#!/usr/bin/env bash
# A sparse disk image (SIZE MiB, 10% data in ten extents): ddx against
# dd conv=sparse and cp --sparse=always, same bytes and allocation checked.
# ddx finds the holes with SEEK_DATA and never reads them.
#
# usage: bench/sparse.sh [SIZE_MiB] (default 1024); DIR= picks the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)"; exit 1; }
dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-sparse.XXXXXX")
trap 'rm -rf "$dir"' EXIT
img=$dir/image
truncate -s "${size_mib}M" "$img"
extent=$((size_mib / 100))
for i in $(seq 0 9); do
  dd if=/dev/urandom of="$img" bs=1M count="$extent" seek=$((i * size_mib / 10)) conv=notrunc status=none
done
echo "sparse image: $size_mib MiB, $(du -m "$img" | cut -f1) MiB allocated; $(nproc) CPUs"
hyperfine --warmup 1 --runs "${RUNS:-5}" --prepare "rm -f $dir/out" --export-json "$dir/r.json" \
  "dd if=$img of=$dir/out conv=sparse status=none" \
  "$ddx if=$img of=$dir/out conv=sparse status=none" \
  "dd if=$img of=$dir/out bs=1M conv=sparse status=none" \
  "$ddx if=$img of=$dir/out bs=1M conv=sparse status=none" \
  "cp --sparse=always $img $dir/out" >/dev/null 2>&1
python3 - "$dir/r.json" "$ddx" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
ddx = sys.argv[2]
def tool(cmd):
    # Whatever the binary's file is called, it is ddx here.
    return "ddx" if cmd.split()[0] == ddx else cmd.split()[0].split("/")[-1]
for r in results:
    cmd = r["command"]
    name = tool(cmd) + (" bs=1M" if "bs=1M" in cmd else "")
    print(f"  {name:12s} median {r['median']:.3f} s")
def median(prefix, bs):
    return next(r["median"] for r in results
                if tool(r["command"]) == prefix and (("bs=1M" in r["command"]) == bs))
for bs in (False, True):
    print(f"  dd/ddx at {'bs=1M' if bs else 'default bs'}: ddx is {median('dd', bs) / median('ddx', bs):.1f}x faster")
PY
rm -f "$dir/out" "$dir/ref"
dd if="$img" of="$dir/ref" conv=sparse status=none
"$ddx" if="$img" of="$dir/out" conv=sparse status=none
cmp "$dir/ref" "$dir/out" && echo "  same bytes; allocated: dd $(stat -c %b "$dir/ref") blocks, ddx $(stat -c %b "$dir/out") blocks"
