#!/usr/bin/env bash
# The NBD figures in one run, servers started and stopped here, on Unix
# sockets in a temporary directory, images on a tmpfs:
#  1. 1 GiB between two nbdkit file servers, each adding 1 ms per request
#     (delay filter; parallel requests allowed):
#       ddx if=nbd+unix:///?socket=S of=nbd+unix:///?socket=D bs=1M
#     against nbdcopy (default: 4 connections), nbdcopy -C 1 and
#     qemu-img convert -n; the destination's bytes are checked each time.
#  2. An 8 GiB sparse-random export to a file on the tmpfs:
#       ddx if=URI of=FILE bs=1M conv=sparse
#     against nbdcopy with extents and nbdcopy --no-extents; the file is
#     compared with nbdcopy's.
#  3. ddx bench nbd+unix://... (seq-read, seq-write) beside fio's nbd
#     engine (--ioengine=nbd --uri=... --rw=read/write --bs=1M
#     --iodepth=1) on an nbdkit file export of 1 GiB of data on the
#     tmpfs, in alternating rounds.
# Prints each median and the ratios the targets are about:
# ddx / best(nbdcopy, qemu-img) for 1 (target <= 1.0), ddx / nbdcopy for 2
# (target <= 1.2), ddx bench / fio for 3 (target: within 10%).
#
# usage (root: tmpfs): bench/nbd.sh; RUNS= sets hyperfine's runs
# (default 5). Needs nbdkit (file, sparse-random, memory plugins; delay
# filter), nbdcopy, qemu-img, fio with its nbd engine, hyperfine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/nbd.sh needs root (tmpfs)"; exit 1; }
for tool in hyperfine nbdkit nbdcopy qemu-img fio python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "fio has no nbd engine"; exit 1; }
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
runs=${RUNS:-5}

dir=$(mktemp -d /var/tmp/ddx-nbd.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  umount "$dir/tmpfs" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/tmpfs"
mount -t tmpfs -o size=12G ddx-nbd-bench "$dir/tmpfs"
t=$dir/tmpfs

# nbdkit NAME ARGS...: a server on $dir/NAME.sock, its pid kept for the
# cleanup; a stale socket is removed first.
serve() {
  local name=$1
  shift
  rm -f "$dir/$name.sock"
  nbdkit --unix "$dir/$name.sock" --pidfile "$dir/$name.pid" "$@"
  for _ in $(seq 100); do [ -s "$dir/$name.pid" ] && break; sleep 0.05; done
  pids+=("$(cat "$dir/$name.pid")")
}
uri() { echo "nbd+unix:///?socket=$dir/$1.sock"; }

# median NAME CMD...: hyperfine's median in seconds, printed and returned
# in $median.
median() {
  local name=$1
  shift
  hyperfine --warmup 1 --runs "$runs" --export-json "$dir/$name.json" "$@" >/dev/null 2>&1
  median=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$dir/$name.json")
  printf '  %-34s %8.3f s\n' "$name" "$median"
}
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }

echo "== 1 GiB between two nbdkit file servers (delay 1 ms per request)"
head -c 1G /dev/urandom >"$t/src.img"
truncate -s 1G "$t/dst.img"
# (nbdkit takes the plugin's name before every key=value, the filters' too)
serve src --filter=delay file "file=$t/src.img" delay-read=1ms delay-write=1ms
serve dst --filter=delay file "file=$t/dst.img" delay-read=1ms delay-write=1ms
S=$(uri src)
D=$(uri dst)
check_copy() {
  cmp -s "$t/src.img" "$t/dst.img" || { echo "$1: other bytes at the destination"; exit 1; }
  truncate -s 0 "$t/dst.img" && truncate -s 1G "$t/dst.img"
}
median ddx "$ddx if=$S of=$D bs=1M status=none"
ddx_time=$median
check_copy ddx
median nbdcopy "nbdcopy $S $D"
best=$median
check_copy nbdcopy
median "nbdcopy -C 1" "nbdcopy -C 1 $S $D"
best=$(python3 -c "print(min($best, $median))")
check_copy "nbdcopy -C 1"
median "qemu-img convert -n" "qemu-img convert -n -f raw -O raw '$S' '$D'"
best=$(python3 -c "print(min($best, $median))")
check_copy "qemu-img convert"
echo "  ratio ddx / best of the others: $(ratio "$ddx_time" "$best") (target <= 1.0)"
for pid in "${pids[@]}"; do kill "$pid"; done
pids=()
rm -f "$t/src.img" "$t/dst.img"

echo "== 8 GiB sparse-random export to a file"
serve sparse sparse-random size=8G
R=$(uri sparse)
median "ddx conv=sparse" "rm -f $t/ddx.out; $ddx if=$R of=$t/ddx.out bs=1M conv=sparse status=none"
ddx_time=$median
median "nbdcopy (extents)" "rm -f $t/nbdcopy.out; truncate -s 8G $t/nbdcopy.out; nbdcopy $R $t/nbdcopy.out"
with_extents=$median
median "nbdcopy --no-extents" "rm -f $t/nbdcopy.out; truncate -s 8G $t/nbdcopy.out; nbdcopy --no-extents $R $t/nbdcopy.out"
cmp -s "$t/ddx.out" "$t/nbdcopy.out" || { echo "ddx and nbdcopy wrote other bytes"; exit 1; }
echo "  ratio ddx / nbdcopy with extents: $(ratio "$ddx_time" "$with_extents") (target <= 1.2)"
rm -f "$t/ddx.out" "$t/nbdcopy.out"
for pid in "${pids[@]}"; do kill "$pid"; done
pids=()

echo "== ddx bench on an export beside fio's nbd engine (file export on the tmpfs, 1 GiB)"
# A file of data, not nbdkit's memory plugin: an unwritten memory export
# reads as holes (no data moves) and its first writes allocate, so
# whichever tool ran first would be measured on another device.
head -c 1G /dev/urandom >"$t/bench.img"
serve bench file "file=$t/bench.img"
M=$(uri bench)
# The bandwidth of one fio run, MiB/s: 1 MiB requests, one in flight,
# as ddx bench's seq tests on an export (the nbd engine prints a line of
# its own on stdout, so the JSON goes to a file).
fio_bw() {
  fio --name=nbd --ioengine=nbd --uri="$M" --rw="$1" --bs=1M --iodepth=1 --size=1G \
    --output-format=json --output="$dir/fio.json" >/dev/null
  python3 -c "import json,sys; j=json.load(open('$dir/fio.json'))['jobs'][0]['$2']; print(j['bw_bytes']/1048576)"
}
ddx_bw() {
  "$ddx" bench "$M" --tests="$1" --destructive --size=1G --json >"$dir/bench.json"
  python3 -c "import json; r=[r for r in json.load(open('$dir/bench.json'))['results'] if r['test']=='$1' and r['mode']=='nbd'][0]; print(r['throughput_bytes_per_sec']/1048576)"
}
# Alternating rounds, the median of each.
for _ in $(seq "$runs"); do
  echo "fio read $(fio_bw read read)" >>"$dir/nbd-bw"
  echo "ddx read $(ddx_bw seq-read)" >>"$dir/nbd-bw"
  echo "fio write $(fio_bw write write)" >>"$dir/nbd-bw"
  echo "ddx write $(ddx_bw seq-write)" >>"$dir/nbd-bw"
done
bw() { awk -v t="$1" -v d="$2" '$1 == t && $2 == d { print $3 }' "$dir/nbd-bw" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
fio_read=$(bw fio read) ddx_read=$(bw ddx read) fio_write=$(bw fio write) ddx_write=$(bw ddx write)
printf '  read:  fio nbd %8.1f MiB/s, ddx bench %8.1f MiB/s, ratio %s\n' "$fio_read" "$ddx_read" "$(ratio "$ddx_read" "$fio_read")"
printf '  write: fio nbd %8.1f MiB/s, ddx bench %8.1f MiB/s, ratio %s\n' "$fio_write" "$ddx_write" "$(ratio "$ddx_write" "$fio_write")"
echo "  (target: within 10%; bench/bench-vs-fio.sh measures the same in alternating rounds)"
