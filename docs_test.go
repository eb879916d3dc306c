package chime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadme: README names every package of the module, and each of its
// links points at a file inside the repository that exists.
func TestReadme(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, "github.com/chimehq/chime"), "/")
		if rel == "" {
			rel = "chime"
		}
		if !strings.Contains(readme, "`"+rel+"`") {
			t.Errorf("README does not list package %s", rel)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		link := m[1]
		if strings.Contains(link, "://") {
			continue // a web address, not a file
		}
		if strings.HasPrefix(link, "..") || filepath.IsAbs(link) {
			t.Errorf("README links %s, outside the repository", link)
			continue
		}
		if _, err := os.Stat(link); err != nil {
			t.Errorf("README links %s: %v", link, err)
		}
	}
}
