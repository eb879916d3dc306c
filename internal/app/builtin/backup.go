package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/store"
)

// DefaultBackupKeep is how many backups backup_database keeps in its dir
// when its args do not say.
const DefaultBackupKeep = 7

// BackupArgs are the args of backup_database:
//
//	{"dir": "/var/backups/chime", "keep": 7}
//
// Dir is an absolute directory inside an --output-root of the server (as
// cleanup_files' dir is inside a --cleanup-root), which must exist. Keep,
// at least 1, is how many backups are kept there, the newest (default
// DefaultBackupKeep): each run writes one and then deletes the oldest
// beyond Keep. Only files named as backup_database names them are
// counted and deleted.
type BackupArgs struct {
	Dir  string `json:"dir"`
	Keep *int   `json:"keep"`
}

// BackupResult is the output of backup_database, as JSON.
type BackupResult struct {
	// File is the backup's path: chime-<UTC time>.db (SQLite: a database
	// file) or .sql (PostgreSQL, MySQL: a dump script).
	File       string `json:"file"`
	SizeBytes  int64  `json:"size_bytes"`
	DurationMS int64  `json:"duration_ms"`
	// Removed are the older backups deleted to keep Keep.
	Removed []string `json:"removed"`
}

// backupName matches the names of the backups backup_database writes: the
// time sorts them.
var backupName = regexp.MustCompile(`^chime-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z\.(db|sql)$`)

// backupTime is the layout of the time in a backup's name.
const backupTime = "20060102T150405.000Z"

// BackupDatabase is the backup_database handler: a consistent copy of
// chime's own store (store.Backups) into a directory inside Roots
// (--output-root), keeping the newest Keep copies.
//
// The copy holds everything the store does — token hashes, and the
// secrets of actions, encrypted only with --secret-key — so it is
// written 0600; keep the directory as private as the database.
type BackupDatabase struct {
	Store store.Backups
	Roots []string
	// Now tells the backup's name; nil means time.Now.
	Now func() time.Time
}

func parseBackup(raw json.RawMessage) (BackupArgs, int, error) {
	var a BackupArgs
	if err := decodeStrict(raw, &a); err != nil {
		return a, 0, err
	}
	dir, err := checkDir("dir", a.Dir)
	if err != nil {
		return a, 0, err
	}
	a.Dir = dir
	keep := DefaultBackupKeep
	if a.Keep != nil {
		keep = *a.Keep
		if keep < 1 {
			return a, 0, fmt.Errorf("keep must be at least 1, not %d", keep)
		}
	}
	return a, keep, nil
}

// ValidateArgs checks the args when a timer is created.
func (b *BackupDatabase) ValidateArgs(args json.RawMessage) error {
	a, _, err := parseBackup(args)
	if err != nil {
		return err
	}
	_, _, err = resolveIn(b.Roots, "--output-root", a.Dir)
	return err
}

// Run writes the backup, then deletes the oldest beyond keep.
func (b *BackupDatabase) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	a, keep, err := parseBackup(run.Args)
	if err != nil {
		return nil, err
	}
	root, dir, err := openIn(b.Roots, "--output-root", a.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	start := time.Now()
	if testHookOpened != nil {
		testHookOpened()
	}
	name, err := b.Store.BackupIn(ctx, root, "chime-"+now().UTC().Format(backupTime))
	if err != nil {
		return nil, err
	}
	res := BackupResult{File: filepath.Join(dir, name), DurationMS: time.Since(start).Milliseconds(), Removed: []string{}}
	if fi, err := root.Stat(name); err == nil {
		res.SizeBytes = fi.Size()
	}
	removed, perr := pruneBackups(root, dir, keep)
	res.Removed = append(res.Removed, removed...)
	out, _ := json.Marshal(res)
	if perr != nil {
		return out, fmt.Errorf("backup written, but older ones not removed: %w", perr)
	}
	return out, nil
}

// Test hooks, set by tests only: testHookResolved runs once openIn
// resolved a directory, before it opens it; testHookOpened once the
// directory or file a built-in writes in was opened, before it is
// written.
var testHookResolved, testHookOpened func()

// pruneBackups deletes the oldest backups in root (the directory dir)
// beyond keep: only regular files with a backup's name, directly in it.
func pruneBackups(root *os.Root, dir string, keep int) ([]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && backupName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // oldest first: the time is in the name
	var removed []string
	var errs []error
	for len(names) > keep {
		name := names[0]
		names = names[1:]
		if err := root.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, filepath.Join(dir, name))
	}
	return removed, errors.Join(errs...)
}
