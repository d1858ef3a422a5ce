#!/usr/bin/env bash
# Replicated vs single-replica acks=all produce on one three-node Strata
# cluster (three combined `strata serve` processes of one binary on this
# machine: they share its cores and disk, so compare ratios within a run).
# Alternates, ROUNDS times, one-partition 1 KiB acks=all produce to a topic
# with replication factor 1 and to one with replication factor 3
# (min.insync.replicas=2), and reports MB/s, ack latency, the CPU seconds the
# three brokers used per GB produced (utime+stime from /proc), and the bytes the
# disk holding the log dirs wrote during the run (/proc/diskstats) with its
# write rate: RF=3 writes every record three times to the one shared disk.
#
# STRATA_BENCH_DISK_BPS=<bytes/s> (optional, needs root and cgroup v1 blkio):
# each broker process runs in its own blkio cgroup whose writes to that disk
# are throttled to the given rate (blkio.throttle.write_bps_device; buffered
# writes are charged at fsync, which the brokers call), emulating one disk per
# broker as in a real cluster instead of three brokers sharing one. RF=1 and
# RF=3 run under the same limits. STRATA_BENCH_KEEP_LOGS=<dir> keeps the
# brokers' logs there.
# Usage:
#   scripts/bench-replication.sh BIN [ROUNDS] [COUNT]
set -euo pipefail
bin=$1 rounds=${2:-3} count=${3:-100000}
work=$(mktemp -d)
pids=() cgroups=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for g in "${cgroups[@]}"; do rmdir "$g" 2>/dev/null || true; done
  if [ -n "${STRATA_BENCH_KEEP_LOGS:-}" ]; then mkdir -p "$STRATA_BENCH_KEEP_LOGS" && cp "$work"/node-*.log "$STRATA_BENCH_KEEP_LOGS/"; fi
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
kp=() cp=() voters=()
for i in 1 2 3; do kp+=("$(port)"); cp+=("$(port)"); voters+=("$i@127.0.0.1:${cp[$((i-1))]}"); done
quorum=$(IFS=,; echo "${voters[*]}")
# The disk holding the log dirs ("major:minor" and its /proc/diskstats name).
dev=$(stat -c '%d' "$work")
majmin="$((dev >> 8)):$((dev & 255))"
disk=$(awk -v a="$((dev >> 8))" -v b="$((dev & 255))" '$1==a && $2==b {print $3}' /proc/diskstats)
if [ -z "$disk" ]; then # a partition's device: count its whole disk
  disk=$(basename "$(readlink -f "/sys/dev/block/$majmin/..")")
  majmin=$(cat "/sys/class/block/$disk/dev")
fi
written() { awk -v d="$disk" '$3==d {print $10*512}' /proc/diskstats; }
limit=${STRATA_BENCH_DISK_BPS:-}
for i in 1 2 3; do
  wrap=()
  if [ -n "$limit" ]; then
    g=/sys/fs/cgroup/blkio/strata-bench-$$-$i
    mkdir "$g"
    cgroups+=("$g")
    echo "$majmin $limit" >"$g/blkio.throttle.write_bps_device"
    wrap=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$g")
  fi
  "${wrap[@]}" "$bin" serve --node.id "$i" --process.roles broker,controller \
    --listeners "PLAINTEXT://127.0.0.1:${kp[$((i-1))]},CONTROLLER://127.0.0.1:${cp[$((i-1))]}" \
    --controller.listener.names CONTROLLER --controller.quorum.voters "$quorum" \
    --log.dirs "$work/node-$i" --strata.metrics.listener "" >"$work/node-$i.log" 2>&1 &
  pids+=($!)
done
brokers="127.0.0.1:${kp[0]},127.0.0.1:${kp[1]},127.0.0.1:${kp[2]}"
until "$bin" topic list --brokers "$brokers" >/dev/null 2>&1; do sleep 0.2; done
"$bin" topic create rf1 --brokers "$brokers" -p 1 -r 1 >/dev/null 2>&1 || true
cpu() { # clock ticks used by the three brokers
  local t=0
  for p in "${pids[@]}"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done
  echo $t
}
hz=$(getconf CLK_TCK)
create_rf3() {
  "$bin" topic create rf3 --brokers "$brokers" -p 1 -r 3 -c min.insync.replicas=2 >/dev/null
}
# The listing answers once one broker is up; RF=3 needs all three registered.
for _ in $(seq 300); do
  create_rf3 2>/dev/null && break
  "$bin" topic describe rf3 --brokers "$brokers" >/dev/null 2>&1 && break
  sleep 0.2
done
echo "machine: $(nproc) cores, $(uname -r); count=$count 1 KiB records per run; disk $disk ($majmin)" \
  "${limit:+; each broker writes at most $limit B/s (own blkio cgroup)}"
for r in $(seq "$rounds"); do
  for topic in rf1 rf3; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    c0=$(cpu) w0=$(written) t0=$(date +%s.%N)
    out=$("$bin" bench produce --brokers "$brokers" -t "$topic" -p 1 -n "$count" -s 1024 -q -o json)
    c1=$(cpu) w1=$(written) t1=$(date +%s.%N)
    mbs=$(echo "$out" | python3 -c 'import json,sys;d=json.load(sys.stdin);l=d.get("latency_ms") or {};print(round(d["mb_per_sec"],1), "p50_ms=%s p99_ms=%s errors=%s" % (l.get("p50"), l.get("p99"), d["errors"]))')
    cpu_s=$(python3 -c "print(round(($c1-$c0)/$hz,2))")
    gb=$(python3 -c "print($count*1024/1e9)")
    disk_mb=$(python3 -c "print(round(($w1-$w0)/1e6))")
    disk_mbs=$(python3 -c "print(round(($w1-$w0)/1e6/($t1-$t0)))")
    printf 'round %s\t%s\tMB/s=%s\tbroker_cpu_s=%s\tcpu_s_per_GB=%s\tdisk_written_MB=%s\tdisk_MB/s=%s\tload=%s\n' \
      "$r" "$topic" "$mbs" "$cpu_s" "$(python3 -c "print(round($cpu_s/$gb,1))")" "$disk_mb" "$disk_mbs" "$load"
  done
done
