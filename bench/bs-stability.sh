#!/usr/bin/env bash
# Is the block-size recommendation stable? `ddx bench --tests=bs-sweep`
# (default options) three times in a row on the same file; prints the
# three recommendations, whether they agree, and the per-size figures of
# the first run (the table's median throughput, and the median-request
# figure the rule reads, relative to the rule's best).
#
# usage: bench/bs-stability.sh [SIZE_MiB] (default 256, the bench's default
# working set). DIR=... picks the directory (default: a temp dir under
# /var/tmp: O_DIRECT needs a real filesystem, not tmpfs); it is removed.
# FILE=PATH benches an existing file instead (overwritten, not removed:
# e.g. a device of bench/lab/rig.sh, which holds still). KEEP=DIR copies
# the three JSON reports to DIR first. Each run's judgement is printed
# too: the neighbouring sizes it found too close to call, and whether the
# target's speed held still between rounds.
set -euo pipefail
size_mib=${1:-256}
ddx=${DDX:-target/release/ddx}
dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-bs-stability.XXXXXX")
trap '[ -n "${KEEP:-}" ] && cp "$dir"/run-*.json "$KEEP"/ 2>/dev/null; rm -rf "$dir"' EXIT
if [ -n "${FILE:-}" ]; then
  file=$FILE
else
  file="$dir/file"
  head -c "${size_mib}M" /dev/urandom > "$file"
fi
for i in 1 2 3; do
  start=$(date +%s)
  "$ddx" bench "$file" --destructive --tests=bs-sweep --json > "$dir/run-$i.json"
  echo "run $i: $(( $(date +%s) - start )) s" >&2
done

python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
runs = [json.load(open(f"{d}/run-{i}.json")) for i in (1, 2, 3)]
recs = [r["recommendation"] for r in runs]
size = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"
reads = [size(r["read_block_size"]) for r in recs]
writes = [size(r["write_block_size"]) for r in recs]
stable = len(set(reads)) == 1 and len(set(writes)) == 1
print(f"recommendation, 3 runs: read {reads}  write {writes}  ({'stable' if stable else 'UNSTABLE'})")
for i, rec in enumerate(recs, 1):
    for op in ("read", "write"):
        j = rec.get(op)
        if not j:
            continue
        close = ", ".join(f"{size(c['block_size'])} at {c['of_best']:.0%}" for c in j["close_calls"]) or "none"
        print(f"  run {i} {op:5s}: {size(j['block_size'])} at {j['of_best']:.0%} of the best; "
              f"too close to call: {close}; plateau {j['plateau_low'] / 1e6:.0f}..{j['plateau_high'] / 1e6:.0f} MB/s"
              f"{'' if j['steady'] else ' (UNSTEADY)'}")
print("run 1, per size: median throughput (MB/s) | median-request figure per round (MB/s)")
for op in ("read", "write"):
    for r in runs[0]["results"]:
        if r["test"] != "bs-sweep" or r["op"] != op:
            continue
        typical = [r["block_size"] * 1e3 / x["request_median_ns"] for x in r["runs"]]
        print(f"  {op:5s} {size(r['block_size']):>8s} {r['throughput_bytes_per_sec'] / 1e6:8.1f} | "
              + " ".join(f"{t:.0f}" for t in typical))
sys.exit(0 if stable else 1)
PY
