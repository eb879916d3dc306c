package storetest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// reportTests are the tests of what reports and backups read: the runs of
// a period, and a consistent copy of the whole store.
var reportTests = []test{
	{"RunsScheduled", testRunsScheduled},
	{"RunsScheduledPages", testRunsScheduledPages},
	{"Backup", testBackup},
}

// testRunsScheduled: RunsScheduled returns the runs scheduled in [From,
// To), to the nanosecond at both edges, of every timer or of the timers of
// Apps, with their result but not its text.
func testRunsScheduled(t *testing.T, s store.Store) {
	a, runs := finishedRuns(t, s, "ra")
	b := mustTimer(t, s, "other", "rb")
	mustInsert(t, s, NewRuns(b.ID, base, time.Second, 12))
	// Runs of a long before and long after: not in any period below.
	mustInsert(t, s, NewRuns(a.ID, base.Add(-time.Hour), time.Second, 3))
	mustInsert(t, s, NewRuns(a.ID, base.Add(time.Hour), time.Second, 3))
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base.Add(time.Second + 250*time.Millisecond), FinishedAt: base.Add(2 * time.Second),
		Output: "some output", Error: "boom"}))

	sec := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	tests := []struct {
		name     string
		f        store.PeriodFilter
		wantA    []int // indexes of a's runs
		wantOthr int   // how many of b's
	}{
		{"all apps", store.PeriodFilter{From: sec(1), To: sec(4)}, []int{1, 2, 3}, 3},
		{"from after an instant, in its second", store.PeriodFilter{From: sec(1).Add(time.Nanosecond), To: sec(4)}, []int{2, 3}, 2},
		{"to an instant excluded", store.PeriodFilter{From: sec(1), To: sec(4).Add(-time.Nanosecond)}, []int{1, 2, 3}, 3},
		{"to past an instant, in its second", store.PeriodFilter{From: sec(1), To: sec(4).Add(time.Nanosecond)}, []int{1, 2, 3, 4}, 4},
		{"one app", store.PeriodFilter{From: sec(0), To: sec(12), Apps: []string{"app"}}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0},
		{"apps", store.PeriodFilter{From: sec(10), To: sec(20), Apps: []string{"app", "other"}}, []int{10, 11}, 2},
		{"an app without timers", store.PeriodFilter{From: sec(0), To: sec(12), Apps: []string{"nobody"}}, nil, 0},
		{"empty period", store.PeriodFilter{From: sec(4), To: sec(4)}, nil, 0},
	}
	for _, tc := range tests {
		got, next, err := s.RunsScheduled(ctx(t), tc.f)
		must(t, err)
		if next != "" {
			t.Errorf("%s: next %q on the only page", tc.name, next)
		}
		var want []string
		for _, i := range tc.wantA {
			want = append(want, runs[i].ID)
		}
		var gotA []string
		others := 0
		for i, r := range got {
			if i > 0 && got[i-1].ID >= r.ID {
				t.Errorf("%s: runs not in id order", tc.name)
			}
			if r.TimerID == a.ID {
				gotA = append(gotA, r.ID)
			} else {
				others++
			}
		}
		slices.Sort(want)
		if !slices.Equal(gotA, want) || others != tc.wantOthr {
			t.Errorf("%s: runs of a %v, want %v; %d of the other timer, want %d", tc.name, gotA, want, others, tc.wantOthr)
		}
	}

	got, _, err := s.RunsScheduled(ctx(t), store.PeriodFilter{From: sec(1), To: sec(2), Apps: []string{"app"}})
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("%d runs", len(got))
	}
	r := got[0]
	if r.ID != runs[1].ID || r.TimerID != a.ID || !r.ScheduledAt.Equal(sec(1)) || r.Status != model.RunFailed ||
		r.Attempt != 1 || r.StartedAt == nil || !r.StartedAt.Equal(sec(1).Add(250*time.Millisecond)) ||
		r.FinishedAt == nil || r.DurationMS != 750 || r.Node != "n1" || r.Output != "" || r.Error != "" {
		t.Errorf("run read back = %+v (started %v finished %v)", r, r.StartedAt, r.FinishedAt)
	}
}

// testRunsScheduledPages: pages of RunsScheduled, resumed after the
// cursor, return each run of the period once, in id order, with Apps too
// (whose pages may hold fewer runs than the limit).
func testRunsScheduledPages(t *testing.T, s store.Store) {
	var all, ofApp []string
	for _, name := range []string{"p1", "p2", "p3"} {
		app := "app"
		if name == "p2" {
			app = "other"
		}
		tm := mustTimer(t, s, app, name)
		for _, r := range mustInsert(t, s, NewRuns(tm.ID, base, 250*time.Millisecond, 20)) {
			all = append(all, r.ID)
			if app == "other" {
				ofApp = append(ofApp, r.ID)
			}
		}
	}
	slices.Sort(all)
	slices.Sort(ofApp)
	pages(t, s, store.PeriodFilter{From: base, To: base.Add(time.Hour), Limit: 7}, all)
	pages(t, s, store.PeriodFilter{From: base, To: base.Add(time.Hour), Limit: 7, Apps: []string{"other"}}, ofApp)
	pages(t, s, store.PeriodFilter{From: base, To: base.Add(time.Hour), Limit: 7, Apps: []string{"nobody"}}, nil)
}

// pages reads every page of f and checks that they return want.
func pages(t *testing.T, s store.Store, f store.PeriodFilter, want []string) {
	t.Helper()
	var got []string
	for n := 0; ; n++ {
		if n > 40 {
			t.Fatal("pages never end")
		}
		page, next, err := s.RunsScheduled(ctx(t), f)
		must(t, err)
		if len(page) > 7 {
			t.Fatalf("page of %d runs, limit 7", len(page))
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		f.After = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages returned %d runs, want %d, in id order", len(got), len(want))
	}
}

// testBackup: BackupIn writes one complete file of the store's format, which
// holds the timers table and its rows, refuses to replace a file, and
// leaves nothing else behind. A backend whose dump tool is missing on this
// host is skipped.
func testBackup(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "backed-up")
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	name, err := s.BackupIn(ctx(t), root, "copy")
	file := filepath.Join(dir, name)
	if errors.Is(err, store.ErrBackupTool) {
		t.Skipf("no dump tool on this host: %v", err)
	}
	must(t, err)
	if file != filepath.Join(dir, "copy"+store.BackupSQLite) && file != filepath.Join(dir, "copy"+store.BackupSQL) {
		t.Fatalf("backup file %q", file)
	}
	fi, err := os.Stat(file)
	must(t, err)
	if fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup %s: %d bytes, mode %v; want some bytes, 0600", file, fi.Size(), fi.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	must(t, err)
	for _, want := range []string{"CREATE TABLE", "timers", tm.ID, "backed-up"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("backup lacks %q", want)
		}
	}
	if _, err := s.BackupIn(ctx(t), root, "copy"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second backup to the same name: %v", err)
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("backup dir holds %d files, want only the backup", len(entries))
	}
}
