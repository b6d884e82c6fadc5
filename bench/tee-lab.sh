#!/usr/bin/env bash
# --tee on slow devices: the slow-device lab's two devices (bench/lab/rig.sh:
# 1 ms per request + 2 ms per 64 KiB, one request at a time each) written
# with a SIZE image (default 32M) from a tmpfs, by
#   dd   if=IMG of=DST bs=1M conv=notrunc,nocreat,fsync
#   ddx  the same                                      (one output)
#   ddx  the same --tee=SRC                            (two outputs)
# and the same three with oflag=direct; hyperfine medians, each ddx's
# ratio to its one-output time (target: two outputs <= 1.35x one).
# Where writes wait for devices (cards, sticks), outputs written at once
# should cost the slower one's time; bench/image.sh measures the opposite
# end, tmpfs-backed loop devices where every write is a memory copy.
#
# usage (root): bench/tee-lab.sh [SIZE]; RUNS= (default 5), DDX=.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
size=${1:-32M}
ddx=$(realpath "${DDX:-$here/../target/release/ddx}")
[ -x "$ddx" ] || { echo "no ddx at $ddx (cargo build --release)"; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine is needed"; exit 1; }
dir=$(mktemp -d /tmp/ddx-tee-lab.XXXXXX)
img=$(mktemp /dev/shm/ddx-tee-img.XXXXXX)
cleanup() {
  "$here/lab/rig.sh" down "$dir" >/dev/null 2>&1 || true
  rmdir "$dir" 2>/dev/null || true
  rm -f "$img"
}
trap cleanup EXIT
"$here/lab/rig.sh" up "$dir" --size="$size" >/dev/null
head -c "$(numfmt --from=iec "$size")" /dev/urandom >"$img"
for flags in "" " oflag=direct"; do
  common="bs=1M conv=notrunc,nocreat,fsync status=none$flags"
  hyperfine -N --warmup 1 --runs "${RUNS:-5}" --export-json "$dir.json" \
    "dd if=$img of=$dir/dst $common" \
    "$ddx if=$img of=$dir/dst $common" \
    "$ddx if=$img of=$dir/dst --tee=$dir/src $common" >/dev/null 2>&1
  python3 - "$dir.json" "${flags:- buffered}" <<'PY'
import json, sys
r = [x["median"] for x in json.load(open(sys.argv[1]))["results"]]
print(f"{sys.argv[2].strip()}: dd {r[0]:.2f} s, ddx one output {r[1]:.2f} s, "
      f"ddx two outputs {r[2]:.2f} s ({r[2] / r[1]:.2f}x one; target <= 1.35x)")
PY
  rm -f "$dir.json"
  cmp -s "$img" "$dir/.lab/dst.img" -n "$(stat -c %s "$img")" || { echo "dst differs"; exit 1; }
  cmp -s "$img" "$dir/.lab/src.img" -n "$(stat -c %s "$img")" || { echo "src (the --tee output) differs"; exit 1; }
done
echo "($("$ddx" --version | head -n1); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg))"
