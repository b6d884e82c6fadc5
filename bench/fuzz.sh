#!/usr/bin/env bash
# Fuzz ddx's readers of untrusted input (ddx::fuzzing, targets in fuzz/)
# with libFuzzer under AddressSanitizer, with debug assertions and
# overflow checks on, each target for SECONDS, several at once, every run
# under nice. A target stops at its first finding; the input is left in
# fuzz/target/runs/TARGET/ and named in the summary. Inputs that reached
# new code are merged into fuzz/corpus/TARGET/ (only those that add
# coverage), which tests/all/corpora.rs replays in the suite.
#
# usage: bench/fuzz.sh [--jobs=N] [--no-merge] [--minimise] [TARGET...] SECONDS
#   TARGET...   the targets to run (default: all, as `cargo fuzz list`)
#   SECONDS     how long each target runs (600 is ten minutes); 0 runs
#               none (with --minimise: only minimise the corpora)
#   --jobs=N    targets running at once (default: the number of CPUs)
#   --no-merge  leave fuzz/corpus/ as it is
#   --minimise  afterwards, reduce each target's corpus to the inputs that
#               reach all its coverage (cargo fuzz cmin)
#
# Needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
# Bounds on each input: 60 s (a hang), 2048 MB of memory in all and for
# one allocation (an allocation without bound; xz: see below). Leaks are
# not looked for: the decoders' threads outlive the join that ends their
# scope by the moment the thread frees its own start, which LeakSanitizer
# reports as a leak, and Rust frees what it owns.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
merge=1
minimise=0
args=()
for arg in "$@"; do
  case $arg in
    --jobs=*) jobs=${arg#--jobs=} ;;
    --no-merge) merge=0 ;;
    --minimise) minimise=1 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) args+=("$arg") ;;
  esac
done
if [ ${#args[@]} -eq 0 ] || ! [[ ${args[-1]} =~ ^[0-9]+$ ]]; then
  echo "usage: bench/fuzz.sh [--jobs=N] [--no-merge] [--minimise] [TARGET...] SECONDS" >&2
  exit 2
fi
seconds=${args[-1]}
unset 'args[-1]'
cargo +nightly fuzz --version >/dev/null 2>&1 || {
  echo "cargo-fuzz and the nightly toolchain are needed (cargo install cargo-fuzz)" >&2
  exit 1
}
all=$(cd fuzz && cargo +nightly fuzz list)
targets=("${args[@]}")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets <<<"$all"
for target in "${targets[@]}"; do
  grep -qx "$target" <<<"$all" || { echo "no target $target (cargo fuzz list)" >&2; exit 2; }
done

# One build of every target: -a keeps debug assertions and overflow
# checks, which a release build of ddx drops.
(cd fuzz && nice -n 19 cargo +nightly fuzz build -a -O)
bin=fuzz/target/x86_64-unknown-linux-gnu/release
runs=fuzz/target/runs

run_one() {
  local target=$1 dir=$runs/$1
  rm -rf "$dir"
  mkdir -p "$dir/new"
  local started=$SECONDS
  local corpora=("fuzz/corpus/$target")
  [ -d "fuzz/regressions/$target" ] && corpora+=("fuzz/regressions/$target")
  local before
  before=$(find "fuzz/corpus/$target" -type f | wc -l)
  # An xz header may ask for a 4 GiB dictionary, which liblzma allocates
  # (as `xz -d` does, with no memory limit) and fills only as far as the
  # data goes: one allocation that large is allowed there, the memory
  # actually used is held to the same bound as everywhere.
  local malloc_limit=2048
  [ "$target" = xz ] && malloc_limit=4400
  set +e
  nice -n 19 "$bin/$target" "$dir/new" "${corpora[@]}" \
    -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb="$malloc_limit" \
    -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$dir/" >"$dir/log" 2>&1
  echo $? >"$dir/status"
  echo $((SECONDS - started)) >"$dir/elapsed"
  set -e
  if [ "$merge" = 1 ]; then
    nice -n 19 "$bin/$target" -merge=1 "fuzz/corpus/$target" "$dir/new" >>"$dir/merge.log" 2>&1 || true
  fi
  echo "$before" >"$dir/before"
}

if [ "$seconds" -gt 0 ]; then
  running=0
  for target in "${targets[@]}"; do
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait -n
      running=$((running - 1))
    fi
  done
  wait
fi

if [ "$minimise" = 1 ]; then
  for target in "${targets[@]}"; do
    mkdir -p "$runs/$target"
    (cd fuzz && nice -n 19 cargo +nightly fuzz cmin -a -O "$target" >"../$runs/$target/cmin.log" 2>&1)
  done
fi
[ "$seconds" -gt 0 ] || exit 0

# One line per target: what ran, how often, what it left.
printf '%-14s %8s %12s %8s %11s %8s  %s\n' target seconds executions exec/s corpus "peak MB" finding
for target in "${targets[@]}"; do
  dir=$runs/$target
  stat() { sed -n "s/^stat::$1: *//p" "$dir/log" | tail -n1; }
  finding=none
  if [ "$(cat "$dir/status")" != 0 ]; then
    artifact=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' -o -name 'slow-unit-*' \) | head -n1)
    finding="exit $(cat "$dir/status") ${artifact:-(see $dir/log)}"
  fi
  corpus="$(cat "$dir/before")->$(find "fuzz/corpus/$target" -type f | wc -l)"
  printf '%-14s %8s %12s %8s %11s %8s  %s\n' "$target" "$(cat "$dir/elapsed")" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "$corpus" "$(stat peak_rss_mb)" "$finding"
done
echo "corpora in all: $(find fuzz/corpus -type f | wc -l) files, $(find fuzz/corpus -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes"
