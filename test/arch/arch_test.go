// Package arch checks that docs/architecture.md is true to the code: its
// "imports" table must match the import graph of the module's packages
// (non-test files) exactly, list every package, and point only downwards.
package arch

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/strata-io/strata"

// root is the module root, two levels above this package.
const root = "../.."

// layer is one line of the table: a package, the packages it imports, the
// ones it must never import, and its position (lower lines are below).
type layer struct {
	pos       int
	imports   []string
	forbidden []string
}

// readTable parses the ```imports block of docs/architecture.md.
func readTable(t *testing.T) (map[string]layer, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := map[string]layer{}
	var order []string
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```imports":
			in = true
			continue
		case in && line == "```":
			in = false
			continue
		case !in || line == "":
			continue
		}
		name, deps, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("architecture.md:%d: want \"package: imports\", got %q", n, line)
		}
		name = strings.TrimSpace(name)
		if _, dup := table[name]; dup {
			t.Fatalf("architecture.md:%d: %s listed twice", n, name)
		}
		l := layer{pos: len(order)}
		for _, d := range strings.Fields(deps) {
			if rest, ok := strings.CutPrefix(d, "!"); ok {
				l.forbidden = append(l.forbidden, rest)
			} else {
				l.imports = append(l.imports, d)
			}
		}
		table[name] = l
		order = append(order, name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatal("architecture.md has no ```imports block")
	}
	return table, order
}

// shortName is a package's name in the table: its module-relative path
// without the internal/ prefix.
func shortName(importPath string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
	return strings.TrimPrefix(rel, "internal/")
}

// packages returns every package of the module (directories with Go
// files, testdata and hidden directories skipped) and the module packages
// its non-test files import, for this platform's build.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if base := d.Name(); path != root && (base == "testdata" || base == "node_modules" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			if len(pkg.TestGoFiles)+len(pkg.XTestGoFiles) == 0 {
				return nil // not a package
			}
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := shortName(module + "/" + filepath.ToSlash(rel))
		var deps []string
		for _, imp := range pkg.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				deps = append(deps, shortName(imp))
			}
		}
		sort.Strings(deps)
		out[name] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportGraphMatchesArchitectureDoc(t *testing.T) {
	table, order := readTable(t)
	actual := packages(t)
	if len(actual) < 10 {
		t.Fatalf("found only %d packages under %s", len(actual), root)
	}
	for _, name := range order {
		if _, ok := actual[name]; !ok {
			t.Errorf("architecture.md lists %s, which is not a package", name)
		}
	}
	names := make([]string, 0, len(actual))
	for name := range actual {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l, ok := table[name]
		if !ok {
			t.Errorf("package %s (imports %v) is missing from architecture.md's imports table", name, actual[name])
			continue
		}
		for _, dep := range actual[name] {
			dl, known := table[dep]
			switch {
			case slices.Contains(l.forbidden, dep):
				t.Errorf("%s imports %s, which architecture.md forbids", name, dep)
			case !slices.Contains(l.imports, dep):
				t.Errorf("%s imports %s, which architecture.md does not list", name, dep)
			case known && dl.pos <= l.pos:
				t.Errorf("%s imports %s, which architecture.md places above it (imports point downwards)", name, dep)
			}
		}
		for _, dep := range l.imports {
			if !slices.Contains(actual[name], dep) {
				t.Errorf("architecture.md says %s imports %s; it does not", name, dep)
			}
			if slices.Contains(l.forbidden, dep) {
				t.Errorf("architecture.md both lists and forbids %s -> %s", name, dep)
			}
		}
	}
}
