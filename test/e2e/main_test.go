package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// strataBin is the path of the binary built by TestMain.
var strataBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds ./cmd/strata into a temp dir, runs the tests and removes
// the dir.
func buildAndRun(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	strataBin = filepath.Join(tmp, "strata")
	build := exec.Command("go", "build", "-o", strataBin, "./cmd/strata")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build ./cmd/strata failed:", err)
		return 1
	}
	return m.Run()
}
