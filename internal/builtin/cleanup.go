package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chimehq/chime"
)

// CleanupArgs are the args of cleanup_files:
//
//	{"dir": "/var/log/app", "pattern": "*.log.gz", "older_than": "720h"}
//
// Dir is an absolute directory, not "/", without "." or ".." elements.
// Pattern is a glob (path.Match syntax) matched against the file names
// directly in Dir; it may not contain a path separator. OlderThan is a Go
// duration: files whose modification time is older than now minus it are
// deleted. Only regular files are deleted: never directories, symbolic
// links or devices, and nothing in subdirectories.
type CleanupArgs struct {
	Dir       string `json:"dir"`
	Pattern   string `json:"pattern"`
	OlderThan string `json:"older_than"`
}

// CleanupFiles is the cleanup_files handler.
type CleanupFiles struct{}

func parseCleanup(raw json.RawMessage) (CleanupArgs, time.Duration, error) {
	var a CleanupArgs
	if err := decodeStrict(raw, &a); err != nil {
		return a, 0, err
	}
	switch {
	case a.Dir == "":
		return a, 0, errors.New("dir is required")
	case !filepath.IsAbs(a.Dir):
		return a, 0, fmt.Errorf("dir %q must be an absolute path", a.Dir)
	case filepath.Clean(a.Dir) == "/":
		return a, 0, errors.New(`dir "/" is refused`)
	}
	for _, el := range strings.Split(a.Dir, "/") {
		if el == ".." || el == "." {
			return a, 0, fmt.Errorf("dir %q must not contain . or .. elements", a.Dir)
		}
	}
	switch {
	case a.Pattern == "":
		return a, 0, errors.New("pattern is required")
	case strings.ContainsAny(a.Pattern, `/\`):
		return a, 0, fmt.Errorf("pattern %q must not contain a path separator: it matches names in dir", a.Pattern)
	case a.Pattern == "." || a.Pattern == "..":
		return a, 0, fmt.Errorf("pattern %q is refused", a.Pattern)
	}
	if _, err := filepath.Match(a.Pattern, ""); err != nil {
		return a, 0, fmt.Errorf("pattern %q: %v", a.Pattern, err)
	}
	if a.OlderThan == "" {
		return a, 0, errors.New(`older_than is required (a Go duration such as "72h")`)
	}
	d, err := time.ParseDuration(a.OlderThan)
	if err != nil {
		return a, 0, fmt.Errorf("older_than %q is not a Go duration such as \"72h\"", a.OlderThan)
	}
	if d <= 0 {
		return a, 0, fmt.Errorf("older_than %q must be positive", a.OlderThan)
	}
	a.Dir = filepath.Clean(a.Dir)
	return a, d, nil
}

// ValidateArgs checks the args when a timer is created.
func (CleanupFiles) ValidateArgs(args json.RawMessage) error {
	_, _, err := parseCleanup(args)
	return err
}

// Run deletes the matching files and lists them in the output.
func (CleanupFiles) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	a, d, err := parseCleanup(run.Args)
	if err != nil {
		return nil, err
	}
	// The directory itself may be a symbolic link; what it resolves to must
	// not be the root either.
	real, err := filepath.EvalSymlinks(a.Dir)
	if err != nil {
		return nil, err
	}
	if real == "/" {
		return nil, fmt.Errorf("dir %q resolves to /: refused", a.Dir)
	}
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-d)
	var removed, failed []string
	var size int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return report(removed, size, failed), err
		}
		if !e.Type().IsRegular() {
			continue
		}
		if ok, _ := filepath.Match(a.Pattern, e.Name()); !ok {
			continue
		}
		path := filepath.Join(a.Dir, e.Name())
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(path); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				failed = append(failed, fmt.Sprintf("%s: %v", path, err))
			}
			continue
		}
		removed = append(removed, path)
		size += info.Size()
	}
	out := report(removed, size, failed)
	if len(failed) > 0 {
		return out, fmt.Errorf("could not remove %d files", len(failed))
	}
	return out, nil
}

func report(removed []string, size int64, failed []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "removed %d files (%d bytes)\n", len(removed), size)
	for _, p := range removed {
		b.WriteString(p + "\n")
	}
	for _, f := range failed {
		b.WriteString("failed: " + f + "\n")
	}
	return []byte(b.String())
}
