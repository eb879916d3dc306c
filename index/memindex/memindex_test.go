package memindex_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/indextest"
	"github.com/chimehq/chime/index/memindex"
)

// open is the suite's constructor: a process's index holds its entries.
func open(_ testing.TB, buckets int) (index.Index, indextest.Source) {
	return memindex.New(buckets), nil
}

func TestSuite(t *testing.T) {
	t.Parallel()
	indextest.Run(t, open)
}

// BenchmarkIndex runs the benchmarks shared by every index.
func BenchmarkIndex(b *testing.B) { indextest.Bench(b, open) }

func TestOldSlicesAreDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Unix(1_700_000_040, 0) // a minute boundary
	clk := clock.NewFake(start)
	x := memindex.NewWithOptions(memindex.Options{Buckets: 1, Retention: 5 * time.Minute, Clock: clk})
	for m := range 3 {
		e := index.Entry{RunID: fmt.Sprint(m), TimerID: "t", DueAt: start.Add(time.Duration(m) * time.Minute)}
		if err := x.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	first := index.SliceOf("t", start, 1)
	tests := []struct {
		name      string
		at        time.Duration // clock offset from start
		slices    int
		firstKnow bool
	}{
		{"fresh", 0, 3, true},
		{"within retention", 6 * time.Minute, 3, true}, // first ended 5m ago
		{"first expired", 7 * time.Minute, 2, false},   // pruning runs once per clock minute
		{"all expired", 9 * time.Minute, 0, false},
	}
	for _, tc := range tests {
		clk.Set(start.Add(tc.at))
		_, known, err := x.Range(ctx, first, first.End())
		if err != nil {
			t.Fatal(err)
		}
		if known != tc.firstKnow || x.Len() != tc.slices {
			t.Errorf("%s: first slice known %v, %d slices; want %v, %d", tc.name, known, x.Len(), tc.firstKnow, tc.slices)
		}
	}
}

func TestCompactsTombstones(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := memindex.New(1)
	due := time.Now().Truncate(time.Minute)
	s := index.SliceOf("t", due, 1)
	for i := range 10_000 {
		e := index.Entry{RunID: "same", TimerID: "t", DueAt: due.Add(time.Duration(i%60) * time.Second)}
		if err := x.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := x.Range(ctx, s, s.End())
	if err != nil || len(got) != 1 || !got[0].DueAt.Equal(due.Add(9999%60*time.Second)) {
		t.Fatalf("Range = %v, %v; want the last of one run", got, err)
	}
}

// TestRangeBoundsOutsideUnixNano checks that Range bounds beyond the years
// UnixNano represents neither wrap nor panic, and that entries come back
// with their instant, in UTC.
func TestRangeBoundsOutsideUnixNano(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := memindex.New(1)
	due := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	e := index.Entry{RunID: "r", TimerID: "t", DueAt: due}
	if err := x.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	s := index.SliceOf("t", due, 1)
	for _, tc := range []struct {
		until time.Time
		want  int
	}{
		{time.Time{}, 0},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{due, 0},
		{due.Add(time.Nanosecond), 1},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 1},
	} {
		got, known, err := x.Range(ctx, s, tc.until)
		if err != nil || !known || len(got) != tc.want {
			t.Errorf("Range(until %v) = %d entries, %v, %v; want %d", tc.until, len(got), known, err, tc.want)
			continue
		}
		if tc.want == 1 && (!got[0].DueAt.Equal(due) || got[0].DueAt.Location() != time.UTC) {
			t.Errorf("Range(until %v) DueAt = %v, want %v in UTC", tc.until, got[0].DueAt, due)
		}
	}
}
