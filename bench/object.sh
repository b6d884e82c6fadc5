#!/usr/bin/env bash
# Object storage round trip: a SIZE MiB file (default 1024) uploaded to and
# downloaded from s3s-fs on loopback, by ddx, rclone copyto, the pipe users
# write today without the AWS CLI (dd into `rclone rcat`, `rclone cat` into
# dd) and boto3's transfer manager (what the AWS CLI uses; left out with a
# note where python3-boto3 is missing), every round on its own key
# (rclone skips re-uploading an unchanged file). Everything (input, the
# server's directory, downloads) lives on DIR (default /dev/shm, a tmpfs),
# so the disk is out of the measurement. Prints each tool's median time
# per direction and ddx's ratio to the best of the others (the target:
# <= 1.0), and checks every download and stored object byte for byte.
#
# usage: bench/object.sh [SIZE_MiB]; RUNS= rounds (default 3); DDX= the
# binary (default target/release/ddx); DIR= where the files go.
# Needs s3s-fs (cargo install s3s-fs@0.14.1 --features binary --locked),
# rclone and python3 with boto3 (apt-get install rclone python3-boto3).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${RUNS:-3}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
python=${PYTHON:-/usr/bin/python3}
for tool in s3s-fs rclone; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done
tools="ddx rclone pipe boto3"
if ! "$python" -c 'import boto3' 2>/dev/null; then
  echo "note: no boto3 for $python (python3-boto3): boto3 left out"
  tools="ddx rclone pipe"
fi

dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-object.XXXXXX")
server_pid=
cleanup() {
  # (set -e is still on here: every step must not fail.)
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/s3/bkt"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key_id=bench-access-key
secret=bench-secret-key
s3s-fs --host 127.0.0.1 --port "$port" --access-key "$key_id" --secret-key "$secret" "$dir/s3" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

export AWS_ACCESS_KEY_ID=$key_id AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_S3_TYPE=s3 RCLONE_CONFIG_S3_PROVIDER=Other
export RCLONE_CONFIG_S3_ACCESS_KEY_ID=$key_id RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=$secret
export RCLONE_CONFIG_S3_ENDPOINT=$AWS_ENDPOINT_URL RCLONE_CONFIG_S3_REGION=us-east-1

input=$dir/input
head -c "$((size_mib << 20))" /dev/urandom >"$input"
cat >"$dir/boto.py" <<'PY'
import os, sys, boto3, botocore.config
# Debian's boto3 predates AWS_ENDPOINT_URL: the endpoint is passed by hand.
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=botocore.config.Config(s3={"addressing_style": "path"}))
direction, a, b = sys.argv[1:4]
if direction == "up":
    s3.upload_file(a, "bkt", b)
else:
    s3.download_file("bkt", a, b)
PY

# One timed command; its wall time in seconds on stdout.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# Upload with TOOL under KEY, then download it and check both copies.
round() {
  local tool=$1 key=$2 up down
  case $tool in
    ddx)
      up=$(timed "$ddx" if="$input" of="s3://bkt/$key" bs=8M status=none)
      down=$(timed "$ddx" if="s3://bkt/$key" of="$dir/out" bs=8M status=none) ;;
    rclone)
      # rclone refuses an http endpoint when AWS_CA_BUNDLE is set (ddx
      # and boto3 ignore it there), so it runs without.
      up=$(timed env -u AWS_CA_BUNDLE rclone copyto "$input" "s3:bkt/$key")
      down=$(timed env -u AWS_CA_BUNDLE rclone copyto "s3:bkt/$key" "$dir/out") ;;
    pipe)
      up=$(timed env -u AWS_CA_BUNDLE sh -c 'dd if="$1" bs=8M status=none | rclone rcat "s3:bkt/$2"' - "$input" "$key")
      down=$(timed env -u AWS_CA_BUNDLE sh -c 'rclone cat "s3:bkt/$1" | dd of="$2" bs=8M status=none' - "$key" "$dir/out") ;;
    boto3)
      up=$(timed "$python" "$dir/boto.py" up "$input" "$key")
      down=$(timed "$python" "$dir/boto.py" down "$key" "$dir/out") ;;
  esac
  cmp -s "$input" "$dir/s3/bkt/$key" || { echo "$tool: the stored object differs" >&2; exit 1; }
  cmp -s "$input" "$dir/out" || { echo "$tool: the download differs" >&2; exit 1; }
  rm -f "$dir/out" "$dir/s3/bkt/$key"
  echo "$tool up $up" >>"$dir/times"
  echo "$tool down $down" >>"$dir/times"
}

echo "object round trip: $size_mib MiB on $(df --output=fstype "$dir" | tail -1), s3s-fs $(s3s-fs --version | cut -d' ' -f2), $(rclone version | head -1), tools: $tools; $(nproc) CPUs"
for run in $(seq "$runs"); do
  for tool in $tools; do
    round "$tool" "$tool-$run"
  done
done
"$python" - "$dir/times" $tools <<'PY'
import statistics, sys
tools = sys.argv[2:]
times = {}
for line in open(sys.argv[1]):
    tool, direction, seconds = line.split()
    times.setdefault((tool, direction), []).append(float(seconds))
for direction in ("up", "down"):
    medians = {tool: statistics.median(times[(tool, direction)]) for tool in tools}
    for tool, median in medians.items():
        samples = " ".join(f"{t:.2f}" for t in times[(tool, direction)])
        print(f"  {direction:4s} {tool:7s} median {median:6.2f} s  ({samples})")
    # The target: the best of rclone copyto and boto3.
    others = [t for t in ("rclone", "boto3") if t in medians]
    best = min(medians[t] for t in others)
    print(f"  {direction:4s} ddx / best of {', '.join(others)}: {medians['ddx'] / best:.2f}x (target: <= 1.0)")
PY
