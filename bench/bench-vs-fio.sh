#!/usr/bin/env bash
# ddx bench beside fio on the same file, row by row of the summary that
# leads ddx's report (CrystalDiskMark's rows), each with fio's options for
# the same requests (every one O_DIRECT, one job, one thread):
#  1. SEQ1M Q1T1 read and write: bs=1M, one request at a time (fio psync),
#     a whole pass over the file: ddx's seq-read/seq-write direct;
#  2. SEQ1M Q8T1 read and write: the same with 8 in flight (fio io_uring,
#     iodepth=8): ddx's seq-read/seq-write direct at queue depth 8;
#  3. RND4K Q32T1 and RND4K Q1T1, read and write: 4 KiB at random aligned
#     offsets drawn afresh (fio norandommap), 32 in flight through
#     io_uring, or one at a time (psync), for TIME seconds after a quarter
#     of that as warm-up (fio ramp_time): ddx's qd-sweep at depths 32, 1;
#  4. O_DSYNC 4 KiB write latency (O_DIRECT, sequential, 1000 writes):
#     ddx p50 vs fio clat p50;
#  5. block-size recommendation: ddx's bs-sweep three times in a row on the
#     same file must give the same answer (bench/bs-stability.sh, which
#     also prints how firmly each run decided);
#  6. the same sequential read and write (bs=1M, one request in flight) of
#     an NBD export: ddx bench nbd+unix:///?socket=S beside fio's nbd
#     engine (--ioengine=nbd --uri=...), on an nbdkit file export of a file
#     on a tmpfs that this script starts on a Unix socket and stops
#     (within 10%). Skipped, saying so, where nbdkit or fio's nbd engine is
#     missing; NBD=0 skips it.
# The fio options of rows 1-3 are checked against the ones ddx's JSON
# summary names for each cell: a difference fails the run before anything
# is compared.
# Bars: sequential bandwidth within 10% of fio, random IOPS within 15%,
# p50 within 15%. Both sides get a warm-up that is not counted. Each
# round measures every figure with fio and with ddx back to back, in
# alternating order (one measured pass each, `--runs=1`, so both see the
# same moment of a shared machine); the verdict is the median over ROUNDS
# (default 5) of the per-round ddx/fio ratios, which cancels drift that
# medians taken side by side would not.
#
# usage: bench/bench-vs-fio.sh [SIZE_MiB] (default 512). TIME=SECONDS the
# length of a random run (default 2). DIR=... picks the directory
# (default: a temp dir under /var/tmp: O_DIRECT needs a real filesystem,
# not tmpfs). Only a file in that temp dir is ever written, and (part 6)
# the export's file in a temp dir under SHM (default /dev/shm, a tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-512}
rounds=${ROUNDS:-5}
time_s=${TIME:-2}
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
size=$((size_mib << 20))
head -c "$size" /dev/urandom > "$file"
sync "$file"
fs=$(df -T "$dir" | awk 'NR==2 {print $2 " on " $1}')
echo "same file: $size_mib MiB in $dir ($fs); $(nproc) CPUs; $(fio --version); ddx $("$ddx" --version | head -n1 | cut -d' ' -f2)"
time_ms=$(python3 -c "print(round($time_s * 1000))")
ramp_ms=$(python3 -c "print(max(1, round($time_s * 250)))")

# The fio options of each summary cell, as ddx names them (and checks).
declare -A fio_cell=(
  [seq8-read]="--rw=read --bs=1048576 --iodepth=8 --numjobs=1 --direct=1 --ioengine=io_uring --size=$size"
  [seq8-write]="--rw=write --bs=1048576 --iodepth=8 --numjobs=1 --direct=1 --ioengine=io_uring --size=$size"
  [seq1-read]="--rw=read --bs=1048576 --iodepth=1 --numjobs=1 --direct=1 --ioengine=psync --size=$size"
  [seq1-write]="--rw=write --bs=1048576 --iodepth=1 --numjobs=1 --direct=1 --ioengine=psync --size=$size"
  [rnd32-read]="--rw=randread --bs=4096 --iodepth=32 --numjobs=1 --direct=1 --ioengine=io_uring --size=$size --norandommap --randrepeat=0 --time_based --runtime=${time_ms}ms"
  [rnd32-write]="--rw=randwrite --bs=4096 --iodepth=32 --numjobs=1 --direct=1 --ioengine=io_uring --size=$size --norandommap --randrepeat=0 --time_based --runtime=${time_ms}ms"
  [rnd1-read]="--rw=randread --bs=4096 --iodepth=1 --numjobs=1 --direct=1 --ioengine=psync --size=$size --norandommap --randrepeat=0 --time_based --runtime=${time_ms}ms"
  [rnd1-write]="--rw=randwrite --bs=4096 --iodepth=1 --numjobs=1 --direct=1 --ioengine=psync --size=$size --norandommap --randrepeat=0 --time_based --runtime=${time_ms}ms"
)
for cell in "${!fio_cell[@]}"; do echo "${fio_cell[$cell]}" > "$dir/fio-options-$cell"; done

fio_cell_run() { # cell -> JSON on stdout
  local cell=$1
  # shellcheck disable=SC2086 # the options are words
  set -- ${fio_cell[$cell]}
  case $cell in
    seq*)
      # The same warm-up ddx gives itself (a quarter of the pass, thrown
      # away), so neither side pays for waking the device alone.
      fio --name=warmup --filename="$file" "$@" --size="$((size_mib / 4))M" >/dev/null
      fio --name=vs --filename="$file" "$@" --output-format=json ;;
    *)
      fio --name=vs --filename="$file" "$@" --ramp_time="${ramp_ms}ms" --output-format=json ;;
  esac
}

fio_lat() { # -> JSON on stdout
  fio --name=warmup --filename="$file" --rw=write --direct=1 --ioengine=psync --iodepth=1 \
    --bs=4k --sync=dsync --size="$((size_mib / 4))M" --number_ios=100 >/dev/null
  fio --name=vs --filename="$file" --rw=write --direct=1 --ioengine=psync --iodepth=1 \
    --bs=4k --sync=dsync --number_ios=1000 --size="${size_mib}M" --output-format=json
}

ddx_run() { # tests extra... -> JSON on stdout
  local tests=$1; shift
  "$ddx" bench "$file" --destructive --size="${size_mib}M" --runs=1 --tests="$tests" \
    --time-per-run="$time_s" --json "$@"
}

# Who goes first alternates between rounds: whatever the first leaves
# behind (the host's cache of a virtual disk, the device's own) must not
# favour one side every time.
side_by_side() { # round kind ddx-tests -- fio-cells...
  local i=$1 kind=$2 tests=$3; shift 4
  local run_fio=() cell
  for cell in "$@"; do run_fio+=("$cell"); done
  fio_side() { for cell in "${run_fio[@]}"; do fio_cell_run "$cell" > "$dir/fio-$cell-$i.json"; done; }
  if [ $((i % 2)) -eq 1 ]; then
    fio_side
    ddx_run "$tests" > "$dir/ddx-$kind-$i.json"
  else
    ddx_run "$tests" > "$dir/ddx-$kind-$i.json"
    fio_side
  fi
}
for i in $(seq "$rounds"); do
  side_by_side "$i" read seq-read -- seq1-read seq8-read
  side_by_side "$i" write seq-write -- seq1-write seq8-write
  side_by_side "$i" rnd qd-sweep -- rnd32-read rnd1-read rnd32-write rnd1-write
  if [ $((i % 2)) -eq 1 ]; then
    fio_lat > "$dir/fio-lat-$i.json"
    ddx_run latency --latency-bs=4K --latency-count=1000 > "$dir/ddx-lat-$i.json"
  else
    ddx_run latency --latency-bs=4K --latency-count=1000 > "$dir/ddx-lat-$i.json"
    fio_lat > "$dir/fio-lat-$i.json"
  fi
done

# Part 6: an NBD export. Each side reads or writes the export's first
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
  head -c "$size" /dev/urandom > "$nbd_dir/export"
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
ok = True

# The summary's cells name fio's options: they must be the ones run here.
cells = {"SEQ1M Q8T1": "seq8", "SEQ1M Q1T1": "seq1", "RND4K Q32T1": "rnd32", "RND4K Q1T1": "rnd1"}
for kind in ("read", "write", "rnd"):
    summary = load(f"ddx-{kind}-1.json")["summary"]["rows"]
    for row in summary:
        for op in ("read", "write"):
            cell = row[op]
            if cell["throughput_bytes_per_sec"] is None:
                continue
            mine = open(f"{d}/fio-options-{cells[row['name']]}-{op}").read().split()
            if sorted(cell["fio"].split()) != sorted(mine):
                ok = False
                print(f"  MISMATCH {row['name']} {op}: ddx names {cell['fio']!r}, this script runs {' '.join(mine)!r}")

def fio(name, side, field):
    values = []
    for i in range(1, rounds + 1):
        job = load(f"fio-{name}-{i}.json")["jobs"][0][side]
        values.append({"bw": job["bw_bytes"], "iops": job["iops"],
                       "p50": job["clat_ns"]["percentile"]["50.000000"]}[field])
    return values

def ddx(kind, test, mode, op, field, qd=1):
    values = []
    for i in range(1, rounds + 1):
        r = next(r for r in load(f"ddx-{kind}-{i}.json")["results"]
                 if r["test"] == test and r["mode"] == mode and r["op"] == op and r["queue_depth"] == qd)
        values.append({"bw": r["throughput_bytes_per_sec"], "iops": r["iops"],
                       "p50": (r["latency_ns"] or {}).get("p50")}[field])
    return values

def compare(label, f, x, bar, unit, scale):
    global ok
    ratios = [b / a for a, b in zip(f, x)]
    ratio = med(ratios)
    passed = abs(ratio - 1) <= bar
    ok &= passed
    fmt = lambda v: f"{v/scale:.1f}"
    print(f"  {label:30s} fio {fmt(med(f)):>8s} {unit}  ddx {fmt(med(x)):>8s} {unit}  "
          f"ddx/fio {ratio:.3f} (bar ±{bar:.0%}: {'ok' if passed else 'MISSED'})")
    print(f"  {'':30s} per round: fio {' '.join(fmt(v) for v in f)}; ddx {' '.join(fmt(v) for v in x)}; "
          f"ratio {' '.join(f'{r:.2f}' for r in ratios)}")

for op in ("read", "write"):
    test = f"seq-{op}"
    compare(f"SEQ1M Q8T1 {op}", fio(f"seq8-{op}", op, "bw"), ddx(op, test, "direct", op, "bw", 8), 0.10, "MB/s", 1e6)
    compare(f"SEQ1M Q1T1 {op}", fio(f"seq1-{op}", op, "bw"), ddx(op, test, "direct", op, "bw", 1), 0.10, "MB/s", 1e6)
for op in ("read", "write"):
    compare(f"RND4K Q32T1 {op}", fio(f"rnd32-{op}", op, "iops"), ddx("rnd", "qd-sweep", "direct", op, "iops", 32), 0.15, "kIOPS", 1e3)
    compare(f"RND4K Q1T1 {op}", fio(f"rnd1-{op}", op, "iops"), ddx("rnd", "qd-sweep", "direct", op, "iops", 1), 0.15, "kIOPS", 1e3)
compare("O_DSYNC 4k write p50", fio("lat", "write", "p50"), ddx("lat", "latency", "direct+dsync", "write", "p50"), 0.15, "us  ", 1e3)
if sys.argv[3] == "1":
    compare("NBD seq read 1M QD1", fio("nbdread", "read", "bw"), ddx("nbdread", "seq-read", "nbd", "read", "bw"), 0.10, "MB/s", 1e6)
    compare("NBD seq write 1M QD1", fio("nbdwrite", "write", "bw"), ddx("nbdwrite", "seq-write", "nbd", "write", "bw"), 0.10, "MB/s", 1e6)
sys.exit(0 if ok else 1)
PY
# The recommendation with ddx's defaults, on the same file.
stable=0
FILE=$file DDX=$ddx "$(dirname "$0")/bs-stability.sh" | sed 's/^/  /' || stable=$?
[ "$measured" -eq 0 ] && [ "$stable" -eq 0 ]
