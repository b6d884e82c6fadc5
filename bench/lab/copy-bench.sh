#!/usr/bin/env bash
# Slow-device copy benchmark: does a copy between two slow devices take the
# sum of the read and write times (sequential, like GNU dd) or their max
# (overlapped, like dd | dd)?
#
#   bench/lab/copy-bench.sh [--ddx=PATH] [--ddx-args='--opt ...'] [--size=N]
#                           [--reps=N] [--latency-ms=X] [--per64k-ms=Y] [--parallel]
#                           [--taskset=CPUS]
#
# Brings up the lab of rig.sh (two emulated devices, SRC and DST, on a tmpfs
# under a fresh temp dir), then for bs=64k and bs=1M, each buffered and with
# iflag=direct oflag=direct, times (median of --reps runs, interleaved):
#   read alone   dd if=SRC of=/dev/null
#   write alone  dd if=/dev/zero of=DST conv=notrunc,nocreat   (same bytes)
#   dd copy      dd if=SRC of=DST conv=notrunc,nocreat
#   dd | dd      dd if=SRC | dd of=DST iflag=fullblock conv=notrunc,nocreat
#   ddx copy     ddx [--ddx-args] with the dd copy's operands (if a ddx
#                binary is found)
# and prints a Markdown table with each copy's ratio to
# max(read alone, write alone). Every copy is checked byte for byte against
# the source (on the backing files). With --parallel, also ddx's O_DIRECT
# writes alone (in flight, and one at a time), its reads alone and its copy
# with --queue-depth=8 (reads and writes in flight), against GNU dd's. The rig comes down at the end, also on
# error or ^C. --taskset=CPUS runs every dd and ddx (not the devices'
# servers) under `taskset -c CPUS`: the one-CPU rows. Needs root. Defaults: --size=32M --reps=3, rig.sh's delays;
# --ddx defaults to target/release/ddx if it exists (--ddx= for none).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

ddx=
[ -x "$root/target/release/ddx" ] && ddx=$root/target/release/ddx
ddx_args=''
size=32M reps=3 pin=''
rig_args=()
for arg in "$@"; do
  case "$arg" in
    --ddx=*) ddx=${arg#*=} ;;
    --ddx-args=*) ddx_args=${arg#*=} ;;
    --size=*) size=${arg#*=} ;;
    --reps=*) reps=${arg#*=} ;;
    --latency-ms=* | --per64k-ms=* | --parallel) rig_args+=("$arg") ;;
    --taskset=*) pin="taskset -c ${arg#*=} " ;;
    *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
bytes=$(numfmt --from=iec "${size^^}") || exit 2
if [ "$bytes" -le 0 ] || [ $((bytes % 1048576)) -ne 0 ]; then echo "--size must be a positive multiple of 1M" >&2; exit 2; fi
[ -z "$ddx" ] || [ -x "$ddx" ] || { echo "no executable ddx at $ddx" >&2; exit 2; }

dir=$(mktemp -d /tmp/ddx-lab.XXXXXX)
cleanup() {
  "$here/rig.sh" down "$dir" || true
  rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$here/rig.sh" up "$dir" --size="$bytes" "${rig_args[@]}"
latency_ms='?' per64k_ms='?'
# shellcheck disable=SC1091
. "$dir/.lab/params" # size (bytes), latency_ms, per64k_ms, parallel
SRC=$dir/src DST=$dir/dst
srcimg=$dir/.lab/src.img dstimg=$dir/.lab/dst.img
if [ -n "$ddx" ]; then
  # a private copy, so a rebuild during the run cannot change what is measured
  cp "$ddx" "$dir/.lab/ddx"
  ddx_version=$("$ddx" --version 2>/dev/null | head -n1 || echo "ddx")
  ddx=$dir/.lab/ddx
fi

log() { echo "$*" >&2; }
failures=0

# run NAME CMD: time one run of CMD (a bash -c string); append seconds to
# times[NAME]. A copy (NAME not read/write) runs against a zeroed DST and is
# then compared with SRC.
declare -A times
run() {
  local name=$1 cmd=$2 t0 t1 err
  case "$name" in *copy | *pipe) fallocate --punch-hole --offset 0 --length "$size" "$dstimg" ;; esac
  err=$dir/.lab/err
  t0=$EPOCHREALTIME
  if ! bash -c "$cmd" 2>"$err"; then
    log "FAILED: $cmd"
    sed 's/^/  /' "$err" >&2
    failures=$((failures + 1))
    times[$name]+="nan "
    return 0
  fi
  t1=$EPOCHREALTIME
  case "$name" in
    *copy | *pipe)
      if ! cmp -s -n "$size" "$srcimg" "$dstimg"; then
        log "WRONG OUTPUT: $cmd"
        failures=$((failures + 1))
      fi
      ;;
  esac
  times[$name]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') "
}

median() { # whitespace-separated seconds on stdin; "nan" if any run failed
  tr ' ' '\n' | grep -v '^$' | sort -g | awk '/nan/ { bad = 1 } { v[NR] = $1 }
    END { if (bad || NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

configs=("64k buffered" "64k direct" "1M buffered" "1M direct")
log "copy-bench: $((size / 1048576)) MiB per run, $reps runs each, ${latency_ms} ms/request + ${per64k_ms} ms/64KiB; load: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$EPOCHREALTIME
for ((rep = 1; rep <= reps; rep++)); do
  for cfg in "${configs[@]}"; do
    read -r bs mode <<<"$cfg"
    count=$((size / $(numfmt --from=iec "${bs^^}")))
    ifl='' ofl=''
    [ "$mode" = direct ] && ifl=" iflag=direct" ofl=" oflag=direct"
    common="bs=$bs count=$count status=none"
    run "$cfg read" "${pin}dd if=$SRC of=/dev/null $common$ifl"
    run "$cfg write" "${pin}dd if=/dev/zero of=$DST $common conv=notrunc,nocreat$ofl"
    run "$cfg ddcopy" "${pin}dd if=$SRC of=$DST $common conv=notrunc,nocreat$ifl$ofl"
    run "$cfg pipe" "${pin}dd if=$SRC $common$ifl | ${pin}dd of=$DST bs=$bs status=none iflag=fullblock conv=notrunc,nocreat$ofl"
    [ -z "$ddx" ] || run "$cfg ddxcopy" "${pin}$ddx${ddx_args:+ $ddx_args} if=$SRC of=$DST $common conv=notrunc,nocreat$ifl$ofl"
    if [ "$parallel" = 1 ] && [ "$mode" = direct ] && [ -n "$ddx" ]; then
      # Requests in flight on devices that take them in parallel: ddx's
      # O_DIRECT writes alone (in flight by default) and one at a time,
      # its reads alone and the copy with --queue-depth=8 (the lab's
      # devices do not say they are solid state, so only an asked queue
      # depth keeps O_DIRECT reads in flight).
      run "$cfg ddxwrite" "${pin}$ddx${ddx_args:+ $ddx_args} if=/dev/zero of=$DST $common conv=notrunc,nocreat$ofl"
      run "$cfg ddxwrite1" "${pin}$ddx${ddx_args:+ $ddx_args} --queue-depth=1 if=/dev/zero of=$DST $common conv=notrunc,nocreat$ofl"
      run "$cfg ddxread8" "${pin}$ddx${ddx_args:+ $ddx_args} --queue-depth=8 if=$SRC of=/dev/null $common$ifl"
      run "$cfg ddxcopy8" "${pin}$ddx${ddx_args:+ $ddx_args} --queue-depth=8 if=$SRC of=$DST $common conv=notrunc,nocreat$ifl$ofl"
    fi
    line="  run $rep/$reps $cfg:"
    for k in read write ddcopy pipe ddxcopy ddxwrite ddxwrite1 ddxread8 ddxcopy8; do
      [ -n "${times[$cfg $k]:-}" ] && line+=" $k $(awk '{ print $NF }' <<<"${times[$cfg $k]}")"
    done
    log "$line"
  done
done
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')

cell() { # median max -> "1.234 s (1.02×)"
  awk -v t="$1" -v m="$2" 'BEGIN { if (t == "nan") print "failed"; else printf "%.2f s (%.2f×)", t, t / m }'
}
echo
one_at_a_time='one request at a time'
[ "$parallel" = 1 ] && one_at_a_time='requests overlap (--parallel)'
echo "$((size / 1048576)) MiB per copy, median of $reps; each device: ${latency_ms} ms per request + ${per64k_ms} ms per 64 KiB piece, $one_at_a_time."
echo "Ratio = copy time / max(read alone, write alone): ~1.0 is overlapped, ~2.0 is read-then-write."
echo
hdr="| bs | I/O | read alone | write alone | dd copy | dd \\| dd |"
sep="|---|---|---|---|---|---|"
if [ -n "$ddx" ]; then hdr+=" ddx copy |"; sep+="---|"; fi
echo "$hdr"
echo "$sep"
check=ok
for cfg in "${configs[@]}"; do
  read -r bs mode <<<"$cfg"
  r=$(median <<<"${times[$cfg read]}") w=$(median <<<"${times[$cfg write]}")
  m=$(awk -v r="$r" -v w="$w" 'BEGIN { print (r > w ? r : w) }')
  d=$(median <<<"${times[$cfg ddcopy]}") p=$(median <<<"${times[$cfg pipe]}")
  line="| $bs | $([ "$mode" = direct ] && echo O_DIRECT || echo buffered) | $(printf '%.2f' "$r") s | $(printf '%.2f' "$w") s | $(cell "$d" "$m") | $(cell "$p" "$m") |"
  if [ -n "$ddx" ]; then line+=" $(cell "$(median <<<"${times[$cfg ddxcopy]}")" "$m") |"; fi
  echo "$line"
  if [ "$mode" = direct ]; then
    # the rig's promise: with O_DIRECT, dd adds up and dd | dd overlaps
    awk -v d="$d" -v p="$p" -v m="$m" 'BEGIN { exit !(d / m > 1.7 && d / m < 2.3 && p / m < 1.25) }' || check=failed
  fi
done
if [ "$parallel" = 1 ] && [ -n "$ddx" ]; then
  echo
  echo "Requests in flight (O_DIRECT): writes alone (if=/dev/zero of=DST oflag=direct) and reads alone"
  echo "(if=SRC of=/dev/null iflag=direct), ratio to GNU dd's; the copy with --queue-depth=8, ratio to"
  echo "max(dd's read alone, dd's write alone)."
  echo
  echo "| bs | dd write | ddx write, one at a time | ddx write | dd read | ddx read, --queue-depth=8 | ddx copy, --queue-depth=8 |"
  echo "|---|---|---|---|---|---|---|"
  for cfg in "64k direct" "1M direct"; do
    read -r bs _ <<<"$cfg"
    r=$(median <<<"${times[$cfg read]}") w=$(median <<<"${times[$cfg write]}")
    m=$(awk -v r="$r" -v w="$w" 'BEGIN { print (r > w ? r : w) }')
    echo "| $bs | $(printf '%.2f' "$w") s | $(cell "$(median <<<"${times[$cfg ddxwrite1]}")" "$w") | $(cell "$(median <<<"${times[$cfg ddxwrite]}")" "$w") | $(printf '%.2f' "$r") s | $(cell "$(median <<<"${times[$cfg ddxread8]}")" "$r") | $(cell "$(median <<<"${times[$cfg ddxcopy8]}")" "$m") |"
  done
fi
echo
echo "ddx: ${ddx_version:-not measured}${ddx_args:+ with $ddx_args}${pin:+; every dd and ddx under $pin}; $(dd --version | head -n1); $(nproc) CPUs; ${elapsed} s total; load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rig check (O_DIRECT: dd copy 1.7-2.3×, dd | dd < 1.25×): $check"
[ "$failures" -eq 0 ] || { log "$failures runs failed or copied wrong bytes"; exit 1; }
