#!/usr/bin/env bash
# The images' benchmark: flashing a compressed OS image. An ext4 image (1 GiB; IMAGE_MIB= sets it),
# about 45% of its blocks used, with its bmap, compressed as .zst (one
# frame, as the zstd tool writes it, and in frames as `ddx --compress`
# writes it) and as multi-block .xz (xz -T2); written with conv=fsync to
# loop devices over files on a tmpfs (a real card's speed would hide the
# decompression cost this measures, and the host disk's noise would
# swamp it), by:
#   bmaptool copy --bmap IMG.bmap IMG.zst DEV
#   zstdcat IMG.zst | dd of=DEV bs=4M conv=fsync
#   xz -dc -T2 IMG.xz | dd of=DEV bs=4M conv=fsync
#   ddx if=IMG.zst of=DEV --decompress --bmap=IMG.bmap conv=fsync
#   ddx if=IMG.xz of=DEV --decompress conv=fsync
# and --tee (two devices against one) and --compress=zstd against
# `zstd -T0`; and the read-back: --verify under --bmap (the mapped ranges
# only, several at once) against the copy without it and against
# --verify without a map (the whole device read back), with the cost of
# each read-back as the difference. The bar: the mapped ranges' read-back
# costs no more than its share of the whole one (mapped / image, with
# 25% to spare). Every ddx result is compared with the raw image. The ddx
# rows need the image options (--decompress, --bmap=FILE,
# --tee=OUT, --compress=ALG[:LEVEL]); without them they are left out.
#
# usage (root: tmpfs and loop devices): bench/image.sh; RUNS= sets
# hyperfine's runs (default 5), USED_MIB= the data put in the image,
# IMAGE_MIB= the image's size (default 1024; a small one for a smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/image.sh needs root (tmpfs, loop devices)"; exit 1; }
for tool in hyperfine bmaptool zstd xz mkfs.ext4 losetup; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
runs=${RUNS:-5}
used_mib=${USED_MIB:-460}
image_mib=${IMAGE_MIB:-1024}
image_bytes=$((image_mib << 20))

dir=$(mktemp -d /var/tmp/ddx-image.XXXXXX)
loops=()
cleanup() {
  for loop in "${loops[@]}"; do losetup -d "$loop" 2>/dev/null || true; done
  umount "$dir/tmpfs" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/tmpfs"
mount -t tmpfs -o size=6G ddx-bench "$dir/tmpfs"
t=$dir/tmpfs

# The image: real files (libraries, documentation) compress like an OS
# image's; the list is sorted so that a machine builds the same image
# each time.
mkdir "$t/content"
find /usr/lib /usr/share -xdev -type f -size +4k -readable -printf '%p\t%s\n' 2>/dev/null | sort >"$dir/all"
awk -F'\t' -v limit=$((used_mib * 1024 * 1024)) 'total + $2 <= limit { total += $2; print $1 }' \
  "$dir/all" >"$dir/files"
tar -cf - -T "$dir/files" 2>/dev/null | tar -xf - -C "$t/content"
img=$t/img
truncate -s "${image_mib}M" "$img"
mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=1,nodiscard -d "$t/content" "$img"
rm -rf "$t/content"
bmaptool -q create -o "$t/img.bmap" "$img"
zstd -q -T0 -o "$t/img.zst" "$img"
xz -T2 -6 -k -c "$img" >"$t/img.xz"
mapped=$(sed -n 's/.*<MappedBlocksCount> *\([0-9]*\).*/\1/p' "$t/img.bmap")
echo "image: $image_mib MiB ext4, $((mapped * 4096 / 1048576)) MiB mapped ($((mapped * 4096 * 100 / image_bytes))%);" \
  ".zst $(($(stat -c %s "$t/img.zst") / 1048576)) MiB, .xz $(($(stat -c %s "$t/img.xz") / 1048576)) MiB" \
  "($(xz -l --robot "$t/img.xz" | awk -F'\t' '/^file/ {print $3}') blocks); $(nproc) CPUs"

for n in 1 2; do
  truncate -s "${image_mib}M" "$t/dev$n"
  loops+=("$(losetup --find --show "$t/dev$n")")
done
dev1=${loops[0]}
dev2=${loops[1]}

has() { "$ddx" --help 2>&1 | grep -q -- "$1"; }
ddx_zstd=() ddx_xz=() ddx_tee=() ddx_compress=()
if has --decompress && has --bmap; then
  ddx_zstd=("$ddx if=$t/img.zst of=$dev1 --decompress --bmap=$t/img.bmap conv=fsync status=none")
  ddx_xz=("$ddx if=$t/img.xz of=$dev1 --decompress conv=fsync status=none")
fi
if has --compress; then
  "$ddx" if="$img" of="$t/img.frames.zst" --compress=zstd status=none
  ddx_zstd+=("$ddx if=$t/img.frames.zst of=$dev1 --decompress --bmap=$t/img.bmap conv=fsync status=none")
  ddx_compress=("$ddx if=$img of=$t/out.zst --compress=zstd status=none")
fi
if has --tee; then
  ddx_tee=("$ddx if=$img of=$dev1 bs=4M conv=fsync status=none"
    "$ddx if=$img of=$dev1 --tee=$dev2 bs=4M conv=fsync status=none")
fi

bench() {
  local name=$1
  shift
  hyperfine --warmup 1 --runs "$runs" --export-json "$dir/$name.json" "$@" >/dev/null 2>&1
  python3 - "$dir/$name.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"  {r['median']:7.3f} s  (min {r['min']:.3f}, max {r['max']:.3f})  {r['command']}")
PY
}

echo ".zst with its bmap:"
bench zst \
  "bmaptool -q copy --bmap $t/img.bmap $t/img.zst $dev1" \
  "sh -c 'zstdcat $t/img.zst | dd of=$dev1 bs=4M conv=fsync status=none'" \
  "${ddx_zstd[@]}"
echo "multi-block .xz:"
bench xz \
  "bmaptool -q copy --bmap $t/img.bmap $t/img.xz $dev1" \
  "sh -c 'xz -dc -T2 $t/img.xz | dd of=$dev1 bs=4M conv=fsync status=none'" \
  "${ddx_xz[@]}"
if "$ddx" --help 2>&1 | grep -q "with --bmap, only the mapped"; then
  echo "read-back (--verify):"
  plain="$ddx if=$t/img.zst of=$dev1 --decompress --bmap=$t/img.bmap conv=fsync status=none"
  bench verify "$plain" "$plain --verify" \
    "$ddx if=$t/img.zst of=$dev1 --decompress conv=fsync status=none" \
    "$ddx if=$t/img.zst of=$dev1 --decompress conv=fsync status=none --verify"
  python3 - "$dir/verify.json" "$mapped" "$image_bytes" <<'PY'
import json, sys
m = [r["median"] for r in json.load(open(sys.argv[1]))["results"]]
share = int(sys.argv[2]) * 4096 / int(sys.argv[3])
mapped, whole = m[1] - m[0], m[3] - m[2]
bar = whole * share * 1.25
print(f"  read-back of the mapped ranges {mapped:.3f} s, of the whole device {whole:.3f} s;"
      f" bar {bar:.3f} s ({share:.0%} of it, +25%): {'met' if mapped <= bar else 'NOT MET'}")
PY
fi
if [ ${#ddx_tee[@]} -gt 0 ]; then
  echo "two outputs:"
  bench tee "dd if=$img of=$dev1 bs=4M conv=fsync status=none" "${ddx_tee[@]}"
fi
if [ ${#ddx_compress[@]} -gt 0 ]; then
  echo "backup to .zst:"
  bench compress "zstd -q -f -T0 $img -o $t/out.zst" "${ddx_compress[@]}"
fi

# The same bytes: each ddx way, onto a device zeroed first (--bmap leaves
# unmapped blocks as they were, as bmaptool does).
for cmd in "${ddx_zstd[@]}" "${ddx_xz[@]}"; do
  dd if=/dev/zero of="$dev1" bs=4M status=none 2>/dev/null || true
  sh -c "$cmd"
  cmp -s -n "$image_bytes" "$img" "$dev1" && echo "  same bytes: ${cmd%% conv=*}" || { echo "  DIFFERENT BYTES: $cmd"; exit 1; }
done
if [ ${#ddx_tee[@]} -gt 0 ]; then
  sh -c "${ddx_tee[1]}"
  cmp -s -n "$image_bytes" "$img" "$dev2" && echo "  same bytes on the --tee device" || { echo "  DIFFERENT BYTES on --tee"; exit 1; }
fi
if [ ${#ddx_compress[@]} -gt 0 ]; then
  zstd -q -dc "$t/out.zst" | cmp -s - "$img" && echo "  zstd -d gives back the image" || { echo "  zstd -d DIFFERS"; exit 1; }
fi
