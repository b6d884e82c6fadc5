#!/usr/bin/env bash
# What watching a copy costs: bs=4k over 4 GiB of /dev/zero -> /dev/null
# (1,048,576 records, system-call bound, so any per-record cost shows).
# ddx status=progress against status=none (GNU's line: stderr is not a
# terminal here), ddx --progress-fd (JSON), ddx's live line in a real
# pseudo-terminal (util-linux `script`), GNU dd's own progress, and
# dd | pv | dd on the same work; medians, as ratios.
#
# The machine is shared and its load moves: the commands run in ROUNDS
# rounds, each round running every command once in a fresh random order,
# so that no command gets the quiet minutes. Each run records its wall
# time and its CPU time (user + system of all its processes), which
# other processes' load disturbs much less: the cost of progress is CPU.
#
# usage: bench/progress-cost.sh [BYTES]   (default 4G; ROUNDS=15)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-4G}
ddx=${DDX:-target/release/ddx}
[ -x "$ddx" ] || cargo build --release -q
command -v pv >/dev/null || { echo "pv is needed (apt-get install pv)"; exit 1; }

work="if=/dev/zero of=/dev/null bs=4k count=$size iflag=count_bytes"
echo "$("$ddx" --version | head -n1) vs $(dd --version | head -n1); $(nproc) CPUs; $size at bs=4k; load $(cut -d' ' -f1-3 /proc/loadavg)"
cmds=(
  "ddx none" "$ddx $work status=none"
  "ddx progress" "$ddx $work status=progress"
  "ddx --progress-fd" "$ddx $work status=none --progress-fd=3 3>/dev/null"
  "dd none" "dd $work status=none"
  "dd progress" "dd $work status=progress"
  "dd | pv | dd" "dd if=/dev/zero bs=4k count=$size iflag=count_bytes status=none | pv -f | dd of=/dev/null bs=4k status=none"
)
if command -v script >/dev/null; then
  # A pseudo-terminal on stderr: ddx draws its live line.
  cmds+=(
    "ddx none, tty" "script -qfec '$ddx $work status=none' /dev/null"
    "ddx live, tty" "script -qfec '$ddx $work status=progress' /dev/null"
  )
fi
python3 - "${ROUNDS:-15}" "${cmds[@]}" <<'PY'
import os, random, resource, statistics, subprocess, sys, time
rounds = int(sys.argv[1])
pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
wall = {n: [] for n, _ in pairs}
cpu = {n: [] for n, _ in pairs}

def run(command):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["bash", "-c", command], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, used

for _, command in pairs:  # warm-up
    run(command)
for _ in range(rounds):
    order = pairs[:]
    random.shuffle(order)
    for name, command in order:
        w, c = run(command)
        wall[name].append(w)
        cpu[name].append(c)

med_wall = {n: statistics.median(t) for n, t in wall.items()}
med_cpu = {n: statistics.median(t) for n, t in cpu.items()}
print(f"{'':20s} {'wall median':>12s} {'(min-max)':>16s} {'CPU median':>11s}")
for n, _ in pairs:
    print(f"  {n:18s} {med_wall[n]:10.3f} s  ({min(wall[n]):.2f}-{max(wall[n]):.2f}) {med_cpu[n]:9.3f} s")
print(f"ratios of medians ({rounds} rounds):{'wall':>20s} {'CPU':>7s}")
def ratio(a, b, label):
    if a in med_wall and b in med_wall:
        print(f"  {label:40s} {med_wall[a] / med_wall[b]:6.3f} {med_cpu[a] / med_cpu[b]:7.3f}")
ratio("ddx progress", "ddx none", "ddx status=progress / status=none")
ratio("ddx --progress-fd", "ddx none", "ddx --progress-fd / status=none")
ratio("ddx live, tty", "ddx none, tty", "ddx live line / status=none (tty)")
ratio("dd progress", "dd none", "GNU dd status=progress / status=none")
ratio("dd none", "ddx none", "GNU dd / ddx, status=none")
ratio("dd | pv | dd", "ddx progress", "dd | pv | dd / ddx status=progress")
PY
