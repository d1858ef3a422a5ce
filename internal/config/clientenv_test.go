package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestClientEnvListsTestSwitches: every STRATA_ variable the module's code
// reads with os.Getenv is a broker setting's or listed in ClientEnv, so a
// test run with a harness switch set (STRATA_LONG=1, STRATA_TEST_JOBS=4,
// ...) does not make `strata serve` warn about it (cmd/strata's
// TestServeWarnings compares the warnings exactly).
func TestClientEnvListsTestSwitches(t *testing.T) {
	read := regexp.MustCompile(`Getenv\("(STRATA_[A-Z0-9_]+)"\)`)
	settings := map[string]bool{}
	for _, n := range acceptedNames() {
		settings[EnvName(n)] = true
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range read.FindAllStringSubmatch(string(b), -1) {
			if !settings[m[1]] && !slices.Contains(ClientEnv, m[1]) {
				t.Errorf("%s reads %s, which is neither a setting's variable nor in ClientEnv", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
