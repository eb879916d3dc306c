package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestClusterDocKnobs: docs/cluster.md's knob tables name every flag of
// `chime serve`.
func TestClusterDocKnobs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		if !strings.Contains(doc, "`--"+f.Name+"`") {
			t.Errorf("docs/cluster.md does not list --%s", f.Name)
		}
	})
}
