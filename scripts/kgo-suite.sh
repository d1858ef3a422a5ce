#!/usr/bin/env bash
# Runs franz-go's own pkg/kgo integration suite, unmodified, against Strata.
#
#   scripts/kgo-suite.sh BIN 3     three combined nodes, one cluster, KGO_TEST_RF=3
#   scripts/kgo-suite.sh BIN 1     one `strata serve` (zero configuration: a one-node cluster), KGO_TEST_RF=1
#
# BIN is a built strata binary (go build -o /tmp/kgosuite/strata ./cmd/strata).
# The suite is the franz-go version of Strata's go.mod (copied from the module
# cache; the franz-go mirror has no v1.22.x tags). Env: REPO (Strata checkout for
# go.mod, default this checkout), WORK (default /tmp/kgosuite), BASE (first port,
# default 39400), RUN (go test -run, default .), TIMEOUT (default 30m).
# Prints the pass/skip/fail counts of top-level tests; the full output is in
# $WORK/kgo-<mode>.log, the brokers' logs in $WORK/n<i>.log.
set -euo pipefail
BIN=$(readlink -f "${1:?usage: kgosuite.sh BIN 1|3}")
MODE=${2:?usage: kgosuite.sh BIN 1|3}
REPO=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}
WORK=${WORK:-/tmp/kgosuite}
BASE=${BASE:-39400}
RUN=${RUN:-.}
TIMEOUT=${TIMEOUT:-30m}

ver=$(awk '$1=="github.com/twmb/franz-go" {print $2}' "$REPO/go.mod")
src=$(go env GOMODCACHE)/github.com/twmb/franz-go@$ver
mkdir -p "$WORK"
if [ ! -d "$WORK/franz-go-$ver" ]; then
	cp -r "$src" "$WORK/franz-go-$ver"
	chmod -R u+w "$WORK/franz-go-$ver"
fi

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$WORK/data"
seeds=()
if [ "$MODE" = 3 ]; then
	voters="1@127.0.0.1:$((BASE + 11)),2@127.0.0.1:$((BASE + 21)),3@127.0.0.1:$((BASE + 31))"
	for i in 1 2 3; do
		b=$((BASE + 10 * i))
		"$BIN" serve --node.id "$i" --process.roles broker,controller \
			--listeners "PLAINTEXT://127.0.0.1:$b,CONTROLLER://127.0.0.1:$((b + 1))" \
			--controller.listener.names CONTROLLER --controller.quorum.voters "$voters" \
			--default.replication.factor 3 --min.insync.replicas 2 \
			--log.dirs "$WORK/data/n$i" --strata.metrics.listener "127.0.0.1:$((b + 2))" \
			>"$WORK/n$i.log" 2>&1 &
		pids+=($!)
		seeds+=("127.0.0.1:$b")
	done
	rf=3
elif [ "$MODE" = 1 ]; then
	b=$((BASE + 10))
	"$BIN" serve --listeners "PLAINTEXT://127.0.0.1:$b" --log.dirs "$WORK/data/n1" \
		--strata.metrics.listener "127.0.0.1:$((b + 2))" >"$WORK/n1.log" 2>&1 &
	pids+=($!)
	seeds+=("127.0.0.1:$b")
	rf=1
else
	echo "mode must be 1 or 3" >&2
	exit 2
fi

for i in $(seq 1 "$MODE"); do
	url="http://127.0.0.1:$((BASE + 10 * i + 2))/readyz"
	for _ in $(seq 1 240); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then break; fi
		sleep 0.5
	done
	curl -fsS -o /dev/null "$url" || { echo "node $i not ready, see $WORK/n$i.log" >&2; exit 1; }
done

commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
log="$WORK/kgo-$MODE.log"
cmd="KGO_SEEDS=$(IFS=,; echo "${seeds[*]}") KGO_TEST_RF=$rf KGO_TEST_RECORDS=20000 KGO_LOG_LEVEL=none go test -v -count=1 -timeout $TIMEOUT -run '$RUN' ./pkg/kgo"
echo "strata $commit ($BIN), franz-go $ver, mode $MODE: $cmd" | tee "$log"
start=$(date +%s)
set +e
(cd "$WORK/franz-go-$ver" && env KGO_SEEDS="$(IFS=,; echo "${seeds[*]}")" KGO_TEST_RF=$rf KGO_TEST_RECORDS=20000 \
	KGO_LOG_LEVEL=none go test -v -count=1 -timeout "$TIMEOUT" -run "$RUN" ./pkg/kgo) >>"$log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
pass=$(grep -c '^--- PASS' "$log" || true)
skip=$(grep -c '^--- SKIP' "$log" || true)
fail=$(grep -c '^--- FAIL' "$log" || true)
echo "kgo suite on strata $commit, mode $MODE: $pass pass / $skip skip / $fail fail, exit $rc, ${took}s (log $log)"
grep '^--- FAIL' "$log" || true
exit $rc
