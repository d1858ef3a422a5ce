package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
	if err := touchSources(root); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if bin := os.Getenv("STRATA_E2E_BIN"); bin != "" {
		// A prebuilt binary (e.g. of a release, or of a commit while the
		// work tree does not build).
		strataBin = bin
		return m.Run()
	}
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

// touchSources reads every non-test Go source, go.mod and go.sum of the
// module (outside test/). go test records files a test opens in its cache
// key, so a change to Strata's code invalidates cached e2e results, which
// otherwise would not notice that the binary it builds changed.
func touchSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "test" || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || name == "go.mod" || name == "go.sum" {
			_, err := os.ReadFile(path)
			return err
		}
		return nil
	})
}
