package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// CleanupFiles is the cleanup_files handler. It works only inside Roots
// (--cleanup-root): a timer's dir must resolve, symbolic links included,
// to one of them or a directory under one, when the timer is created and
// again at every run, since the file system may have changed in between.
// The run then works through an os.Root opened on that directory, which
// refuses to follow a symbolic link out of it.
type CleanupFiles struct {
	Roots []string
}

// NewCleanupFiles returns the handler for roots, each an absolute path of
// an existing directory other than "/".
func NewCleanupFiles(roots []string) (*CleanupFiles, error) {
	if len(roots) == 0 {
		return nil, errors.New("cleanup_files: no --cleanup-root")
	}
	if err := checkRoots("--cleanup-root", roots); err != nil {
		return nil, err
	}
	return &CleanupFiles{Roots: slices.Clone(roots)}, nil
}

// resolve resolves dir, symbolic links included, and returns the resolved
// root it is in and its path relative to that root.
func (c *CleanupFiles) resolve(dir string) (root, rel string, err error) {
	return resolveIn(c.Roots, "--cleanup-root", dir)
}

// resolveIn resolves dir, symbolic links included, and returns the
// resolved root of roots it is in and its path relative to that root;
// flag names the roots' flag in errors.
func resolveIn(roots []string, flag, dir string) (root, rel string, err error) {
	if len(roots) == 0 {
		return "", "", fmt.Errorf("no %s is configured on this server", flag)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", "", fmt.Errorf("dir %q does not resolve: %w", dir, errors.Unwrap(err))
	}
	if real == "/" {
		return "", "", fmt.Errorf("dir %q resolves to /: refused", dir)
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(rr, real)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rr, rel, nil
		}
	}
	if real != dir {
		return "", "", fmt.Errorf("dir %q resolves to %q, which is not inside a %s of this server", dir, real, flag)
	}
	return "", "", fmt.Errorf("dir %q is not inside a %s of this server", dir, flag)
}

// openIn opens dir, which must be inside one of roots (resolveIn), as an
// os.Root: the root directory is opened first, then dir below it through
// that root, which never leaves it whatever links meanwhile appear on the
// way. Everything a built-in then reads or writes goes through the
// returned root, so a directory swapped for a link after this does not
// move it. It also returns the directory's path (for messages).
func openIn(roots []string, flag, dir string) (*os.Root, string, error) {
	rootDir, rel, err := resolveIn(roots, flag, dir)
	if err != nil {
		return nil, "", err
	}
	if testHookResolved != nil {
		testHookResolved()
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", flag, err)
	}
	if rel == "." {
		return root, rootDir, nil
	}
	defer root.Close()
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return nil, "", fmt.Errorf("dir %q: %w", dir, err)
	}
	return sub, filepath.Join(rootDir, rel), nil
}

// checkRoots checks roots given with flag: each an absolute path of an
// existing directory other than "/".
func checkRoots(flag string, roots []string) error {
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("%s %q: must be an absolute path", flag, r)
		}
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			return fmt.Errorf("%s %q: %w", flag, r, err)
		}
		if real == "/" {
			return fmt.Errorf("%s %q resolves to /, which would allow every directory", flag, r)
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s %q: not a directory", flag, r)
		}
	}
	return nil
}

// checkDir checks a dir arg: absolute, not "/", without "." or ".."
// elements. field names it in errors.
func checkDir(field, dir string) (string, error) {
	switch {
	case dir == "":
		return "", fmt.Errorf("%s is required", field)
	case !filepath.IsAbs(dir):
		return "", fmt.Errorf("%s %q must be an absolute path", field, dir)
	case filepath.Clean(dir) == "/":
		return "", fmt.Errorf(`%s "/" is refused`, field)
	}
	for _, el := range strings.Split(dir, "/") {
		if el == ".." || el == "." {
			return "", fmt.Errorf("%s %q must not contain . or .. elements", field, dir)
		}
	}
	return filepath.Clean(dir), nil
}

func parseCleanup(raw json.RawMessage) (CleanupArgs, time.Duration, error) {
	var a CleanupArgs
	if err := decodeStrict(raw, &a); err != nil {
		return a, 0, err
	}
	dir, err := checkDir("dir", a.Dir)
	if err != nil {
		return a, 0, err
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
	a.Dir = dir
	return a, d, nil
}

// ValidateArgs checks the args when a timer is created.
func (c *CleanupFiles) ValidateArgs(args json.RawMessage) error {
	a, _, err := parseCleanup(args)
	if err != nil {
		return err
	}
	_, _, err = c.resolve(a.Dir)
	return err
}

// Run deletes the matching files and lists them in the output.
func (c *CleanupFiles) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	a, d, err := parseCleanup(run.Args)
	if err != nil {
		return nil, err
	}
	rootDir, rel, err := c.resolve(a.Dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, fmt.Errorf("open cleanup root: %w", err)
	}
	defer root.Close()
	if rel != "." {
		sub, err := root.OpenRoot(rel)
		if err != nil {
			return nil, fmt.Errorf("dir %q: %w", a.Dir, err)
		}
		defer sub.Close()
		root = sub
	}
	dir, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("dir %q: %w", a.Dir, err)
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("dir %q: %w", a.Dir, err)
	}
	realDir := filepath.Join(rootDir, rel)
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
		path := filepath.Join(realDir, e.Name())
		info, err := root.Lstat(e.Name())
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := root.Remove(e.Name()); err != nil {
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
