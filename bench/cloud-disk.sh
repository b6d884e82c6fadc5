#!/usr/bin/env bash
# A copy within one fast disk against its floor, and what --hash costs a
# direct read, on a file of the root filesystem (a cloud or virtio disk).
#
#   bench/cloud-disk.sh [--ddx=PATH] [--size=N] [--reps=N] [--dir=DIR]
#                       [--depths='1 4 16 32'] [--drop-caches]
#
# In DIR (default: a fresh directory under /var/tmp, on the root
# filesystem) it writes a SIZE source of random bytes, then, in --reps
# alternated rounds, each run cold (the source's and the output's pages
# dropped first; --drop-caches drops every cache of the machine instead),
# times:
#   fio read QD     fio's direct sequential read of the source, bs=1M, at
#                   each depth of --depths (fio's own time, without its
#                   start-up)
#   fio write QD    fio's direct sequential write of a new file, the same
#   fio read+write  both at once (two jobs), at depths 1 and 4, timed from
#                   start to the end of both: what the disk gives a copy
#                   whose reads and writes share it
#   dd/ddx direct   if=SRC of=DST bs=1M iflag=direct oflag=direct
#   dd/ddx fsync    if=SRC of=DST bs=1M conv=fsync
#   read, read+blake3, read+sha256
#                   ddx if=SRC of=/dev/null bs=1M iflag=direct [--hash=ALG]
# and prints the medians and the ratios the bar is about:
#   floor           the slower of fio's best read and best write: a copy
#                   that overlapped its reads and writes perfectly
#   ddx/floor       for both operand sets: at most 1.3
#   ddx/dd          for both operand sets: at most 0.8 (fsync: at most 1)
#   hash/read       each --hash against the same read without: at most 1.10
# Every copy is compared with the source once. ddx's --verbose lines for
# the direct copy (what the probe measured, how the copy ran) are shown.
# Needs fio and GNU dd; root only for --drop-caches. Defaults: --size=2G
# --reps=5.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

ddx=
for candidate in "${CARGO_TARGET_DIR:-$root/target}/release/ddx" "$root/target/release/ddx"; do
  [ -x "$candidate" ] && { ddx=$candidate; break; }
done
size=2G reps=5 parent=/var/tmp depths='1 4 16 32' drop_all=
for arg in "$@"; do
  case "$arg" in
    --ddx=*) ddx=${arg#*=} ;;
    --size=*) size=${arg#*=} ;;
    --reps=*) reps=${arg#*=} ;;
    --dir=*) parent=${arg#*=} ;;
    --depths=*) depths=${arg#*=} ;;
    --drop-caches) drop_all=1 ;;
    *) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ -n "$ddx" ] && [ -x "$ddx" ] || { echo "no ddx binary (build with cargo build --release, or --ddx=PATH)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio is needed (apt-get install fio)" >&2; exit 2; }
bytes=$(numfmt --from=iec "${size^^}") || exit 2
if [ "$bytes" -le 0 ] || [ $((bytes % 1048576)) -ne 0 ]; then echo "--size must be a positive multiple of 1M" >&2; exit 2; fi
mib=$((bytes / 1048576))

dir=$(mktemp -d "$parent/ddx-cloud.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# a private copy, so a rebuild during the run cannot change what is measured
cp "$ddx" "$dir/ddx"
ddx=$dir/ddx
src=$dir/src dst=$dir/dst fiofile=$dir/fio-write
head -c "$bytes" /dev/urandom >"$src"
sync

# cold: nothing of the files in the page cache, nothing dirty anywhere
cold() {
  sync
  if [ -n "$drop_all" ]; then
    echo 3 >/proc/sys/vm/drop_caches
  else
    local f
    for f in "$src" "$dst"; do
      if [ -e "$f" ]; then dd if="$f" iflag=nocache count=0 status=none; fi
    done
  fi
}

declare -A times
failures=0
# time_run NAME CMD: seconds of one cold run appended to times[NAME]
time_run() {
  local name=$1 cmd=$2 t0 t1
  cold
  t0=$EPOCHREALTIME
  if ! bash -c "$cmd" >/dev/null 2>"$dir/err"; then
    echo "FAILED: $cmd" >&2
    sed 's/^/  /' "$dir/err" >&2
    failures=$((failures + 1))
  fi
  t1=$EPOCHREALTIME
  times[$name]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }') "
}
# check NAME: DST must be SRC's bytes (first round only: it reads both)
check() {
  if ! cmp -s "$src" "$dst"; then
    echo "WRONG OUTPUT: $1" >&2
    failures=$((failures + 1))
  fi
}
median() {
  tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
med() { echo "${times[$1]}" | median; }

# fio_run NAME RW FILE DEPTH: fio's own time for the job (its start-up,
# which is not the disk's, left out), appended to times[NAME]
fio_run() {
  local name=$1 rw=$2 file=$3 qd=$4 t
  cold
  if ! fio --name=floor --filename="$file" --rw="$rw" --bs=1M --direct=1 --ioengine=libaio \
    --iodepth="$qd" --size="$bytes" --output-format=json >"$dir/fio.json" 2>"$dir/err"; then
    echo "FAILED: fio $rw QD$qd" >&2
    sed 's/^/  /' "$dir/err" >&2
    failures=$((failures + 1))
    return
  fi
  t=$(python3 -c 'import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print("%.4f" % (job["runtime"] / 1000))' "$dir/fio.json" "$rw")
  times[$name]+="$t "
}

echo "cloud-disk: $mib MiB in $dir ($(df -T "$dir" | awk 'NR==2 { print $1", "$2 }')), $reps rounds; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((round = 1; round <= reps; round++)); do
  for qd in $depths; do
    fio_run "fio read QD$qd" read "$src" "$qd"
    rm -f "$fiofile"
    fio_run "fio write QD$qd" write "$fiofile" "$qd"
    rm -f "$fiofile"
  done
  # Reads and writes at once, as a copy within the disk makes them: two
  # fio jobs started together, timed until both end.
  for qd in 1 4; do
    rm -f "$fiofile"
    time_run "fio read+write QD$qd" "fio --bs=1M --direct=1 --ioengine=libaio \
      --iodepth=$qd --size=$bytes --name=r --filename=$src --rw=read \
      --name=w --filename=$fiofile --rw=write"
    rm -f "$fiofile"
  done
  for tool in dd ddx; do
    bin=dd
    [ "$tool" = ddx ] && bin=$ddx
    rm -f "$dst"
    time_run "$tool direct" "$bin if=$src of=$dst bs=1M iflag=direct oflag=direct"
    [ "$round" -gt 1 ] || check "$tool direct"
    rm -f "$dst"
    time_run "$tool fsync" "$bin if=$src of=$dst bs=1M conv=fsync"
    [ "$round" -gt 1 ] || check "$tool fsync"
  done
  rm -f "$dst"
  time_run "read" "$ddx if=$src of=/dev/null bs=1M iflag=direct"
  time_run "read+blake3" "$ddx if=$src of=/dev/null bs=1M iflag=direct --hash=blake3"
  time_run "read+sha256" "$ddx if=$src of=/dev/null bs=1M iflag=direct --hash=sha256"
  echo "  round $round/$reps done" >&2
done

# What ddx measured and decided, for the direct copy.
cold
"$ddx" if="$src" of="$dst" bs=1M iflag=direct oflag=direct --verbose 2>&1 |
  grep -E ': (devices|backend|requests):' | sed 's/^[^:]*: /ddx --verbose: /'
rm -f "$dst"

best() { # PREFIX: the least median over the depths, and its depth
  local qd t best_t='' best_qd=''
  for qd in $depths; do
    t=$(med "$1 QD$qd")
    if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then
      best_t=$t best_qd=$qd
    fi
  done
  echo "$best_t $best_qd"
}
read -r read_t read_qd <<<"$(best "fio read")"
read -r write_t write_qd <<<"$(best "fio write")"
floor=$(awk -v r="$read_t" -v w="$write_t" 'BEGIN { print (r > w) ? r : w }')

echo
echo "ddx: $("$ddx" --version | head -n1); $mib MiB, medians of $reps cold rounds"
echo
echo "| run | median s | MB/s |"
echo "|---|---:|---:|"
for qd in $depths; do
  for rw in read write; do
    t=$(med "fio $rw QD$qd")
    awk -v n="fio $rw QD$qd" -v t="$t" -v s="$bytes" 'BEGIN { printf "| %s | %.3f | %.0f |\n", n, t, s / t / 1e6 }'
  done
done
for name in "fio read+write QD1" "fio read+write QD4" "dd direct" "ddx direct" "dd fsync" "ddx fsync" read read+blake3 read+sha256; do
  t=$(med "$name")
  awk -v n="$name" -v t="$t" -v s="$bytes" 'BEGIN { printf "| %s | %.3f | %.0f |\n", n, t, s / t / 1e6 }'
done
echo
echo "floor: $floor s (fio's best read ${read_t} s at QD$read_qd, best write ${write_t} s at QD$write_qd)"
echo
echo "| ratio | value | bar |"
echo "|---|---:|---:|"
ratio() { # NAME A B BAR
  awk -v n="$1" -v a="$2" -v b="$3" -v bar="$4" 'BEGIN {
    r = a / b; printf "| %s | %.2f | <= %s%s |\n", n, r, bar, (r <= bar) ? "" : " (over)" }'
}
ratio "ddx direct / floor" "$(med "ddx direct")" "$floor" 1.3
ratio "ddx fsync / floor" "$(med "ddx fsync")" "$floor" 1.3
ratio "ddx direct / dd direct" "$(med "ddx direct")" "$(med "dd direct")" 0.8
ratio "ddx fsync / dd fsync" "$(med "ddx fsync")" "$(med "dd fsync")" 0.8
ratio "read+blake3 / read" "$(med read+blake3)" "$(med read)" 1.10
ratio "read+sha256 / read" "$(med read+sha256)" "$(med read)" 1.10
mixed=$(for qd in 1 4; do med "fio read+write QD$qd"; done | sort -g | head -n1)
echo
echo "fio reading and writing the disk at once (its best of QD1 and QD4): $mixed s, $(awk -v m="$mixed" -v f="$floor" 'BEGIN { printf "%.2f", m / f }')x the floor; ddx direct / that: $(awk -v a="$(med "ddx direct")" -v m="$mixed" 'BEGIN { printf "%.2f", a / m }')"
[ "$failures" -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
