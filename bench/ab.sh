#!/usr/bin/env bash
# Two ddx binaries side by side on one copy, one run at a time in
# alternating order (A B, then B A), so that a machine whose speed drifts
# within a sitting moves both alike. hyperfine runs one command's rounds
# together; where the drift is as large as the difference sought, its two
# medians can disagree from one sitting to the next (the 8 GiB sparse
# export of bench/nbd.sh did: 0.72-1.08 s against 0.69-0.78 s in five
# sittings, then level over 30 alternating pairs).
#
# usage: bench/ab.sh [--rounds=N] [--before=CMD] A B -- OPERANDS...
#   A, B       the two binaries (the old one first)
#   OPERANDS   what each is run with; every run's output must succeed
#   --before   a shell command run before each run (removing the output)
#   --rounds   pairs of runs (default 20), after one warm-up run of each
# Prints each binary's median, min and max in ms, the median of B/A over
# the pairs, and in how many pairs B was faster.
#
# For example, the sparse export of bench/nbd.sh:
#   nbdkit --unix /tmp/s.sock sparse-random size=8G
#   bench/ab.sh --before='rm -f /dev/shm/out' OLD NEW -- \
#     'if=nbd+unix:///?socket=/tmp/s.sock' of=/dev/shm/out bs=1M conv=sparse status=none
set -euo pipefail
rounds=20
before=:
while [ $# -gt 0 ]; do
  case $1 in
    --rounds=*) rounds=${1#*=} ;;
    --before=*) before=${1#*=} ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 3 ] && [ "$3" = -- ] || { echo "usage: bench/ab.sh [--rounds=N] [--before=CMD] A B -- OPERANDS..." >&2; exit 2; }
a=$1
b=$2
shift 3
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "bench/ab.sh: $bin: not an executable" >&2; exit 2; }
done

# Milliseconds one run of $1 with the operands after it took.
one() {
  local bin=$1 start end
  shift
  bash -c "$before"
  start=$(date +%s%N)
  "$bin" "$@" >/dev/null 2>&1 <&- || { echo "bench/ab.sh: $bin failed" >&2; exit 1; }
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}

times=$(mktemp)
trap 'rm -f "$times"' EXIT
one "$a" "$@" >/dev/null
one "$b" "$@" >/dev/null
for i in $(seq "$rounds"); do
  if ((i % 2)); then
    ta=$(one "$a" "$@")
    tb=$(one "$b" "$@")
  else
    tb=$(one "$b" "$@")
    ta=$(one "$a" "$@")
  fi
  echo "$ta $tb" >>"$times"
done
python3 - "$times" "$a" "$b" <<'EOF'
import statistics as st
import sys

pairs = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
for k, name in ((0, sys.argv[2]), (1, sys.argv[3])):
    t = [p[k] for p in pairs]
    print(f"{name}: median {st.median(t):.0f} ms (min {min(t)}, max {max(t)})")
print(f"B/A per pair: median {st.median(b / a for a, b in pairs):.3f}; "
      f"B faster in {sum(b < a for a, b in pairs)} of {len(pairs)} pairs")
EOF
