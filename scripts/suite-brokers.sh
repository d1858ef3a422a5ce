#!/usr/bin/env bash
# Sourced by the scripts that run another project's test suite against Strata
# (kgo-suite.sh, librdkafka-suite.sh): starts fresh Strata brokers and waits
# until each answers /readyz.
#
#   start_brokers 1    one `strata serve` (zero configuration: a one-node cluster)
#   start_brokers 3    three combined broker+controller nodes, one cluster
#
# Needs BIN (a strata binary), WORK (its log dirs go to $WORK/data, its logs to
# $WORK/n<i>.log) and BASE (node i listens on BASE+10i, its controller on
# BASE+10i+1, metrics and /readyz on BASE+10i+2). Extra serve flags come from
# the arrays common_args (every node) and cluster_args (three nodes only).
# Sets seeds (each node's host:port); the nodes are killed when the script exits.
pids=()
seeds=()
common_args=()
cluster_args=()

stop_brokers() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap stop_brokers EXIT

start_brokers() {
	local mode=$1 i b voters url
	rm -rf "$WORK/data"
	if [ "$mode" = 3 ]; then
		voters="1@127.0.0.1:$((BASE + 11)),2@127.0.0.1:$((BASE + 21)),3@127.0.0.1:$((BASE + 31))"
		for i in 1 2 3; do
			b=$((BASE + 10 * i))
			"$BIN" serve --node.id "$i" --process.roles broker,controller \
				--listeners "PLAINTEXT://127.0.0.1:$b,CONTROLLER://127.0.0.1:$((b + 1))" \
				--controller.listener.names CONTROLLER --controller.quorum.voters "$voters" \
				"${cluster_args[@]}" "${common_args[@]}" \
				--log.dirs "$WORK/data/n$i" --strata.metrics.listener "127.0.0.1:$((b + 2))" \
				>"$WORK/n$i.log" 2>&1 &
			pids+=($!)
			seeds+=("127.0.0.1:$b")
		done
	elif [ "$mode" = 1 ]; then
		b=$((BASE + 10))
		"$BIN" serve --listeners "PLAINTEXT://127.0.0.1:$b" --log.dirs "$WORK/data/n1" "${common_args[@]}" \
			--strata.metrics.listener "127.0.0.1:$((b + 2))" >"$WORK/n1.log" 2>&1 &
		pids+=($!)
		seeds+=("127.0.0.1:$b")
	else
		echo "mode must be 1 or 3" >&2
		exit 2
	fi
	for i in $(seq 1 "$mode"); do
		url="http://127.0.0.1:$((BASE + 10 * i + 2))/readyz"
		for _ in $(seq 1 240); do
			if curl -fsS -o /dev/null "$url" 2>/dev/null; then break; fi
			sleep 0.5
		done
		curl -fsS -o /dev/null "$url" || { echo "node $i not ready, see $WORK/n$i.log" >&2; exit 1; }
	done
}
