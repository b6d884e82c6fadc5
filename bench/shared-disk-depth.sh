#!/usr/bin/env bash
# A direct copy within one disk at each depth ddx could choose, beside GNU
# dd: what sets planner::SHARED_DISK_DEPTH.
#
#   bench/shared-disk-depth.sh [--ddx=PATH] [--size=N] [--reps=N] [--dir=DIR]
#
# In DIR (default: a fresh directory under /var/tmp, on the root
# filesystem) it writes a SIZE (default 2G) source of random bytes, then in
# --reps (default 4) alternated rounds times, each run with every cache of
# the machine dropped first (root), `if=SRC of=DST bs=1M iflag=direct
# oflag=direct` by GNU dd, by ddx in turn (--backend=sync), at
# --queue-depth=1, 2 and 16, and as ddx chooses. Prints the medians and
# each one's ratio to dd's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ddx=$here/../target/release/ddx size=2G reps=4 parent=/var/tmp
for arg in "$@"; do
  case "$arg" in
    --ddx=*) ddx=${arg#*=} ;;
    --size=*) size=${arg#*=} ;;
    --reps=*) reps=${arg#*=} ;;
    --dir=*) parent=${arg#*=} ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ -x "$ddx" ] || { echo "no ddx binary (cargo build --release, or --ddx=PATH)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (drop_caches)" >&2; exit 2; }
dir=$(mktemp -d "$parent/ddx-depth.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp "$ddx" "$dir/ddx"
head -c "$(numfmt --from=iec "${size^^}")" /dev/urandom >"$dir/src"
sync
declare -A times
run() { # NAME COMMAND...
  local name=$1 a b
  shift
  rm -f "$dir/dst"
  sync
  echo 3 >/proc/sys/vm/drop_caches
  a=$EPOCHREALTIME
  "$@" >/dev/null 2>"$dir/err" || { echo "FAILED: $*" >&2; cat "$dir/err" >&2; exit 1; }
  b=$EPOCHREALTIME
  cmp -s "$dir/src" "$dir/dst" || { echo "WRONG OUTPUT: $name" >&2; exit 1; }
  times[$name]+="$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b - a }') "
}
ops=(if="$dir/src" of="$dir/dst" bs=1M iflag=direct oflag=direct)
names=(dd "in turn" depth-1 depth-2 depth-16 chosen)
for ((round = 1; round <= reps; round++)); do
  run dd dd "${ops[@]}"
  run "in turn" "$dir/ddx" "${ops[@]}" --backend=sync
  run depth-1 "$dir/ddx" "${ops[@]}" --queue-depth=1
  run depth-2 "$dir/ddx" "${ops[@]}" --queue-depth=2
  run depth-16 "$dir/ddx" "${ops[@]}" --queue-depth=16
  run chosen "$dir/ddx" "${ops[@]}"
  echo "  round $round/$reps done" >&2
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 }
  END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
dd_t=$(echo "${times[dd]}" | median)
echo "shared-disk-depth: $size, $reps rounds, $(df -T "$dir" | awk 'NR==2 { print $1", "$2 }'); $("$dir/ddx" --version | head -n1)"
sync; echo 3 >/proc/sys/vm/drop_caches
"$dir/ddx" "${ops[@]}" --verbose 2>&1 | grep -E ': (devices|requests):' | sed 's/^[^:]*: /ddx --verbose: /'
for name in "${names[@]}"; do
  t=$(echo "${times[$name]}" | median)
  awk -v n="$name" -v t="$t" -v d="$dd_t" 'BEGIN { printf "  %-9s median %6.3f s  %.2fx dd\n", n, t, t / d }'
done
