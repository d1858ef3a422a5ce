#!/usr/bin/env bash
# One-partition acks=all 1 KiB produce against single-node brokers built
# from two binaries, alternated in one run (this machine is noisy: compare
# ratios, not absolute figures). Usage:
#   scripts/bench-cluster-produce.sh BEFORE_BIN AFTER_BIN [ROUNDS] [COUNT]
# Also runs AFTER_BIN configured as a one-controller KRaft node.
set -euo pipefail
before=$1 after=$2 rounds=${3:-3} count=${4:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { # name bin extra-args...
  local name=$1 bin=$2; shift 2
  local dir="$work/$name-$RANDOM" port=$((20000 + RANDOM % 20000)) ctl=$((40000 + RANDOM % 20000))
  local args=(--log.dirs "$dir" --listeners "PLAINTEXT://127.0.0.1:$port" --strata.metrics.listener "")
  if [ "${1:-}" = kraft ]; then
    args=(--log.dirs "$dir" --node.id 1 --process.roles broker,controller
      --listeners "PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl" --controller.listener.names CONTROLLER
      --controller.quorum.voters "1@127.0.0.1:$ctl" --strata.metrics.listener "")
  fi
  local t0=$(date +%s%N)
  "$bin" serve "${args[@]}" >"$work/$name.log" 2>&1 &
  local pid=$!
  until "$bin" topic list --brokers "127.0.0.1:$port" >/dev/null 2>&1; do sleep 0.05; done
  local started=$(( ($(date +%s%N) - t0) / 1000000 ))
  local out
  out=$("$bin" bench produce --brokers "127.0.0.1:$port" -t b1 -p 1 -n "$count" -s 1024 -q -o json)
  kill -TERM $pid; wait $pid || true
  printf '%s\tstart_ms=%s\t%s\n' "$name" "$started" "$(echo "$out" | tr -d '\n ' )"
}
for r in $(seq "$rounds"); do
  run before "$before"
  run after "$after"
  run after-kraft "$after" kraft
done
