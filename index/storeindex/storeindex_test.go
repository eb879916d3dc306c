package storeindex_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/storeindex"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store/sqlstore"
	"github.com/chimehq/chime/store/storetest"
)

func TestRangeReadsPendingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "x.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := storetest.NewTimer("app", "t")
	if err := st.CreateTimer(ctx, tm); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	runs := storetest.NewRuns(tm.ID, start, 10*time.Second, 8) // 10:00:00 .. 10:01:10
	if _, err := st.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	const buckets = 4
	x := storeindex.New(st, buckets)
	s := index.SliceOf(tm.ID, start, buckets)
	got, known, err := x.Range(ctx, s, start.Add(25*time.Second))
	if err != nil || !known {
		t.Fatalf("Range = %v, %v, %v", got, known, err)
	}
	if len(got) != 3 || got[0].RunID != runs[0].ID || got[2].RunID != runs[2].ID {
		t.Errorf("Range until 10:00:25 = %v, want the first 3 runs", got)
	}
	got, _, _ = x.Range(ctx, s, start.Add(time.Hour))
	if len(got) != 6 {
		t.Errorf("Range of the whole minute = %d runs, want 6", len(got))
	}
	other := index.Slice{Minute: s.Minute, Bucket: (s.Bucket + 1) % buckets}
	if got, _, _ := x.Range(ctx, other, start.Add(time.Hour)); len(got) != 0 {
		t.Errorf("Range of another bucket = %v", got)
	}
	// A run that is no longer pending leaves the index.
	if err := st.SetRunStatus(ctx, runs[0].ID, model.RunPending, model.RunCancelled, ""); err != nil {
		t.Fatal(err)
	}
	got, _, _ = x.Range(ctx, s, start.Add(time.Hour))
	if len(got) != 5 {
		t.Errorf("Range after a cancel = %d runs, want 5", len(got))
	}
}
