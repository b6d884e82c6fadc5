#!/usr/bin/env bash
# The page-cache policy's benchmark: the adaptive cache policy against GNU dd and cp.
#  1. A 1 GiB sparse image, 10% data in ten extents, each run after a
#     `sync` and onto a new output: ddx (default, --keep-cache,
#     --drop-cache) and dd at bs=1M conv=sparse, at GNU's default bs with
#     conv=sparse, and at bs=1M without it; cp --sparse=always. Ratios to
#     dd (and to cp where sparse); same bytes, the output sparse.
#  2. `time ddx` against its statistics line: what the process ran past
#     the statistics' seconds (the target: under 50 ms), per ddx row of 1,
#     plus conv=fsync.
#  3. A 1.5 GiB memory cgroup (v2, else v1), made here: a 512 MiB file read once,
#     then a 3 GiB copy from a cold source, by ddx (default) and dd; how
#     much of the 512 MiB stays cached (fincore), and ddx's time to dd's.
#  4. One CPU and a loaded machine: a cached 1 GiB copy (and the sparse
#     image at bs=1M conv=sparse) by ddx and dd under `taskset -c 0` and
#     beside `stress-ng --cpu 1`; ratios to dd.
#
# Run it on a quiet machine: a compile beside it takes the second CPU.
# Pages are dropped per file (dd iflag=nocache count=0), never the whole
# machine's cache.
#
# usage (root, for the cgroup): bench/cache.sh; DIR= picks the directory
# (default /var/tmp; a local disk filesystem), RUNS= hyperfine's runs
# (default 5), SPARSE_MIB=, COPY_MIB=, CGROUP_MIB=, HOT_MIB=, BIG_MIB=
# scale the cases down for a trial.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine fincore taskset stress-ng python3 bc; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install $tool)"; exit 1; }
done
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
runs=${RUNS:-5}
sparse_mib=${SPARSE_MIB:-1024}
copy_mib=${COPY_MIB:-1024}
cgroup_mib=${CGROUP_MIB:-1536}
hot_mib=${HOT_MIB:-512}
big_mib=${BIG_MIB:-3072}

dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-cache.XXXXXX")
cgroup=""
stress=""
cleanup() {
  [ -n "$stress" ] && kill "$stress" 2>/dev/null && wait "$stress" 2>/dev/null
  [ -n "$cgroup" ] && rmdir "$cgroup" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
uncache() { dd if="$1" iflag=nocache count=0 status=none; }
echo "$(nproc) CPUs, $(uname -r), $(findmnt -no FSTYPE -T "$dir") in $dir"

# hyperfine over NAME|COMMAND pairs, each run after a sync onto a new
# output ($dir/out); prints the medians and their ratio to the row named
# by $base (and to $also, if set).
compare() {
  local title=$1
  shift
  local args=()
  for pair in "$@"; do args+=(-n "${pair%%|*}" "${pair#*|}"); done
  hyperfine --warmup 1 --runs "$runs" --prepare "rm -f $dir/out; sync" \
    --export-json "$dir/r.json" "${args[@]}" >/dev/null
  echo "$title"
  python3 - "$dir/r.json" "$base" "${also:-}" <<'PY'
import json, sys
results = {r["command"]: r["median"] for r in json.load(open(sys.argv[1]))["results"]}
base, also = sys.argv[2], sys.argv[3]
for name, median in results.items():
    ratios = f"{median / results[base]:.2f}x {base}"
    if also:
        ratios += f", {median / results[also]:.2f}x {also}"
    print(f"  {name:28s} median {median:7.3f} s  ({ratios})")
PY
}

# What `time` counts past the statistics' seconds: the least of three runs
# (load only adds), in ms.
tail_ms() {
  python3 - "$@" <<'PY'
import re, subprocess, sys, time
least = None
for _ in range(3):
    start = time.monotonic()
    done = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE, text=True, check=True)
    wall = time.monotonic() - start
    seconds = float(re.search(r"copied, ([0-9.e+-]+) s", done.stderr).group(1))
    gap = (wall - seconds) * 1000
    least = gap if least is None else min(least, gap)
print(f"{least:.0f} ms")
PY
}

### 1. The sparse image.
img=$dir/image
truncate -s "${sparse_mib}M" "$img"
extent=$((sparse_mib / 100))
for i in $(seq 0 9); do
  dd if=/dev/urandom of="$img" bs=1M count="$extent" seek=$((i * sparse_mib / 10)) conv=notrunc status=none
done
sync
echo
echo "sparse image: $sparse_mib MiB, $(du -m "$img" | cut -f1) MiB allocated"
for operands in "bs=1M conv=sparse" "conv=sparse" "bs=1M"; do
  base=dd
  also=""
  rows=("dd|dd if=$img of=$dir/out $operands status=none")
  for option in "" --keep-cache --drop-cache; do
    rows+=("ddx${option:+ $option}|$ddx $option if=$img of=$dir/out $operands status=none")
  done
  if [ "$operands" != bs=1M ]; then
    rows+=("cp --sparse=always|cp --sparse=always $img $dir/out")
    also="cp --sparse=always"
  fi
  compare "$operands:" "${rows[@]}"
done
rm -f "$dir/out" "$dir/ref"
dd if="$img" of="$dir/ref" bs=1M conv=sparse status=none
"$ddx" if="$img" of="$dir/out" bs=1M conv=sparse status=none
cmp "$dir/ref" "$dir/out"
echo "  same bytes; allocated: dd $(stat -c %b "$dir/ref") blocks, ddx $(stat -c %b "$dir/out") of $((sparse_mib * 2048))"

### 2. time against the statistics.
echo
echo "time ddx minus its statistics' seconds (target: < 50 ms):"
for args in "bs=1M conv=sparse" "--keep-cache bs=1M conv=sparse" "--drop-cache bs=1M conv=sparse" \
  "conv=sparse" "bs=1M" "bs=1M conv=fsync" "--drop-cache bs=1M conv=fsync"; do
  rm -f "$dir/out"
  sync
  # shellcheck disable=SC2086 # the options and operands are words
  printf '  %-34s %s\n' "$args" "$(tail_ms "$ddx" $args if="$img" of="$dir/out")"
done

### 3. A memory cgroup.
echo
# A memory cgroup: v2 where its root hands out the memory controller, else
# v1's memory hierarchy.
limit_file=""
if [ "$(id -u)" -eq 0 ]; then
  v2=$(findmnt -nt cgroup2 -o TARGET | head -n1)
  v1=$(findmnt -nt cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)memory(,|$)/ {print $1; exit}')
  if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null &&
    { grep -qw memory "$v2/cgroup.subtree_control" || echo +memory >"$v2/cgroup.subtree_control"; }; then
    cgroup=$v2/ddx-bench-$$
    limit_file=memory.max
  elif [ -n "$v1" ]; then
    cgroup=$v1/ddx-bench-$$
    limit_file=memory.limit_in_bytes
  fi
fi
if [ -n "$limit_file" ]; then
  mkdir "$cgroup"
  echo $((cgroup_mib << 20)) >"$cgroup/$limit_file"
  hot=$dir/hot
  big=$dir/big
  head -c $((hot_mib << 20)) /dev/urandom >"$hot"
  head -c $((big_mib << 20)) /dev/urandom >"$big"
  sync
  in_cgroup() { bash -c 'echo $$ >"$0/cgroup.procs"; exec "$@"' "$cgroup" "$@"; }
  echo "memory cgroup of $cgroup_mib MiB: $hot_mib MiB read once, then a $big_mib MiB copy (cold source)"
  declare -A seconds
  for tool in dd ddx; do
    rm -f "$dir/out"
    uncache "$hot"
    uncache "$big"
    sync
    in_cgroup cat "$hot" >/dev/null
    program=dd
    [ "$tool" = ddx ] && program=$ddx
    start=$(date +%s.%N)
    in_cgroup "$program" if="$big" of="$dir/out" bs=1M status=none
    copied=$(date +%s.%N)
    sync
    synced=$(date +%s.%N)
    seconds[$tool]=$(echo "$copied - $start" | bc)
    seconds[$tool.sync]=$(echo "$synced - $start" | bc)
    cached=$(fincore -nb -o RES "$hot" | tr -d ' ')
    printf '  %-4s %6.2f s (%6.2f s to the sync after it)  %3d%% of the %d MiB file still cached\n' \
      "$tool" "${seconds[$tool]}" "${seconds[$tool.sync]}" $((cached * 100 / (hot_mib << 20))) "$hot_mib"
  done
  printf '  ddx takes %.2fx dd'"'"'s time, %.2fx to the sync (target: <= 1.15x; cached target: >= 90%%)\n' \
    "$(echo "${seconds[ddx]} / ${seconds[dd]}" | bc -l)" "$(echo "${seconds[ddx.sync]} / ${seconds[dd.sync]}" | bc -l)"
  rm -f "$hot" "$big" "$dir/out"
else
  echo "memory cgroup: skipped (needs root and a cgroup hierarchy with the memory controller)"
fi

### 4. One CPU, and a CPU taken by another task.
src=$dir/src
head -c $((copy_mib << 20)) /dev/urandom >"$src"
cat "$src" "$img" >/dev/null
echo
base=dd
also=""
for how in "taskset -c 0" "stress-ng --cpu 1"; do
  prefix=""
  if [ "$how" = "taskset -c 0" ]; then
    prefix="taskset -c 0 "
  else
    stress-ng --cpu 1 --quiet --timeout 0 &
    stress=$!
    sleep 12 # PSI's avg10 takes the load in
  fi
  compare "$how: a cached $copy_mib MiB copy (bs=1M):" \
    "dd|${prefix}dd if=$src of=$dir/out bs=1M status=none" \
    "ddx|${prefix}$ddx if=$src of=$dir/out bs=1M status=none"
  compare "$how: the sparse image, bs=1M conv=sparse:" \
    "dd|${prefix}dd if=$img of=$dir/out bs=1M conv=sparse status=none" \
    "ddx|${prefix}$ddx if=$img of=$dir/out bs=1M conv=sparse status=none"
  # shellcheck disable=SC2086 # the prefix is words
  echo "  ddx chose: $($prefix $ddx --verbose if="$src" of="$dir/out" bs=1M 2>&1 | sed -n 's/^[^ ]*: backend: //p')"
  if [ -n "$stress" ]; then
    kill "$stress"
    wait "$stress" 2>/dev/null || true
    stress=""
  fi
done
echo "(the target on one CPU: ddx <= 1.05x dd; the slow-device lab's rows under taskset: bench/lab)"
