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
# The storage invariants (segments sorted and not overlapping, high
# watermark <= log end, log start within the log, offset index entries
# increasing and on batch starts) are checked under the invariants build
# tag, as pebble's; the storage and cleaner model tests run with them on
# (the cleaner's with fewer rapid cases: its checks are the expensive part).
log "go test -tags invariants (storage and cleaner model tests)"
go test -tags invariants -count=1 -timeout 10m -run 'TestLogModel|TestInvariants' ./internal/storage
go test -tags invariants -count=1 -timeout 10m -run 'TestCleanerModel' ./internal/cleaner -rapid.checks=20
# The strata binary the process-level tests run (test/e2e, test/faults,
# test/compat's binary cluster),
# built once here instead of once per package.
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
log "go build ./cmd/strata (shared by test/e2e, test/faults and test/compat)"
go build -o "$bin_dir/strata" ./cmd/strata
export STRATA_E2E_BIN="$bin_dir/strata"
# go test starts the packages' runs in the order given (-p of them at a
# time): the longest first, so they do not end up running last while every
# short package has finished (the tail was ~4 minutes of CI's wall time).
slowest=(./test/faults ./internal/server ./test/compat ./test/e2e ./internal/console ./cmd/strata ./internal/group ./internal/cleaner ./internal/storage)
log "go test ${slowest[*]} ./... -count=1 -timeout 20m"
go test "${slowest[@]}" ./... -count=1 -timeout 20m
