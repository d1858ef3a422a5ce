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

# shellcheck source=scripts/suite-brokers.sh
. "$(dirname "$0")/suite-brokers.sh"
if [ "$MODE" = 3 ]; then
	cluster_args=(--default.replication.factor 3 --min.insync.replicas 2)
fi
start_brokers "$MODE"
rf=$MODE

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
