package chime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's limits: short enough to read at once, and starting with the
// two commands a newcomer needs, to run a node and to run the tests.
const (
	readmeMaxLines = 250
	readmeServe    = "go run ./cmd/chime serve"
	readmeTest     = "./scripts/test.sh"
)

// TestReadme: README is at most readmeMaxLines lines, its first block is
// the two commands (run a node, run the tests), and each of its links
// points at a file inside the repository that exists.
func TestReadme(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	lines := strings.Split(strings.TrimSuffix(readme, "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README has %d lines, at most %d: move reference material into docs/", len(lines), readmeMaxLines)
	}
	var first []string // the lines of the first fenced block
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			if line != "```sh" {
				t.Errorf("README's first block is %q, want a ```sh block of the two commands", line)
			}
			for _, l := range lines[i+1:] {
				if strings.HasPrefix(l, "```") {
					break
				}
				first = append(first, l)
			}
			break
		}
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "# ") {
			t.Errorf("README line %d, %q, comes before the two commands", i+1, line)
			break
		}
	}
	if len(first) < 2 || !strings.HasPrefix(first[0], readmeServe) || !strings.HasPrefix(first[1], readmeTest) {
		t.Errorf("README's first block must start with `%s` then `%s`; it is %q", readmeServe, readmeTest, first)
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

// TestDocsPackages: docs/architecture.md names every package of the
// module.
func TestDocsPackages(t *testing.T) {
	t.Parallel()
	const doc = "docs/architecture.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, "github.com/chimehq/chime"), "/")
		if rel == "" {
			rel = "chime"
		}
		if !strings.Contains(string(b), "`"+rel+"`") {
			t.Errorf("%s does not name package %s", doc, rel)
		}
	}
}

// TestDocsIndex: docs/README.md links every page of docs/, and each link
// of every page points at a file that exists.
func TestDocsIndex(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	for _, p := range pages {
		doc := filepath.Base(p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		linked := map[string]bool{}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			linked[m[1]] = true
			if _, err := os.Stat(filepath.Join("docs", m[1])); err != nil {
				t.Errorf("docs/%s links %s: %v", doc, m[1], err)
			}
		}
		if doc != "README.md" {
			continue
		}
		for _, q := range pages {
			if name := filepath.Base(q); name != "README.md" && !linked[name] {
				t.Errorf("docs/README.md does not link %s", name)
			}
		}
	}
}

// TestDocsNoHistory: docs and the comments of non-test code say what is
// true now; the story of how something came to be (issues, sessions,
// rounds of work) lives in git. Every Markdown file, every migration and
// script, and every comment line of a non-test Go file is checked.
func TestDocsNoHistory(t *testing.T) {
	t.Parallel()
	history := regexp.MustCompile(`(?i)(\bissue #?[0-9]+|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|previous|this|last|next|earlier|later) sessions?\b|\bsessions? of work|\brounds? of work)`)
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		ext := filepath.Ext(f)
		goFile := ext == ".go" && !strings.HasSuffix(f, "_test.go")
		if !goFile && ext != ".md" && ext != ".sql" && ext != ".sh" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if goFile {
				c := strings.Index(line, "//")
				if c < 0 {
					continue
				}
				line = line[c:]
			}
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d tells history (%q): say what is true now; git keeps the story", f, i+1, m)
			}
		}
	}
}
