#!/usr/bin/env bash
# Runs librdkafka's own integration test suite (tests/0xxx-*.c), unmodified,
# against Strata in the suite's "existing cluster" mode (tests/README.md:
# a test.conf naming bootstrap.servers). Long (a build of about 10 minutes
# on 2 cores, then 5-10 minutes per run): it runs only with STRATA_LONG=1
# and is not part of the default test suite.
#
#   STRATA_LONG=1 scripts/librdkafka-suite.sh BIN 1 [classic|consumer]
#   STRATA_LONG=1 scripts/librdkafka-suite.sh BIN 3 [classic|consumer]
#
# BIN is a built strata binary (go build -o /tmp/rdk/strata ./cmd/strata);
# 1 is one `strata serve` (a one-node cluster), 3 three combined nodes with
# default.replication.factor 3 (the suite's default scenario has 3 brokers
# and tests 0098, 0101, 0103 create topics of replication factor 3;
# min.insync.replicas stays Kafka's default 1, as in the suite's clusters:
# it produces with acks=all to topics of replication factor 1). The
# last argument is TEST_CONSUMER_GROUP_PROTOCOL (default classic; consumer
# runs the consumer tests as KIP-848 members).
#
# The broker is configured as the suite's default scenario expects
# (tests/scenarios/default.json: auto.create.topics.enable, num.partitions
# 4) plus an authorizer that allows everyone when no ACL matches (0081 and
# 0115/0119 create ACLs). Tests that run Kafka's shell tools (KAFKA_PATH:
# kafka-topics.sh in 0045/0052/0077, kafka-acls.sh in 0109/0115/0119) get
# small stand-ins written below that call the strata CLI. Every run starts
# from empty log dirs: 0033's regex subscriptions see every topic in the
# cluster, including those an earlier run left.
#
# Env: SRC (a librdkafka checkout or tarball dir; default: the tag VERSION
# from the git dir MIRROR, else cloned from GitHub), VERSION (default
# v2.15.0), WORK (default /tmp/rdk), BASE (first port, default 39700),
# TESTS (librdkafka's TESTS, default all), ARGS (test-runner flags, default
# "-Q -L": quick mode, no broker-less local tests). Prints the
# pass/fail/skip counts; the suite's output is $WORK/suite-<mode>-<proto>.log,
# the brokers' logs $WORK/n<i>.log.
set -euo pipefail
if [ "${STRATA_LONG:-}" != 1 ]; then
	echo "librdkafka-suite.sh: long (builds librdkafka); set STRATA_LONG=1" >&2
	exit 2
fi
BIN=$(readlink -f "${1:?usage: librdkafka-suite.sh BIN 1|3 [classic|consumer]}")
MODE=${2:?usage: librdkafka-suite.sh BIN 1|3 [classic|consumer]}
PROTO=${3:-classic}
VERSION=${VERSION:-v2.15.0}
WORK=${WORK:-/tmp/rdk}
BASE=${BASE:-39700}
ARGS=${ARGS:--Q -L}
mkdir -p "$WORK"

src=${SRC:-$WORK/librdkafka-${VERSION#v}}
if [ ! -d "$src" ]; then
	if [ -n "${MIRROR:-}" ]; then
		git -C "$MIRROR" archive --prefix="librdkafka-${VERSION#v}/" "$VERSION" | tar -x -C "$WORK"
	else
		git clone -q --depth 1 --branch "$VERSION" https://github.com/confluentinc/librdkafka "$src"
	fi
fi
if [ ! -x "$src/tests/test-runner" ]; then
	# Debian: libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev
	# libcurl4-openssl-dev rapidjson-dev (RapidJSON enables 0053, 0098,
	# 0101, 0110).
	(cd "$src" && ./configure --disable-gssapi >"$WORK/configure.log" 2>&1 &&
		make -j"$(nproc)" libs >"$WORK/make.log" 2>&1 &&
		make -C tests -j"$(nproc)" test-runner >>"$WORK/make.log" 2>&1)
fi

shim=$WORK/kafka-shim/bin
mkdir -p "$shim"
cat >"$shim/kafka-topics.sh" <<'EOF'
#!/usr/bin/env bash
# kafka-topics.sh stand-in: the --create / --alter --partitions / --delete
# forms librdkafka's tests use, run with the strata CLI ($STRATA_BIN).
set -euo pipefail
S=${STRATA_BIN:?}
op= topic= parts= rf= brokers= cfg=()
while [ $# -gt 0 ]; do
	case "$1" in
	--bootstrap-server) brokers=$2; shift ;;
	--create|--alter|--delete) op=${1#--} ;;
	--topic) topic=$2; shift ;;
	--partitions) parts=$2; shift ;;
	--replication-factor) rf=$2; shift ;;
	--config) cfg+=(-c "$2"); shift ;;
	*) echo "kafka-topics.sh stand-in: unsupported argument $1" >&2; exit 2 ;;
	esac
	shift
done
case "$op" in
create) exec "$S" topic create "$topic" --brokers "$brokers" ${parts:+-p "$parts"} ${rf:+-r "$rf"} "${cfg[@]}" ;;
alter) exec "$S" topic add-partitions "$topic" --brokers "$brokers" --to "$parts" ;;
delete) exec "$S" topic delete "$topic" --brokers "$brokers" ;;
*) echo "kafka-topics.sh stand-in: no --create/--alter/--delete" >&2; exit 2 ;;
esac
EOF
cat >"$shim/kafka-acls.sh" <<'EOF'
#!/usr/bin/env bash
# kafka-acls.sh stand-in: --add / --remove [--force] / --list run as
# `strata acl create|delete|list` ($STRATA_BIN), which take kafka-acls' flags.
set -euo pipefail
S=${STRATA_BIN:?}
op= args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--bootstrap-server) args+=(--brokers "$2"); shift ;;
	--add) op=create ;;
	--remove) op=delete ;;
	--list) op=list ;;
	--force) ;;
	*) args+=("$1") ;;
	esac
	shift
done
exec "$S" acl "${op:?kafka-acls.sh stand-in: no --add/--remove/--list}" "${args[@]}"
EOF
chmod +x "$shim"/*.sh

# shellcheck source=scripts/suite-brokers.sh
. "$(dirname "$0")/suite-brokers.sh"
common_args=(--num.partitions 4 --authorizer.class.name org.apache.kafka.metadata.authorizer.StandardAuthorizer
	--allow.everyone.if.no.acl.found=true)
cluster_args=(--default.replication.factor 3)
start_brokers "$MODE"

brokers=$(IFS=,; echo "${seeds[*]}")
printf 'bootstrap.servers=%s\ntest.timeout.multiplier=3\n' "$brokers" >"$src/tests/test.conf"
log=$WORK/suite-$MODE-$PROTO.log
commit=$(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "strata $commit ($BIN), librdkafka $VERSION, $MODE node(s), group protocol $PROTO: TESTS=${TESTS:-all} ./run-test.sh $ARGS" | tee "$log"
start=$(date +%s)
set +e
# TEST_KAFKA_VERSION 4.0.0: Strata's API baseline (KIP-896); the suite
# skips what needs a newer broker (KIP-932 share groups: 4.2).
(cd "$src/tests" && env STRATA_BIN="$BIN" KAFKA_PATH="$WORK/kafka-shim" BROKERS="$brokers" \
	TEST_KAFKA_VERSION=4.0.0 TEST_CONSUMER_GROUP_PROTOCOL="$PROTO" ${TESTS:+TESTS="$TESTS"} \
	./run-test.sh $ARGS) 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' >>"$log"
rc=${PIPESTATUS[0]}
set -e
took=$(($(date +%s) - start))
rows=$(grep -a '^| [0-9]' "$log" || true)
if [ -z "$rows" ]; then
	# The runner aborts without its summary table when a failed test left
	# librdkafka threads behind: count the per-test verdict lines instead.
	rows=$(grep -a -o '=== Test [0-9][^ ]* \(PASSED\|SKIPPED\)' "$log" | sed 's/=== Test \([^ ]*\) \(.*\)/| \1 | \2 |/' || true)
	rows+=$'\n'$(grep -a -o '^### Test "[0-9][^ "]*' "$log" | sort -u | sed 's/### Test "\(.*\)/| \1 | FAILED |/' || true)
fi
pass=$(grep -c ' PASSED ' <<<"$rows" || true)
fail=$(grep -c ' FAILED ' <<<"$rows" || true)
skip=$(grep -c ' SKIPPED ' <<<"$rows" || true)
echo "librdkafka suite on strata $commit, $MODE node(s), $PROTO: $pass pass / $fail fail / $skip skip, exit $rc, ${took}s (log $log)"
grep ' FAILED ' <<<"$rows" || true
exit "$rc"
