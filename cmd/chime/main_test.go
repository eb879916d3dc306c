package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// zoneDirs are the directories where package time looks for the system's
// time-zone database on Unix (time.platformZoneSources).
var zoneDirs = []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo"}

// TestTZDataImported: the binary links time/tzdata, so that zones load in
// the scratch image, which has no zoneinfo.
func TestTZDataImported(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if !slices.Contains(strings.Fields(string(out)), "time/tzdata") {
		t.Fatal("cmd/chime does not import time/tzdata")
	}
}

// TestZonesWithoutZoneinfo: the binary loads a zone (chime cron next --tz
// Asia/Tokyo) where the system's time-zone database is hidden: in a mount
// namespace with an empty directory over each of zoneDirs. It needs root
// and unshare(1), and is skipped without them.
func TestZonesWithoutZoneinfo(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to hide the zoneinfo in a mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1)")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "chime")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range zoneDirs {
		script.WriteString("if [ -d " + d + " ]; then mount --bind " + empty + " " + d + "; fi\n")
	}
	// The control: the system database is gone in here.
	script.WriteString("if [ -e /usr/share/zoneinfo/Asia/Tokyo ]; then echo 'zoneinfo still visible'; exit 9; fi\n")
	script.WriteString(`exec "$0" cron next -n 1 --tz Asia/Tokyo '0 0 9 * * *' --from 2026-05-31T12:00:00Z` + "\n")
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script.String(), bin)
	// No ZONEINFO, and a GOROOT without lib/time/zoneinfo.zip, which
	// package time reads last (a binary built with -trimpath, as the
	// image's, knows no GOROOT).
	cmd.Env = append(os.Environ(), "ZONEINFO=", "GOROOT="+empty, "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") {
			t.Skipf("no mount namespace here: %s", out)
		}
		t.Fatalf("chime cron next without zoneinfo: %v\n%s", err, out)
	}
	if want := "2026-06-01T09:00:00+09:00"; !strings.Contains(string(out), want) {
		t.Fatalf("output %q, want %s", out, want)
	}
}

// TestGCDefault: chime runs with GOGC=defaultGOGC unless the environment
// sets GOGC, which it leaves to the runtime.
func TestGCDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "100") // restored when the test ends
	applyGCDefault()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=100 in the environment: GC percent %d, want 100", got)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	applyGCDefault()
	if got := debug.SetGCPercent(100); got != defaultGOGC {
		t.Errorf("without GOGC: GC percent %d, want %d", got, defaultGOGC)
	}
}
