#!/usr/bin/env bash
# ddx bench beside fio on the same file:
#  1. sequential read,  bs=1M, O_DIRECT, queue depth 1: ddx vs fio bandwidth
#  2. sequential write, bs=1M, O_DIRECT, queue depth 1: ddx vs fio bandwidth
#  3. O_DSYNC 4 KiB write latency (O_DIRECT, sequential, 1000 writes):
#     ddx p50 vs fio clat p50
#  4. block-size recommendation: ddx's bs-sweep three times in a row on the
#     same file must give the same answer (bench/bs-stability.sh, which
#     also prints how firmly each run decided).
#  5. the same sequential read and write (bs=1M, one request in flight) of
#     an NBD export: ddx bench nbd+unix:///?socket=S beside fio's nbd
#     engine (--ioengine=nbd --uri=...), on an nbdkit file export of a file
#     on a tmpfs that this script starts on a Unix socket and stops
#     (target: within 10%). Skipped, saying so, where nbdkit or
#     fio's nbd engine is missing; NBD=0 skips it.
# Targets: bandwidth within 10% of fio, p50 within 15%. Both sides get one
# warm-up pass that is not counted (ddx's own). Each round measures
# every figure with fio and with ddx back to back, in alternating order
# (one measured pass each, `--runs=1`, so both see the same moment of a
# shared machine); the verdict
# is the median over ROUNDS (default 5) of the per-round ddx/fio ratios,
# which cancels drift that medians taken side by side would not.
#
# usage: bench/bench-vs-fio.sh [SIZE_MiB] (default 512). DIR=... picks the
# directory (default: a temp dir under /var/tmp: O_DIRECT needs a real
# filesystem, not tmpfs). Only a file in that temp dir is ever written,
# and (part 5) the export's file in a temp dir under SHM (default
# /dev/shm, a tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-512}
rounds=${ROUNDS:-5}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
command -v fio >/dev/null || { echo "fio is needed (apt-get install fio)"; exit 1; }
dir=$(mktemp -d "${DIR:-/var/tmp}/ddx-vs-fio.XXXXXX")
nbd_dir= nbd_pid=
cleanup() {
  if [ -n "$nbd_pid" ]; then kill "$nbd_pid" 2>/dev/null || true; wait "$nbd_pid" 2>/dev/null || true; fi
  rm -rf "$dir" ${nbd_dir:+"$nbd_dir"}
}
trap cleanup EXIT
file=$dir/data
head -c "$((size_mib << 20))" /dev/urandom > "$file"
sync "$file"
fs=$(df -T "$dir" | awk 'NR==2 {print $2 " on " $1}')
echo "same file: $size_mib MiB in $dir ($fs); $(nproc) CPUs; $(fio --version); ddx $("$ddx" --version | head -n1 | cut -d' ' -f2)"

fio_run() { # rw extra... -> JSON on stdout
  local rw=$1; shift
  # The same warm-up ddx gives itself (a quarter of the work, thrown
  # away), so neither side pays for waking the device alone.
  fio --name=warmup --filename="$file" --rw="$rw" --direct=1 --ioengine=psync \
    --iodepth=1 --size="$((size_mib / 4))M" "$@" --number_ios=100 >/dev/null
  fio --name=vs --filename="$file" --rw="$rw" --direct=1 --ioengine=psync \
    --iodepth=1 --size="${size_mib}M" --output-format=json "$@"
}

ddx_run() { # tests extra... -> JSON on stdout
  local tests=$1; shift
  "$ddx" bench "$file" --destructive --size="${size_mib}M" --runs=1 --tests="$tests" --json "$@"
}

# Who goes first alternates between rounds: whatever the first leaves
# behind (the host's cache of a virtual disk, the device's own) must not
# favour one side every time.
pair() { # round fio-args -- ddx-args
  local i=$1 kind=$2; shift 2
  local fio_args=() ddx_args=()
  while [ "$1" != -- ]; do fio_args+=("$1"); shift; done
  shift
  ddx_args=("$@")
  if [ $((i % 2)) -eq 1 ]; then
    fio_run "${fio_args[@]}" > "$dir/fio-$kind-$i.json"
    ddx_run "${ddx_args[@]}" > "$dir/ddx-$kind-$i.json"
  else
    ddx_run "${ddx_args[@]}" > "$dir/ddx-$kind-$i.json"
    fio_run "${fio_args[@]}" > "$dir/fio-$kind-$i.json"
  fi
}
for i in $(seq "$rounds"); do
  pair "$i" read read --bs=1M -- seq-read
  pair "$i" write write --bs=1M -- seq-write
  pair "$i" lat write --bs=4k --sync=dsync --number_ios=1000 -- latency --latency-bs=4K --latency-count=1000
done

# Part 5: an NBD export. Each side reads or writes the export's first
# SIZE_MiB in 1 MiB requests, one in flight, over one connection (ddx
# bench's seq tests on an export; fio's nbd engine at iodepth 1).
nbd=0
if [ "${NBD:-1}" = 0 ]; then
  echo "NBD part skipped (NBD=0)"
elif ! command -v nbdkit >/dev/null; then
  echo "NBD part skipped: nbdkit is missing (apt-get install nbdkit)"
elif ! fio --enghelp 2>/dev/null | grep -qw nbd; then
  echo "NBD part skipped: this fio has no nbd engine"
else
  nbd=1
  nbd_dir=$(mktemp -d "${SHM:-/dev/shm}/ddx-vs-fio-nbd.XXXXXX")
  head -c "$((size_mib << 20))" /dev/urandom > "$nbd_dir/export"
  sock=$nbd_dir/nbd.sock
  nbdkit --foreground --exit-with-parent --unix "$sock" file "$nbd_dir/export" &
  nbd_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  uri="nbd+unix:///?socket=$sock"
  echo "NBD export: nbdkit file plugin over $size_mib MiB on $(df -T "$nbd_dir" | awk 'NR==2 {print $2}') at $uri"
  fio_nbd() { # rw -> JSON on stdout
    fio --name=warmup --ioengine=nbd --uri="$uri" --rw="$1" --bs=1M --iodepth=1 \
      --size="$((size_mib / 4))M" >/dev/null
    # The nbd engine prints "connected to NBD server" on stdout: the JSON
    # goes to a file of its own.
    fio --name=vs --ioengine=nbd --uri="$uri" --rw="$1" --bs=1M --iodepth=1 \
      --size="${size_mib}M" --output-format=json --output="$dir/fio.json" >/dev/null
    cat "$dir/fio.json"
  }
  ddx_nbd() { # tests -> JSON on stdout
    "$ddx" bench "$uri" --destructive --size="${size_mib}M" --runs=1 --tests="$1" --json
  }
  for i in $(seq "$rounds"); do
    for rw in read write; do
      if [ $((i % 2)) -eq 1 ]; then
        fio_nbd "$rw" > "$dir/fio-nbd$rw-$i.json"
        ddx_nbd "seq-$rw" > "$dir/ddx-nbd$rw-$i.json"
      else
        ddx_nbd "seq-$rw" > "$dir/ddx-nbd$rw-$i.json"
        fio_nbd "$rw" > "$dir/fio-nbd$rw-$i.json"
      fi
    done
  done
  kill "$nbd_pid"; wait "$nbd_pid" 2>/dev/null || true; nbd_pid=
fi

measured=0
python3 - "$dir" "$rounds" "$nbd" <<'PY' || measured=$?
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{d}/{name}"))
med = statistics.median

def fio(kind, side, field):
    values = []
    for i in range(1, rounds + 1):
        job = load(f"fio-{kind}-{i}.json")["jobs"][0][side]
        values.append(job["bw_bytes"] if field == "bw" else job["clat_ns"]["percentile"]["50.000000"])
    return values

def ddx(kind, test, mode, op, field):
    values = []
    for i in range(1, rounds + 1):
        r = next(r for r in load(f"ddx-{kind}-{i}.json")["results"]
                 if r["test"] == test and r["mode"] == mode and r["op"] == op)
        values.append(r["throughput_bytes_per_sec"] if field == "bw" else r["latency_ns"]["p50"])
    return values

ok = True
def compare(label, f, x, target, unit, scale):
    global ok
    ratios = [b / a for a, b in zip(f, x)]
    ratio = med(ratios)
    passed = abs(ratio - 1) <= target
    ok &= passed
    fmt = lambda v: f"{v/scale:.1f}"
    print(f"  {label:30s} fio {fmt(med(f)):>7s} {unit}  ddx {fmt(med(x)):>7s} {unit}  "
          f"ddx/fio {ratio:.3f} (target ±{target:.0%}: {'ok' if passed else 'MISSED'})")
    print(f"  {'':30s} per round: fio {' '.join(fmt(v) for v in f)}; ddx {' '.join(fmt(v) for v in x)}; "
          f"ratio {' '.join(f'{r:.2f}' for r in ratios)}")

compare("seq read 1M O_DIRECT QD1", fio("read", "read", "bw"), ddx("read", "seq-read", "direct", "read", "bw"), 0.10, "MB/s", 1e6)
compare("seq write 1M O_DIRECT QD1", fio("write", "write", "bw"), ddx("write", "seq-write", "direct", "write", "bw"), 0.10, "MB/s", 1e6)
compare("O_DSYNC 4k write p50", fio("lat", "write", "p50"), ddx("lat", "latency", "dsync", "write", "p50"), 0.15, "us  ", 1e3)
if sys.argv[3] == "1":
    compare("NBD seq read 1M QD1", fio("nbdread", "read", "bw"), ddx("nbdread", "seq-read", "nbd", "read", "bw"), 0.10, "MB/s", 1e6)
    compare("NBD seq write 1M QD1", fio("nbdwrite", "write", "bw"), ddx("nbdwrite", "seq-write", "nbd", "write", "bw"), 0.10, "MB/s", 1e6)
sys.exit(0 if ok else 1)
PY
# The recommendation with ddx's defaults, on the same file.
stable=0
FILE=$file DDX=$ddx "$(dirname "$0")/bs-stability.sh" | sed 's/^/  /' || stable=$?
[ "$measured" -eq 0 ] && [ "$stable" -eq 0 ]
