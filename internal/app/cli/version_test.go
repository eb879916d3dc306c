package cli

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionOf: the module version, the commit with (dirty) when the work
// tree had changes, and the Go version, from a binary's build information.
func TestVersionOf(t *testing.T) {
	t.Parallel()
	const rev = "6538665a0b1c2d3e4f5061728394a5b6c7d8e9f0"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T17:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"tag", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("false")},
			"version: v1.2.0\ncommit:  " + rev + " 2026-12-01T17:00:00Z\ngo:      go1.26.8\n"},
		{"dirty checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201170000-6538665a0b1c+dirty"}, Settings: vcs("true")},
			"version: v0.0.0-20261201170000-6538665a0b1c+dirty\ncommit:  " + rev + " 2026-12-01T17:00:00Z (dirty)\ngo:      go1.26.8\n"},
		{"commit without a version", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")},
			"version: v0.0.0-20261201170000-6538665a0b1c\ncommit:  " + rev + " 2026-12-01T17:00:00Z\ngo:      go1.26.8\n"},
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"version: (devel)\ncommit:  unknown\ngo:      go1.26.8\n"},
		{"no version", debug.BuildInfo{GoVersion: "go1.26.8"},
			"version: (devel)\ncommit:  unknown\ngo:      go1.26.8\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := versionOf(&tc.bi).String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestVersionBinary: a binary built from this checkout prints the Go
// version that built it and, when go build stamped VCS information, the
// commit of HEAD.
func TestVersionBinary(t *testing.T) {
	bin := buildChime(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("chime version: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "go:      "+runtime.Version()+"\n") || !strings.HasPrefix(got, "version: ") {
		t.Errorf("output:\n%s", got)
	}
	if strings.Contains(got, "commit:  unknown\n") {
		// go build stamps no VCS information with -buildvcs=false (in
		// GOFLAGS on some machines) or in a git worktree, whose .git is a
		// file: TestVersionOf covers the commit line then.
		t.Skip("the binary has no VCS information: the commit is not checked")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("the binary names a commit, but git rev-parse HEAD: %v", err)
	}
	// Only the commit: whether the tree was dirty when the binary was built
	// is not what git says now (other packages' tests may write files as
	// this one runs); TestVersionOf covers (dirty).
	if want := "commit:  " + strings.TrimSpace(string(head)); !strings.Contains(got, want) {
		t.Errorf("output lacks %q:\n%s", want, got)
	}
}
