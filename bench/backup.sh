#!/usr/bin/env bash
# Backing up a used card: only the blocks its file systems use.
#
# The disk: an 8 GiB GPT disk image on a loop device, a 256 MiB FAT32
# partition and an ext4 partition on the rest, first filled with random
# bytes (what a used card holds everywhere), then formatted; each file
# system's free space filled with a file of random bytes, deleted (what
# deleted files leave on a used card); then given 1 GiB of real files
# (libraries and documentation from /usr, which compress as an OS's files
# do), a fifth of them on the FAT. Then, with
# the page cache dropped before every run (the disk is read as a card is,
# not from memory), at the same zstd level:
#   ddx if=DEV of=card.img.zst --compress=zstd:L --bmap-create=card.bmap --used-only
#   dd if=DEV bs=4M | zstd -L -T0
#   partclone.fat -c -s DEVp1 -o - | zstd -L -T0; partclone.ext4 -c -s DEVp2 -o - | zstd -L -T0
# The bar: ddx's time <= 0.25x dd | zstd's and <= 1.0x partclone's; the
# .img.zst <= 1.1x the used data compressed alone (the mapped ranges, cut
# out and compressed by zstd -L -T0). Then the backup is restored by
# bmaptool copy and by ddx --decompress --bmap onto a device full of other
# random bytes: e2fsck -fn and fsck.fat -n must call both clean, every
# file on the ext4 must read back as its original (tar --diff), and the
# map must hold every block partclone.fat and partclone.ext4 copy.
#
# usage (root: loop devices, mount): bench/backup.sh. SIZE_MIB= the disk
# (default 8192), DATA_MIB= the files (1024), FAT_MIB= the FAT32 (256),
# LEVEL= zstd's level (3), RUNS= hyperfine's runs (3), DIR= where the disk
# images go (default /var/tmp: a disk, so that reads are a device's; it
# needs about three times SIZE_MIB free). A smoke run: SIZE_MIB=384
# DATA_MIB=48 FAT_MIB=64 RUNS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/backup.sh needs root (loop devices, mount)"; exit 1; }
for tool in hyperfine sfdisk mkfs.ext4 mkfs.vfat mcopy partclone.ext4 partclone.fat zstd bmaptool \
  e2fsck fsck.fat losetup python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
size_mib=${SIZE_MIB:-8192}
data_mib=${DATA_MIB:-1024}
fat_mib=${FAT_MIB:-256}
level=${LEVEL:-3}
runs=${RUNS:-3}

dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-backup.XXXXXX")
loops=()
cleanup() {
  umount "$dir/mnt" 2>/dev/null || true
  for loop in "${loops[@]}"; do losetup -d "$loop" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/mnt" "$dir/out"

attach() { losetup --find --show --partscan "$1"; }
part() {
  local node=$1p$2
  [ -b "$node" ] || partx --add --nr "$2" "$1" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b "$node" ] && break; sleep 0.2; done
  echo "$node"
}

# Random bytes everywhere first: the free space a used card carries.
echo "building a ${size_mib} MiB disk (${fat_mib} MiB FAT32, ext4 on the rest)..."
head -c $((size_mib << 20)) /dev/urandom >"$dir/disk.img"
sfdisk -q "$dir/disk.img" <<EOF
label: gpt
start=2048, size=$((fat_mib * 2048)), type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7
start=$((2048 + fat_mib * 2048)), type=0FC63DAF-8483-4772-8E79-3D69D8477DE4
EOF
dev=$(attach "$dir/disk.img")
loops+=("$dev")
p1=$(part "$dev" 1)
p2=$(part "$dev" 2)
cluster=()
[ "$fat_mib" -ge 300 ] || cluster=(-s 1)
mkfs.vfat -F 32 "${cluster[@]}" "$p1" >/dev/null
mkfs.ext4 -q -F -E nodiscard "$p2"

# Files of random bytes over each file system's free space, deleted: their
# blocks keep the bytes, as a used card's do.
echo "filling the free space with files since deleted..."
fat_free=$(MTOOLS_SKIP_CHECK=1 mdir -i "$p1" :: 2>/dev/null | awk '/bytes free/ { gsub(/[^0-9]/, ""); print }')
if [ "${fat_free:-0}" -gt $((1 << 20)) ]; then
  head -c $((fat_free - (1 << 20))) /dev/urandom >"$dir/gone"
  MTOOLS_SKIP_CHECK=1 mcopy -i "$p1" "$dir/gone" ::/gone 2>/dev/null
  MTOOLS_SKIP_CHECK=1 mdel -i "$p1" ::/gone 2>/dev/null
  rm -f "$dir/gone"
fi
mount "$p2" "$dir/mnt"
ext_free=$(($(stat -f -c '%a * %S' "$dir/mnt") - (64 << 20)))
if [ "$ext_free" -gt 0 ]; then
  head -c "$ext_free" /dev/urandom >"$dir/mnt/gone"
  sync
  rm "$dir/mnt/gone"
fi
umount "$dir/mnt"

# The files, in a fixed order so that a machine builds the same disk.
find /usr/lib /usr/share -xdev -type f -size +4k -readable -printf '%p\t%s\n' 2>/dev/null \
  | sort >"$dir/all"
# Every fifth file goes to the FAT, up to half its size (its small
# clusters leave room unused at every file's end), the rest to ext4.
awk -F'\t' -v limit=$((data_mib << 20)) -v room=$((fat_mib << 19)) -v dir="$dir" '
  total + $2 > limit { exit }
  { total += $2 }
  NR % 5 == 1 && fat + $2 <= room { fat += $2; print $1 > (dir "/part.aa"); next }
  { print $1 > (dir "/part.ab") }' "$dir/all"
# The FAT through mtools (a kernel may have no vfat module).
mkdir "$dir/fat"
tar -cf - -T "$dir/part.aa" 2>/dev/null | tar -xf - -C "$dir/fat"
MTOOLS_SKIP_CHECK=1 mcopy -s -i "$p1" "$dir/fat/usr" ::/ 2>/dev/null
rm -rf "$dir/fat"
mount "$p2" "$dir/mnt"
tar -cf - -T "$dir/part.ab" 2>/dev/null | tar -xf - -C "$dir/mnt"
umount "$dir/mnt"
sync

drop="sync; echo 3 >/proc/sys/vm/drop_caches"
o=$dir/out
cmd_ddx="$ddx if=$dev of=$o/card.img.zst --compress=zstd:$level --bmap-create=$o/card.bmap --used-only status=none"
cmd_dd="sh -c 'dd if=$dev bs=4M status=none | zstd -$level -T0 -q -c >$o/dd.zst'"
cmd_pc="sh -c 'partclone.fat -q -c -s $p1 -o - 2>/dev/null | zstd -$level -T0 -q -c >$o/p1.pc.zst && \
partclone.ext4 -q -c -s $p2 -o - 2>/dev/null | zstd -$level -T0 -q -c >$o/p2.pc.zst'"
hyperfine --prepare "$drop" --runs "$runs" --export-json "$dir/times.json" \
  "$cmd_ddx" "$cmd_dd" "$cmd_pc" >/dev/null 2>&1

# The used data alone: the mapped ranges cut out of the disk, compressed.
python3 - "$o/card.bmap" "$dev" <<'PY' | zstd -"$level" -T0 -q -c >"$o/used.zst"
import re, sys
text = open(sys.argv[1]).read()
block = int(re.search(r"<BlockSize>\s*(\d+)", text).group(1))
out = sys.stdout.buffer
with open(sys.argv[2], "rb", buffering=0) as disk:
    for first, last in re.findall(r"<Range[^>]*>\s*(\d+)(?:-(\d+))?\s*</Range>", text):
        start, end = int(first) * block, (int(last or first) + 1) * block
        disk.seek(start)
        while start < end:
            chunk = disk.read(min(4 << 20, end - start))
            out.write(chunk)
            start += len(chunk)
PY

python3 - "$dir/times.json" "$o" "$size_mib" <<'PY'
import json, os, sys
results = json.load(open(sys.argv[1]))["results"]
ddx, dd, pc = (r["median"] for r in results)
o = sys.argv[2]
size = lambda name: os.path.getsize(os.path.join(o, name))
image, used = size("card.img.zst"), size("used.zst")
mapped = open(os.path.join(o, "card.bmap")).read().split("<MappedBlocksCount>")[1].split("<")[0].strip()
print(f"disk {sys.argv[3]} MiB, {int(mapped) * 4096 >> 20} MiB used (mapped)")
for name, t in (("ddx --used-only", ddx), ("dd | zstd -T0", dd), ("partclone x2 | zstd -T0", pc)):
    print(f"  {t:8.3f} s  {name}")
def verdict(ok):
    return "ok" if ok else "OVER THE BAR"
print(f"time: ddx / (dd | zstd) = {ddx / dd:.3f} (bar 0.25: {verdict(ddx / dd <= 0.25)})")
print(f"time: ddx / partclone   = {ddx / pc:.3f} (bar 1.0: {verdict(ddx / pc <= 1.0)})")
print(f"size: .img.zst {image >> 20} MiB / used data compressed {used >> 20} MiB = "
      f"{image / used:.3f} (bar 1.1: {verdict(image / used <= 1.1)})")
PY

# ddx's map holds every block partclone copies (its domain file's '+'
# lines).
for n in 1 2; do
  tool=partclone.fat; [ $n = 2 ] && tool=partclone.ext4
  p=$p1; [ $n = 2 ] && p=$p2
  $tool -q -D -s "$p" -o "$dir/p$n.domain" >/dev/null 2>&1
  start=$(($(cat "/sys/class/block/$(basename "$p")/start") * 512))
  python3 - "$o/card.bmap" "$dir/p$n.domain" "$start" "$tool" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = int(re.search(r"<BlockSize>\s*(\d+)", text).group(1))
mapped = [(int(a) * block, (int(b or a) + 1) * block)
          for a, b in re.findall(r"<Range[^>]*>\s*(\d+)(?:-(\d+))?\s*</Range>", text)]
base, tool = int(sys.argv[3]), sys.argv[4]
missing = 0
for line in open(sys.argv[2]):
    fields = line.split()
    if line.startswith("#") or len(fields) != 3 or fields[2] != "+":
        continue
    start = base + int(fields[0], 16)
    end = start + int(fields[1], 16)
    if not any(a <= start and end <= b for a, b in mapped):
        missing += end - start
print(f"{tool}: every block it copies is mapped" if missing == 0
      else f"{tool}: {missing} bytes it copies are NOT MAPPED")
sys.exit(1 if missing else 0)
PY
done

# The restore, by bmaptool and by ddx, onto a device full of other data.
head -c $((size_mib << 20)) /dev/urandom >"$dir/target.img"
target=$(attach "$dir/target.img")
loops+=("$target")
for how in bmaptool ddx; do
  if [ $how = bmaptool ]; then
    bmaptool -q copy --bmap "$o/card.bmap" "$o/card.img.zst" "$target"
  else
    "$ddx" if="$o/card.img.zst" of="$target" --decompress --bmap="$o/card.bmap" status=none
  fi
  partx -u "$target" 2>/dev/null || true
  t1=$(part "$target" 1)
  t2=$(part "$target" 2)
  e2fsck -fn "$t2" >/dev/null 2>&1 && fsck.fat -n "$t1" >/dev/null 2>&1 \
    && echo "restored by $how: e2fsck -fn and fsck.fat -n clean" \
    || { echo "restored by $how: NOT CLEAN"; exit 1; }
  mount -o ro "$t2" "$dir/mnt"
  (cd / && tar -cf - -T "$dir/part.ab" 2>/dev/null) | tar -d -f - -C "$dir/mnt" >"$dir/diff" 2>&1 \
    && echo "restored by $how: every file on the ext4 reads back as it was" \
    || { echo "restored by $how: FILES DIFFER: $(head -n 3 "$dir/diff")"; umount "$dir/mnt"; exit 1; }
  umount "$dir/mnt"
  head -c $((size_mib << 20)) /dev/urandom | dd of="$target" bs=4M status=none 2>/dev/null || true
done
