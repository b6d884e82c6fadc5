#!/usr/bin/env bash
# What watching a copy costs: bs=4k over 4 GiB of /dev/zero -> /dev/null
# (1,048,576 records, system-call bound, so any per-record cost shows).
# ddx status=progress against status=none (GNU's line: stderr is not a
# terminal here), ddx --progress-fd (JSON), ddx's live line in a real
# pseudo-terminal (util-linux `script`), GNU dd's own progress, and
# dd | pv | dd on the same work. Same run, medians, as ratios.
#
# The machine is shared: so that a change of load biases no command, the
# commands run in ROUNDS rounds of RUNS runs each, every round going
# through all of them, and the medians are over all samples.
#
# usage: bench/progress-cost.sh [BYTES]   (default 4G; ROUNDS=5 RUNS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-4G}
ddx=${DDX:-target/release/ddx}
[ -x "$ddx" ] || cargo build --release -q
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)"; exit 1; }
command -v pv >/dev/null || { echo "pv is needed (apt-get install pv)"; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
work="if=/dev/zero of=/dev/null bs=4k count=$size iflag=count_bytes"
echo "$("$ddx" --version | head -n1) vs $(dd --version | head -n1); $(nproc) CPUs; $size at bs=4k"
cmds=(
  "$ddx $work status=none"
  "$ddx $work status=progress"
  "$ddx $work status=none --progress-fd=3 3>/dev/null"
  "dd $work status=none"
  "dd $work status=progress"
  "dd if=/dev/zero bs=4k count=$size iflag=count_bytes status=none | pv -f | dd of=/dev/null bs=4k status=none"
)
names=("ddx none" "ddx progress" "ddx --progress-fd" "dd none" "dd progress" "dd | pv | dd")
if command -v script >/dev/null; then
  # A pseudo-terminal on stderr: ddx draws its live line.
  cmds+=(
    "script -qfec '$ddx $work status=none' /dev/null"
    "script -qfec '$ddx $work status=progress' /dev/null"
  )
  names+=("ddx none, tty" "ddx live, tty")
fi
rounds=${ROUNDS:-5}
for round in $(seq "$rounds"); do
  hyperfine --warmup 1 --runs "${RUNS:-2}" --export-json "$out/r$round.json" "${cmds[@]}" >/dev/null 2>&1
done
python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times = {n: [] for n in names}
for r in range(1, rounds + 1):
    for n, result in zip(names, json.load(open(f"{out}/r{r}.json"))["results"]):
        times[n] += result["times"]
median = {n: statistics.median(t) for n, t in times.items()}
for n in names:
    t = times[n]
    print(f"  {n:18s} median {median[n]:.3f} s  (min {min(t):.3f}, max {max(t):.3f}, {len(t)} runs)")
def ratio(a, b, label):
    if a in median and b in median:
        print(f"  {label:44s} {median[a] / median[b]:.3f}")
print("ratios of medians:")
ratio("ddx progress", "ddx none", "ddx status=progress / status=none")
ratio("ddx --progress-fd", "ddx none", "ddx --progress-fd / status=none")
ratio("ddx live, tty", "ddx none, tty", "ddx live line / status=none (terminal)")
ratio("dd progress", "dd none", "GNU dd status=progress / status=none")
ratio("dd | pv | dd", "ddx none", "dd | pv | dd / ddx status=none")
ratio("dd | pv | dd", "ddx progress", "dd | pv | dd / ddx status=progress")
PY
