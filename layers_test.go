package chime_test

import (
	"os/exec"
	"strings"
	"testing"
)

// layers gives each package of the module its level, by path prefix (the
// longest prefix wins); docs/architecture.md draws them. A package may
// import only packages of its own level or below.
var layers = []struct {
	prefix string
	level  int
}{
	{"model", 0},
	{"schedule", 0},
	{"webhook", 0},
	{"internal/base", 1},
	{"internal/store", 2},
	{"internal/coord", 3},
	{"internal/timers", 3},
	{"internal/metrics", 3},
	{"internal/engine", 4},
	{"", 5}, // the root package, the library
	{"internal/nodeparts", 5},
	{"internal/app", 6},
	{"cobracron", 6},
	{"cmd", 6},
	{"e2e", 6},
}

const module = "github.com/chimehq/chime"

// levelOf returns the level of the module package rel (a path relative to
// the module, "" for the root).
func levelOf(t *testing.T, rel string) int {
	best, level := -1, -1
	for _, l := range layers {
		if (rel == l.prefix || l.prefix != "" && strings.HasPrefix(rel, l.prefix+"/")) && len(l.prefix) > best {
			best, level = len(l.prefix), l.level
		}
	}
	if level < 0 {
		t.Fatalf("package %q has no level: add it to layers", rel)
	}
	return level
}

// TestLayers: no package depends, directly or through others, on a
// package of a higher level (go list -deps of every package; test files
// are not counted).
func TestLayers(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, _ := rel(f[0])
		lv := levelOf(t, pkg)
		for _, d := range f[1:] {
			dep, ok := rel(d)
			if !ok {
				continue
			}
			if dl := levelOf(t, dep); dl > lv {
				t.Errorf("%s (level %d) depends on %s (level %d): move the code, or invert the dependency with an interface", f[0], lv, d, dl)
			}
		}
	}
}
