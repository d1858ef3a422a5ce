#!/usr/bin/env bash
# Two replication figures on one three-node Strata cluster (three combined
# `strata serve` processes of one binary on this machine: they share its cores
# and disk, so compare ratios within a run):
#
#  1. end-to-end latency (produce -> consume, `strata bench e2e`) of 1 KiB
#     acks=all records at half the maximum rate, RF=3 (min.insync.replicas=2)
#     vs RF=1 in the same run. The maximum is the RF=3 acks=all produce rate
#     measured first (the lower of the two), so both topics get the same rate.
#  2. a restarted follower's catch-up rate as a share of the raw disk read
#     rate: broker 3 is stopped, MB of 1 KiB records are produced to an RF=3
#     topic, broker 3 is started again and the growth of its copy of the log is
#     timed (first byte to the leader's size); the raw read is `dd
#     iflag=direct` of the leader's segment (bypassing the page cache).
#
# Usage: scripts/bench-replication-e2e.sh BIN [ROUNDS] [CATCHUP_MB]
set -euo pipefail
bin=$1 rounds=${2:-3} catchup_mb=${3:-256}
work=$(mktemp -d)
declare -A pids
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
kp=() cp=() voters=()
for i in 1 2 3; do kp+=("$(port)"); cp+=("$(port)"); voters+=("$i@127.0.0.1:${cp[$((i-1))]}"); done
quorum=$(IFS=,; echo "${voters[*]}")
start() {
  local i=$1
  "$bin" serve --node.id "$i" --process.roles broker,controller \
    --listeners "PLAINTEXT://127.0.0.1:${kp[$((i-1))]},CONTROLLER://127.0.0.1:${cp[$((i-1))]}" \
    --controller.listener.names CONTROLLER --controller.quorum.voters "$quorum" \
    --log.dirs "$work/node-$i" --strata.metrics.listener "" >>"$work/node-$i.log" 2>&1 &
  pids[$i]=$!
}
for i in 1 2 3; do start "$i"; done
brokers="127.0.0.1:${kp[0]},127.0.0.1:${kp[1]},127.0.0.1:${kp[2]}"
until "$bin" topic list --brokers "$brokers" >/dev/null 2>&1; do sleep 0.2; done
"$bin" topic create rf1 --brokers "$brokers" -p 1 -r 1 >/dev/null
"$bin" topic create rf3 --brokers "$brokers" -p 1 -r 3 -c min.insync.replicas=2 >/dev/null
field() { python3 -c 'import json,sys;d=json.load(sys.stdin);l=d.get("latency_ms") or {};print(eval(sys.argv[1]))' "$1"; }
echo "machine: $(nproc) cores, $(uname -r); load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. maximum RF=3 acks=all rate, then e2e at half of it on both topics
# (SKIP_E2E=1 runs only the catch-up part).
if [ "${SKIP_E2E:-}" != 1 ]; then
max=$("$bin" bench produce --brokers "$brokers" -t rf3 -p 1 -n 50000 -s 1024 -q -o json | field 'round(d["records_per_sec"])')
half=$((max / 2))
echo "RF=3 acks=all max: $max records/s; e2e at $half records/s for 20 s"
for r in $(seq "$rounds"); do
  for topic in rf1 rf3; do
    out=$("$bin" bench e2e --brokers "$brokers" -t "$topic" -p 1 -s 1024 --rate "$half" -d 20s -q -o json)
    printf 'round %s\t%s\t%s\tload %s\n' "$r" "$topic" \
      "$(echo "$out" | field '"records=%d p50_ms=%s p99_ms=%s errors=%d" % (d["records"], l.get("p50"), l.get("p99"), d["errors"])')" \
      "$(cut -d' ' -f1 /proc/loadavg)"
  done
done

fi

# 2. follower catch-up vs raw disk read.
"$bin" topic create catchup --brokers "$brokers" -p 1 -r 3 -c min.insync.replicas=1 -c segment.bytes=1073741824 >/dev/null
"$bin" bench produce --brokers "$brokers" -t catchup -p 1 -n 1000 -s 1024 -q -o json >/dev/null
# Stop a broker that does not lead the partition (SIGTERM: controlled shutdown).
leader=$("$bin" topic describe catchup --brokers "$brokers" -o json | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d["partitions"][0]["leader"])')
victim=3; [ "$leader" = 3 ] && victim=2
kill -TERM "${pids[$victim]}"; wait "${pids[$victim]}" || true
echo "stopped broker $victim (leader $leader); its copy: $(du -sb "$work/node-$victim/catchup-0" | cut -f1) bytes"
seeds="127.0.0.1:${kp[$((leader-1))]}"
n=$((catchup_mb * 1024))
"$bin" bench produce --brokers "$seeds" -t catchup -p 1 -n "$n" -s 1024 -q --acks 1 -o json >/dev/null
lseg=$(ls "$work/node-$leader/catchup-0/"*.log)
echo "after producing: leader's log $(stat -c %s "$lseg") bytes, broker $victim's copy $(du -sb "$work/node-$victim/catchup-0" | cut -f1) bytes"
fseg_dir="$work/node-$victim/catchup-0"
target=$(stat -c %s "$lseg")
before=$(du -sb "$fseg_dir"/*.log | awk '{s+=$1} END {print s}')
t_start=$(date +%s.%N)
start "$victim"
python3 - "$fseg_dir" "$target" "$t_start" "$before" <<'EOF'
import glob, os, sys, time
d, target, start, before = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
def size():
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(d, "*.log")))
s0 = size(); t0 = None
first = time.time()
deadline = start + 600
while time.time() < deadline:
    s = size()
    if t0 is None and s > s0:
        t0 = time.time()
    if s >= target:
        break
    time.sleep(0.01)
t1 = time.time()
print("catch-up: follower log %.1f MB at the restart, %.1f MB when first looked at (%.2f s later), %.1f MB at the end (leader %.1f MB)"
      % (before / 1e6, s0 / 1e6, first - start, s / 1e6, target / 1e6))
print("  restart (process start included) to caught up: %.2f s = %.1f MB/s (a lower bound)" % (t1 - start, (s - before) / 1e6 / (t1 - start)))
if t0 is not None and s > s0:
    print("  from the first look to caught up: %.2f s = %.1f MB/s" % (t1 - first, (s - s0) / 1e6 / (t1 - first)))
EOF
# Back in the ISR: with strata.durable.acks the follower rejoins only once
# its fsynced end reaches the leader's high watermark.
until "$bin" topic describe catchup --brokers "$seeds" -o json 2>/dev/null |
  python3 -c 'import json,sys;d=json.load(sys.stdin);sys.exit(0 if int(sys.argv[1]) in d["partitions"][0]["isr"] else 1)' "$victim"; do
  [ "$SECONDS" -lt 3600 ] || { echo "  not back in the ISR"; break; }
  sleep 0.05
done
echo "  restart to back in the ISR: $(python3 -c "import time;print('%.2f' % (time.time()-$t_start))") s"
for i in 1 2; do
  dd if="$lseg" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1 | sed 's/^/raw read (dd iflag=direct): /'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
