#!/usr/bin/env bash
# What --hash and --verify cost a copy.
#
#   bench/hash-cost.sh [--ddx=PATH] [--size=N] [--reps=N] [--latency-ms=X] [--per64k-ms=Y]
#
# 1. Slow devices (the lab of bench/lab/rig.sh: two emulated devices whose
#    reads and writes are slower than the CPU hashes): ddx copies SRC to DST
#    (bs=1M, conv=notrunc,nocreat) plain, with each --hash algorithm, with
#    all three, and with --verify; median of --reps interleaved runs, and
#    each variant's ratio to the plain copy. The target: hashing costs
#    at most 5% where the CPU is faster than the devices. --verify re-reads
#    the whole output from the device, so it costs about one read of the
#    output on top: it is shown, not held to that target.
# 2. Memory speed (a tmpfs file to /dev/null, where the copy costs nothing
#    and the CPU is the limit): the same variants, to show each algorithm's
#    own throughput on this machine.
# Prints Markdown tables; every lab copy is checked against the source.
# Needs root (the lab mounts a tmpfs and FUSE). Defaults: --size=64M --reps=3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

ddx=
for candidate in "${CARGO_TARGET_DIR:-$root/target}/release/ddx" "$root/target/release/ddx"; do
  [ -x "$candidate" ] && { ddx=$candidate; break; }
done
size=64M reps=3
rig_args=()
for arg in "$@"; do
  case "$arg" in
    --ddx=*) ddx=${arg#*=} ;;
    --size=*) size=${arg#*=} ;;
    --reps=*) reps=${arg#*=} ;;
    --latency-ms=* | --per64k-ms=*) rig_args+=("$arg") ;;
    *) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ -n "$ddx" ] && [ -x "$ddx" ] || { echo "no ddx binary (build with cargo build --release, or --ddx=PATH)" >&2; exit 2; }
bytes=$(numfmt --from=iec "${size^^}") || exit 2
if [ "$bytes" -le 0 ] || [ $((bytes % 1048576)) -ne 0 ]; then echo "--size must be a positive multiple of 1M" >&2; exit 2; fi

dir=$(mktemp -d /tmp/ddx-hash.XXXXXX)
cleanup() {
  "$root/bench/lab/rig.sh" down "$dir" || true
  rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$root/bench/lab/rig.sh" up "$dir" --size="$bytes" "${rig_args[@]}"
latency_ms='?' per64k_ms='?'
# shellcheck disable=SC1091
. "$dir/.lab/params"
cp "$ddx" "$dir/.lab/ddx"
ddx=$dir/.lab/ddx
SRC=$dir/src DST=$dir/dst
srcimg=$dir/.lab/src.img dstimg=$dir/.lab/dst.img

variants=("plain:" "sha256:--hash=sha256" "blake3:--hash=blake3" "xxh3:--hash=xxh3"
  "all three:--hash=sha256,blake3,xxh3" "verify:--verify")
declare -A times
failures=0

# time_run NAME CMD [CHECK]: seconds of one run appended to times[NAME].
time_run() {
  local name=$1 cmd=$2 check=${3:-} t0 t1
  t0=$EPOCHREALTIME
  if ! bash -c "$cmd" 2>"$dir/.lab/err"; then
    echo "FAILED: $cmd" >&2
    sed 's/^/  /' "$dir/.lab/err" >&2
    failures=$((failures + 1))
  fi
  t1=$EPOCHREALTIME
  if [ -n "$check" ] && ! cmp -s -n "$bytes" "$srcimg" "$dstimg"; then
    echo "WRONG OUTPUT: $cmd" >&2
    failures=$((failures + 1))
  fi
  times[$name]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') "
}

median() {
  tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

table() { # PREFIX TITLE
  local prefix=$1 base v name t
  echo
  echo "$2"
  echo
  echo "| variant | median s | MB/s | vs plain |"
  echo "|---|---:|---:|---:|"
  base=$(echo "${times[$prefix plain]}" | median)
  for v in "${variants[@]}"; do
    name=${v%%:*}
    [ -n "${times[$prefix $name]:-}" ] || continue
    t=$(echo "${times[$prefix $name]}" | median)
    awk -v n="$name" -v t="$t" -v b="$base" -v s="$bytes" \
      'BEGIN { printf "| %s | %.3f | %.0f | %+.1f%% |\n", n, t, s / t / 1e6, (t / b - 1) * 100 }'
  done
}

echo "hash-cost: $((bytes / 1048576)) MiB, $reps runs each; lab ${latency_ms} ms/request + ${per64k_ms} ms/64KiB; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((rep = 1; rep <= reps; rep++)); do
  for v in "${variants[@]}"; do
    name=${v%%:*} args=${v#*:}
    fallocate --punch-hole --offset 0 --length "$bytes" "$dstimg"
    time_run "lab $name" "$ddx $args if=$SRC of=$DST bs=1M conv=notrunc,nocreat status=none >/dev/null" check
  done
  echo "  lab run $rep/$reps done" >&2
done

# Memory speed: the source image (on the lab's tmpfs) to /dev/null.
for ((rep = 1; rep <= reps; rep++)); do
  for v in "${variants[@]}"; do
    name=${v%%:*} args=${v#*:}
    [ "$name" = verify ] && continue
    time_run "mem $name" "$ddx $args if=$srcimg of=/dev/null bs=1M status=none"
  done
done

echo "ddx: $("$ddx" --version | head -n1); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
table lab "Slow devices (lab, bs=1M): hashing is to cost <= 5%"
table mem "Memory speed (tmpfs file to /dev/null, bs=1M): the CPU is the limit"
[ "$failures" -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
