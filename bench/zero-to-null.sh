#!/usr/bin/env bash
# /dev/zero -> /dev/null at GNU's default bs=512 and at bs=4k: ddx against
# GNU dd (and dd | pv | dd for reference), same work, same run, as ratios.
# The copy is syscall-bound, so this measures per-record overhead.
#
# usage: bench/zero-to-null.sh [COUNT]   (default 2000000 records)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-2000000}
ddx=${DDX:-target/release/ddx}
[ -x "$ddx" ] || cargo build --release -q
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)"; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "ddx $("$ddx" --version | head -n1) vs $(dd --version | head -n1); $(nproc) CPUs; count=$count"
for bs in 512 4k; do
  cmds=(
    "dd if=/dev/zero of=/dev/null bs=$bs count=$count status=none"
    "$ddx if=/dev/zero of=/dev/null bs=$bs count=$count status=none"
  )
  if command -v pv >/dev/null; then
    cmds+=("dd if=/dev/zero bs=$bs count=$count status=none | pv -q | dd of=/dev/null bs=$bs status=none")
  fi
  hyperfine --warmup 1 --runs "${RUNS:-10}" --export-json "$out/$bs.json" "${cmds[@]}" >/dev/null 2>&1
  python3 - "$out/$bs.json" "$bs" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
print(f"bs={sys.argv[2]}:")
for r in results:
    name = r["command"].split()[0].split("/")[-1]
    if "|" in r["command"]:
        name = "dd | pv | dd"
    print(f"  {name:14s} median {r['median']:.3f} s  (min {r['min']:.3f}, max {r['max']:.3f})  time/dd = {r['median']/base:.2f}")
PY
done
