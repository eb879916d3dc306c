package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchFlags checks that the bench command is registered and rejects an
// unknown scenario before doing any work.
func TestBenchFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"bench", "--help"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "--scenario") || !strings.Contains(out.String(), "--cpuprofile") {
		t.Fatalf("bench --help: code %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	code = Main(context.Background(), []string{"bench", "--scenario", "nope"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "unknown scenario") {
		t.Fatalf("bench --scenario nope: code %d, stderr %q", code, errb.String())
	}
}
