#!/usr/bin/env bash
# Zero configuration: a node started with no KRaft setting against the same
# binary started as an explicit one-node KRaft cluster (and, with two
# binaries, a second build), alternated in one run on this noisy machine:
# compare ratios, not absolute figures. Per node: one-partition acks=all
# 1 KiB produce (strata bench produce) and one CreateTopics request of
# 1,000 one-partition topics (strata topic create t1 ... t1000); per round
# the disk's fsync'ed append rate (dd, 1 MiB writes with O_DSYNC) as the
# ceiling of durable produce; then the start time on that data after
# kill -9 and after a clean shutdown. Usage:
#   scripts/bench-zero-config.sh BIN [BIN2] [ROUNDS] [COUNT]
set -euo pipefail
bin=$1 bin2=${2:-} rounds=${3:-3} count=${4:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
topics=()
for i in $(seq 1000); do topics+=("t$i"); done
run() { # name bin mode
  local name=$1 b=$2 mode=$3
  local dir="$work/$name-$RANDOM" port=$((20000 + RANDOM % 20000)) ctl=$((40000 + RANDOM % 20000))
  local args=(--log.dirs "$dir" --listeners "PLAINTEXT://127.0.0.1:$port" --strata.metrics.listener "")
  if [ "$mode" = kraft ]; then
    args=(--log.dirs "$dir" --node.id 1 --process.roles broker,controller
      --listeners "PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl" --controller.listener.names CONTROLLER
      --controller.quorum.voters "1@127.0.0.1:$ctl" --strata.metrics.listener "")
  fi
  local t0=$(date +%s%N)
  "$b" serve "${args[@]}" >"$work/$name.log" 2>&1 &
  local pid=$!
  until "$b" topic list --brokers "127.0.0.1:$port" >/dev/null 2>&1; do sleep 0.05; done
  local started=$(( ($(date +%s%N) - t0) / 1000000 ))
  local out
  out=$("$b" bench produce --brokers "127.0.0.1:$port" -t b1 -p 1 -n "$count" -s 1024 -q -o json | tr -d '\n ' || true)
  local c0=$(date +%s%N)
  local create
  if "$b" topic create --brokers "127.0.0.1:$port" -p 1 --timeout 120s "${topics[@]}" >"$work/create.out" 2>&1; then
    create=$(( ($(date +%s%N) - c0) / 1000000 ))
  else
    create="failed_after_$(( ($(date +%s%N) - c0) / 1000000 ))($(grep -c . "$work/create.out")_errors)"
  fi
  # Restart times on the data just written: after kill -9 (log recovery)
  # and after a clean shutdown, until the broker answers a topic list.
  kill -KILL $pid; wait $pid 2>/dev/null || true
  t0=$(date +%s%N)
  "$b" serve "${args[@]}" >>"$work/$name.log" 2>&1 &
  pid=$!
  until "$b" topic list --brokers "127.0.0.1:$port" >/dev/null 2>&1; do sleep 0.05; done
  local killstart=$(( ($(date +%s%N) - t0) / 1000000 ))
  kill -TERM $pid; wait $pid || true
  t0=$(date +%s%N)
  "$b" serve "${args[@]}" >>"$work/$name.log" 2>&1 &
  pid=$!
  until "$b" topic list --brokers "127.0.0.1:$port" >/dev/null 2>&1; do sleep 0.05; done
  local cleanstart=$(( ($(date +%s%N) - t0) / 1000000 ))
  kill -TERM $pid; wait $pid || true
  local rps=$(echo "$out" | sed -n 's/.*"records_per_sec":\([0-9.]*\).*/\1/p')
  local mbps=$(echo "$out" | sed -n 's/.*"mb_per_sec":\([0-9.]*\).*/\1/p')
  printf '%-12s start_ms=%-6s produce_rec_s=%-10s produce_MB_s=%-8s create1000_ms=%-8s kill9_start_ms=%-6s clean_start_ms=%s\n' "$name" "$started" "$rps" "$mbps" "$create" "$killstart" "$cleanstart"
}
disk() {
  local out
  out=$(dd if=/dev/zero of="$work/dd" bs=1M count=256 oflag=dsync 2>&1 | tail -1)
  rm -f "$work/dd"
  echo "disk         dd bs=1M oflag=dsync: ${out##*, }"
}
for r in $(seq "$rounds"); do
  echo "round $r (load $(cut -d' ' -f1 /proc/loadavg))"
  disk
  run zero-config "$bin" zero
  run kraft-1node "$bin" kraft
  if [ -n "$bin2" ]; then
    run bin2-zero "$bin2" zero
  fi
done
