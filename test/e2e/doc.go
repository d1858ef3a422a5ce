// Package e2e holds Strata's end-to-end tests: each test builds the real
// `strata` binary once (TestMain), runs `strata serve` as a child process and
// drives it with real Kafka clients (franz-go in-process, kcat as a process)
// through whole-process scenarios: zero-config start, clean and unclean
// restarts, SIGKILL crashes under acks=all load, a full disk, bad bytes on the
// wire and restart durability of topic configs.
//
// Run it with `go test ./test/e2e/`. STRATA_LONG=1 runs 50 crash rounds
// instead of 5; STRATA_E2E_BIN=<path> tests that binary instead of building
// ./cmd/strata. A test that meets a Strata bug says so with a "BUG:"
// message (`go test -v ./test/e2e/ | grep BUG:` lists them). A missing kcat
// or a tmpfs mount that is not permitted fails its test (scripts/test.sh
// installs kcat; the disk-full tests need root). The zero-config test needs
// 127.0.0.1:9092 and 127.0.0.1:9644 free and fails saying so otherwise.
package e2e
