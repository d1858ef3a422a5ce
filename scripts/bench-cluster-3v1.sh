#!/usr/bin/env bash
# acks=all 1 KiB produce to a 6-partition RF=1 topic: a one-node KRaft
# cluster against a three-node cluster (three combined nodes, two
# partition leaders each) on this machine, alternated in one run (this
# machine is noisy: compare ratios, not absolute figures; the three nodes
# share its cores and disk). Usage:
#   scripts/bench-cluster-3v1.sh BIN [ROUNDS] [COUNT]
set -euo pipefail
bin=$1 rounds=${2:-3} count=${3:-200000}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { echo $((20000 + RANDOM % 30000)); }
run() { # name nodes
  local name=$1 n=$2 voters="" kafka=() ctl=() seeds=""
  for i in $(seq "$n"); do kafka[$i]=$(port); ctl[$i]=$(port); voters+="${voters:+,}$i@127.0.0.1:${ctl[$i]}"; done
  pids=()
  for i in $(seq "$n"); do
    "$bin" serve --node.id "$i" --process.roles broker,controller \
      --listeners "PLAINTEXT://127.0.0.1:${kafka[$i]},CONTROLLER://127.0.0.1:${ctl[$i]}" \
      --controller.listener.names CONTROLLER --controller.quorum.voters "$voters" \
      --log.dirs "$work/$name-$RANDOM-n$i" --strata.metrics.listener "" >"$work/$name-n$i.log" 2>&1 &
    pids+=($!)
    seeds+="${seeds:+,}127.0.0.1:${kafka[$i]}"
  done
  for i in $(seq "$n"); do
    until "$bin" topic list --brokers "127.0.0.1:${kafka[$i]}" >/dev/null 2>&1; do sleep 0.1; done
  done
  local out
  out=$("$bin" bench produce --brokers "$seeds" -t b6 -p 6 -n "$count" -s 1024 -q -o json)
  for p in "${pids[@]}"; do kill -TERM "$p"; done
  for p in "${pids[@]}"; do wait "$p" || true; done
  pids=()
  printf '%s\t%s\n' "$name" "$(echo "$out" | tr -d '\n ')"
}
for r in $(seq "$rounds"); do
  run one-node 1
  run three-nodes 3
done
