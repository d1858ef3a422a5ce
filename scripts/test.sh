#!/usr/bin/env bash
# Installs what Strata's tests need (only what is missing) and runs them all:
# go vet, then go test over every package. An install that fails stops the
# script: compatibility tests are never skipped silently for lack of a client.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Debian packages, each checked by what the tests actually use.
missing_pkgs=()
command -v kcat >/dev/null 2>&1 || missing_pkgs+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || missing_pkgs+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || missing_pkgs+=(python3-kafka)
# kafka-python's snappy, lz4 and zstd codecs (the compat and legacy-produce tests use every codec).
/usr/bin/python3 -c 'import snappy' >/dev/null 2>&1 || missing_pkgs+=(python3-snappy)
/usr/bin/python3 -c 'import lz4' >/dev/null 2>&1 || missing_pkgs+=(python3-lz4)
/usr/bin/python3 -c 'import zstandard' >/dev/null 2>&1 || missing_pkgs+=(python3-zstandard)
# The sendfile test traces the broker with strace.
command -v strace >/dev/null 2>&1 || missing_pkgs+=(strace)
command -v node >/dev/null 2>&1 || missing_pkgs+=(nodejs)
# The fault tests (test/faults) cut traffic between network namespaces.
command -v iptables >/dev/null 2>&1 || missing_pkgs+=(iptables)
command -v ip >/dev/null 2>&1 || missing_pkgs+=(iproute2)
# The power-loss rows put each broker's directory on a loop-mounted ext4.
command -v mkfs.ext4 >/dev/null 2>&1 || missing_pkgs+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || missing_pkgs+=(mount)
# The web console's browser tests drive Debian's chromium (chromedp).
command -v chromium >/dev/null 2>&1 || missing_pkgs+=(chromium)
command -v Burrow >/dev/null 2>&1 || missing_pkgs+=(burrow)
# Burrow 1.x cannot start without ZooKeeper; the Burrow test runs this jar.
[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || missing_pkgs+=(zookeeper)
if ! command -v npm >/dev/null 2>&1; then
	# nodejs from some repositories bundles npm; Debian's needs the npm package.
	missing_pkgs+=(npm)
fi
if [ ${#missing_pkgs[@]} -gt 0 ]; then
	log "installing ${missing_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update || die "apt-get update failed"
	$SUDO apt-get install -y "${missing_pkgs[@]}" || die "apt-get install ${missing_pkgs[*]} failed"
fi
command -v kcat >/dev/null || die "kcat still missing after install"
/usr/bin/python3 -c 'import confluent_kafka, kafka, snappy, lz4, zstandard' || die "python3 kafka clients or codecs still missing after install"
command -v strace >/dev/null || die "strace still missing after install"
command -v node >/dev/null || die "node still missing after install"
command -v iptables >/dev/null || die "iptables still missing after install"
command -v ip >/dev/null || die "ip (iproute2) still missing after install"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 (e2fsprogs) still missing after install"
command -v chromium >/dev/null || die "chromium still missing after install"
command -v npm >/dev/null || die "npm still missing after install"

# kafkajs for the node compatibility driver (version pinned in package.json).
node_dir=test/compat/node
if [ -d "$node_dir" ] && [ ! -f "$node_dir/node_modules/kafkajs/package.json" ]; then
	log "installing kafkajs into $node_dir"
	if [ -f "$node_dir/package.json" ]; then
		npm install --prefix "$node_dir" --no-audit --no-fund || die "npm install in $node_dir failed"
	else
		npm install --prefix "$node_dir" --no-audit --no-fund kafkajs || die "npm install kafkajs failed"
	fi
	[ -f "$node_dir/node_modules/kafkajs/package.json" ] || die "kafkajs still missing after npm install"
fi

log "go vet ./..."
go vet ./...
go vet -tags invariants ./internal/storage
# The strata binary the process-level tests run (test/e2e, test/faults,
# test/compat's binary cluster and cmd/strata's CLI tests), built once here
# instead of once per package.
bin_dir=$(mktemp -d)
cleanup() {
	# Test runs still going (an interrupt, or a failed job's siblings).
	local pids
	pids=$(jobs -p)
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$bin_dir"
}
trap cleanup EXIT
log "go build ./cmd/strata (shared by test/e2e, test/faults, test/compat and cmd/strata)"
go build -o "$bin_dir/strata" ./cmd/strata
export STRATA_E2E_BIN="$bin_dir/strata"

# The tests. Each package's test binary is built (go test -c) and run as a
# job, STRATA_TEST_JOBS (default: cores + 1) of them at once, the slowest
# first. The suite waits on fsyncs, processes and the network far more than
# it computes (TestCleanerModel: 33 s of wall time for 1.4 s of CPU), so a
# third job runs while two wait. `go test ./...` ran two binaries at a time
# and built a package's binary only once a slot was free, so the ~30 small
# packages were built one after another at the end (~2 minutes of tail).
# A job prints its output only when it fails, as `go test` does; the last
# line lists every job's time (build included).
#
# The storage invariants (segments sorted and not overlapping, high
# watermark <= log end, log start within the log, offset index entries
# increasing and on batch starts) are checked under the invariants build
# tag, as pebble's; the storage and cleaner model tests also run with them
# on (the cleaner's with fewer rapid cases: its checks are the expensive
# part).
jobs_max=${STRATA_TEST_JOBS:-$(($(nproc) + 1))}
tests_dir="$bin_dir/tests"
logs_dir="$bin_dir/logs"
mkdir -p "$tests_dir" "$logs_dir"

# job NAME PKG [BUILD-FLAGS...] -- [TEST-FLAGS...]: build PKG's test binary
# and run it in PKG's directory, as go test does.
job() {
	local name=$1 pkg=$2 file=${1//[^a-z0-9]/_}
	local bin="$tests_dir/$file.test" out="$logs_dir/$file.log"
	shift 2
	local build=() start=$SECONDS
	while [ $# -gt 0 ] && [ "$1" != -- ]; do build+=("$1"); shift; done
	shift
	if ! go test -c "${build[@]}" -o "$bin" "$pkg" >"$out" 2>&1; then
		cat "$out" >&2
		log "FAIL $name (build) $((SECONDS - start))s"
		return 1
	fi
	if [ ! -x "$bin" ]; then
		return 0 # no test files
	fi
	if (cd "$pkg" && "$bin" -test.timeout=20m -test.paniconexit0 "$@") >>"$out" 2>&1; then
		log "ok   $name $((SECONDS - start))s"
		echo "$((SECONDS - start)) $name" >>"$logs_dir/times"
		rm -f "$bin"
	else
		cat "$out" >&2
		log "FAIL $name $((SECONDS - start))s"
		return 1
	fi
}

# The slowest jobs first, so that none of them starts late and makes the
# tail (session 6, load ~20 from other work, build included: server 389 s,
# compat 296, e2e 270, faults 222, cleaner with the invariants tag 111
# (it builds the packages above storage again), console 81, storage 70,
# cleaner 62, group 56, replica 47, cmd/strata 44; the rest < 40 s each).
specs=(
	"internal/server;./internal/server;--"
	"test/compat;./test/compat;--"
	"test/e2e;./test/e2e;--"
	"test/faults;./test/faults;--"
	"internal/cleaner (invariants);./internal/cleaner;-tags;invariants;--;-test.run=TestCleanerModel;-rapid.checks=20"
	"internal/console;./internal/console;--"
	"internal/storage;./internal/storage;--"
	"internal/cleaner;./internal/cleaner;--"
	"internal/group;./internal/group;--"
	"internal/replica;./internal/replica;--"
	"cmd/strata;./cmd/strata;--"
	"internal/storage (invariants);./internal/storage;-tags;invariants;--;-test.run=TestLogModel|TestInvariants"
)
for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
	rel=${pkg#github.com/strata-io/strata/}
	case " ${specs[*]} " in *" $rel;./$rel;--"*) continue ;; esac
	specs+=("$rel;./$rel;--")
done

log "go test: ${#specs[@]} jobs, $jobs_max at once"
failed=0
running=0
for spec in "${specs[@]}"; do
	while [ "$running" -ge "$jobs_max" ]; do
		wait -n || failed=1
		running=$((running - 1))
	done
	IFS=';' read -r -a args <<<"$spec"
	job "${args[@]}" &
	running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
	wait -n || failed=1
	running=$((running - 1))
done
log "job times (s): $(sort -rn "$logs_dir/times" | tr '\n' ' ')"
[ "$failed" = 0 ] || die "tests failed (their output is above)"
log "all tests passed"
