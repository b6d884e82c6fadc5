#!/usr/bin/env bash
# A resumable upload killed half-way and resumed, against the same upload
# made whole, to s3s-fs on loopback: a SIZE MiB file (default 2048) is
# uploaded with --map, plain and with --compress=zstd. Each round makes
# the whole upload once, then starts it again on a new key, kills ddx
# (SIGKILL) once its map says half the input is stored, and times the
# --resume that finishes it. Everything (input, the server's directory)
# lives on DIR (default /dev/shm, a tmpfs), so the disk is out of the
# measurement. Prints the median times and the ratio resumed / whole (the
# bar: <= 0.6), and checks that every stored object is the input
# (decompressed by zstd -d for --compress). s3s-fs rewrites the whole
# object from its parts when an upload completes, which both uploads pay
# in full: that completion is also timed alone (boto3, the same size),
# and the ratio printed without it.
#
# usage: bench/resume-upload.sh [SIZE_MiB]; RUNS= rounds (default 3);
# DDX= the binary (default target/release/ddx); DIR= where files go.
# Needs s3s-fs (cargo install s3s-fs@0.14.1 --features binary --locked)
# and zstd.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-2048}
runs=${RUNS:-3}
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q
for tool in s3s-fs zstd python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed"; exit 1; }
done

dir=$(mktemp -d "${DIR:-/dev/shm}/ddx-resume.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/s3/bkt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
s3s-fs --host 127.0.0.1 --port "$port" --access-key bench-key --secret-key bench-secret \
  "$dir/s3" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
export AWS_ACCESS_KEY_ID=bench-key AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port HOME=/nonexistent

# Half random, half runs of one byte: zstd has something to do, and a
# compressed part still holds a few frames.
input=$dir/input
python3 - "$input" "$size_mib" <<'PY'
import os, sys
path, mib = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    for n in range(mib):
        f.write(os.urandom(1 << 19))
        f.write(bytes([n % 251]) * (1 << 19))
PY
size=$(stat -c %s "$input")

# The input offset the map says is stored (the last part's end).
stored() {
  sed -n 's/^# ddx part: [0-9]* [0-9]* \([0-9]*\) .*/\1/p' "$1" | tail -1
}

# Seconds `$@` took; fails the run if it failed.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$dir/stderr" || { echo "failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# The stored object under KEY is the input (MODE zstd: once decompressed).
check() {
  local mode=$1 key=$2
  if [ "$mode" = zstd ]; then
    zstd -d -c -q "$dir/s3/bkt/$key" | cmp -s - "$input"
  else
    cmp -s "$dir/s3/bkt/$key" "$input"
  fi || { echo "$mode: the object $key is not the input" >&2; exit 1; }
  stat -c %s "$dir/s3/bkt/$key" >"$dir/stored-$mode"
  rm -f "$dir/s3/bkt/$key"
}

echo "resumed upload: $size_mib MiB on $(df --output=fstype "$dir" | tail -1), s3s-fs $(s3s-fs --version | cut -d' ' -f2), $(nproc) CPUs"
for run in $(seq "$runs"); do
  for mode in plain zstd; do
    extra=()
    [ "$mode" = zstd ] && extra=(--compress=zstd)
    map=$dir/map-$mode-$run
    rm -f "$map"
    whole=$(timed "$ddx" if="$input" of="s3://bkt/whole-$mode-$run" bs=8M status=none \
      --map="$map" "${extra[@]}")
    check "$mode" "whole-$mode-$run"
    rm -f "$map"
    "$ddx" if="$input" of="s3://bkt/cut-$mode-$run" bs=8M status=none --map="$map" \
      "${extra[@]}" 2>/dev/null &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      done_bytes=$(stored "$map" 2>/dev/null || true)
      if [ -n "$done_bytes" ] && [ "$done_bytes" -ge $((size / 2)) ]; then
        kill -KILL "$pid"
        break
      fi
      sleep 0.02
    done
    wait "$pid" 2>/dev/null || true
    at=$(stored "$map")
    resumed=$(timed "$ddx" if="$input" of="s3://bkt/cut-$mode-$run" bs=8M status=none \
      --map="$map" --resume "${extra[@]}")
    check "$mode" "cut-$mode-$run"
    echo "$mode whole $whole" >>"$dir/times"
    echo "$mode resumed $resumed $at" >>"$dir/times"
  done
done
# What the server's completion costs by itself: s3s-fs rewrites the object
# from its parts and digests it when the upload completes, so the whole
# upload and the resumed one both pay it in full. Timed with boto3 on an
# upload of each mode's stored size, in 16 MiB parts, three times.
for mode in plain zstd; do
  python3 - "$port" "$(cat "$dir/stored-$mode")" >>"$dir/times" <<'PY' ||
import os, statistics, sys, time
import boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}")
size, part = int(sys.argv[2]), 16 << 20
times = []
for n in range(3):
    key = f"completion-{n}"
    up = s3.create_multipart_upload(Bucket="bkt", Key=key)["UploadId"]
    parts, at = [], 0
    while at < size:
        body = os.urandom(min(part, size - at))
        etag = s3.upload_part(Bucket="bkt", Key=key, UploadId=up,
                              PartNumber=len(parts) + 1, Body=body)["ETag"]
        parts.append({"PartNumber": len(parts) + 1, "ETag": etag})
        at += len(body)
    start = time.time()
    s3.complete_multipart_upload(Bucket="bkt", Key=key, UploadId=up,
                                 MultipartUpload={"Parts": parts})
    times.append(time.time() - start)
    s3.delete_object(Bucket="bkt", Key=key)
print(f"completion {statistics.median(times):.3f}")
PY
    echo "note: the completion alone was not timed (python3-boto3 is needed)" >&2
  sed -i "\$s/^completion/$mode completion/" "$dir/times"
done
python3 - "$dir/times" "$size" <<'PY'
import statistics, sys
times, size = {}, int(sys.argv[2])
killed = {}
for line in open(sys.argv[1]):
    mode, what, seconds, *rest = line.split()
    times.setdefault((mode, what), []).append(float(seconds))
    if rest:
        killed.setdefault(mode, []).append(int(rest[0]) / size)
for mode in ("plain", "zstd"):
    whole = statistics.median(times[(mode, "whole")])
    resumed = statistics.median(times[(mode, "resumed")])
    at = " ".join(f"{k:.0%}" for k in killed[mode])
    print(f"  {mode:5s} whole {whole:6.2f} s  resumed {resumed:6.2f} s (killed at {at})"
          f"  resumed / whole: {resumed / whole:.2f}x (bar: <= 0.6)")
    if (mode, "completion") in times:
        done = statistics.median(times[(mode, "completion")])
        print(f"        the server's completion alone {done:.2f} s; without it,"
              f" resumed / whole: {(resumed - done) / (whole - done):.2f}x")
PY
