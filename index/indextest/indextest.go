// Package indextest is the behaviour suite that every index.Index
// implementation must pass. Each implementation's tests call Run with a
// constructor that returns a fresh, empty index for one test.
package indextest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/index"
)

// NewIndex returns a fresh, empty index with the given number of buckets,
// isolated from every other index the suite creates (its own key prefix, its
// own process state). It registers its own cleanup with t.
type NewIndex func(t *testing.T, buckets int) index.Index

// base returns the start of the next minute with millisecond precision, so
// that the suite's slices are recent enough to survive any retention and
// their DueAt survive a round trip through Redis unchanged.
func base() time.Time {
	return time.Now().Round(0).Truncate(time.Minute).Add(time.Minute)
}

// Run runs the suite against the indexes newIndex returns.
func Run(t *testing.T, newIndex NewIndex) {
	t.Run("UnknownUntilMarked", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		x := newIndex(t, 4)
		s := index.Slice{Minute: base().Unix() / 60, Bucket: 3}
		got, known := mustRange(t, x, s, s.End())
		if known || len(got) != 0 {
			t.Fatalf("Range of a new slice = %v, known %v; want nothing, unknown", got, known)
		}
		if err := x.MarkKnown(ctx, s); err != nil {
			t.Fatalf("MarkKnown: %v", err)
		}
		got, known = mustRange(t, x, s, s.End())
		if !known || len(got) != 0 {
			t.Fatalf("Range after MarkKnown = %v, known %v; want nothing, known", got, known)
		}
		other := index.Slice{Minute: s.Minute, Bucket: 2}
		if _, known := mustRange(t, x, other, other.End()); known {
			t.Fatalf("MarkKnown(%v) made %v known", s, other)
		}
	})

	t.Run("Buckets", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int{1, 7} {
			if got := newIndex(t, n).Buckets(); got != n {
				t.Errorf("Buckets() = %d, want %d", got, n)
			}
		}
	})

	t.Run("AddRangeOrdered", func(t *testing.T) {
		t.Parallel()
		x := newIndex(t, 8)
		b := base()
		// Three timers, some runs added out of order, two runs sharing
		// one instant (ordered by run id then).
		offsets := map[string][]time.Duration{
			"timer-a": {50 * time.Second, 1 * time.Second, 30 * time.Second, 30 * time.Second},
			"timer-b": {59*time.Second + 999*time.Millisecond, 0, 10 * time.Millisecond},
			"timer-c": {61 * time.Second, 20 * time.Second}, // 61s: next minute
		}
		want := map[index.Slice][]index.Entry{}
		var all []index.Entry
		for timer, offs := range offsets {
			for i, off := range offs {
				e := index.Entry{RunID: fmt.Sprintf("%s-run-%d", timer, i), TimerID: timer, DueAt: b.Add(off)}
				all = append(all, e)
				s := index.SliceOf(timer, e.DueAt, x.Buckets())
				want[s] = append(want[s], e)
			}
		}
		mustAdd(t, x, all...)
		for s, w := range want {
			sortEntries(w)
			got, known := mustRange(t, x, s, s.End())
			if !known {
				t.Fatalf("slice %v unknown after Add", s)
			}
			if !equalEntries(got, w) {
				t.Errorf("Range(%v) =\n%v\nwant\n%v", s, got, w)
			}
		}
	})

	t.Run("UntilIsExclusive", func(t *testing.T) {
		t.Parallel()
		x := newIndex(t, 1)
		b := base()
		var es []index.Entry
		for i := range 10 {
			es = append(es, index.Entry{RunID: fmt.Sprintf("r%02d", i), TimerID: "t", DueAt: b.Add(time.Duration(i) * time.Second)})
		}
		mustAdd(t, x, es...)
		s := index.SliceOf("t", b, 1)
		tests := []struct {
			name  string
			until time.Time
			want  int
		}{
			{"before all", b, 0},
			{"just after first", b.Add(time.Millisecond), 1},
			{"on an entry", b.Add(5 * time.Second), 5},
			{"between", b.Add(5*time.Second + 500*time.Millisecond), 6},
			{"slice end", s.End(), 10},
			{"far future", s.End().Add(time.Hour), 10},
			{"before slice", b.Add(-time.Hour), 0},
		}
		for _, tc := range tests {
			got, known := mustRange(t, x, s, tc.until)
			if !known || !equalEntries(got, es[:tc.want]) {
				t.Errorf("%s: Range until %v = %v (known %v), want %v", tc.name, tc.until, got, known, es[:tc.want])
			}
		}
	})

	t.Run("DedupeKeepsLastDueAt", func(t *testing.T) {
		t.Parallel()
		x := newIndex(t, 2)
		b := base()
		e1 := index.Entry{RunID: "run-1", TimerID: "t1", DueAt: b.Add(40 * time.Second)}
		e2 := index.Entry{RunID: "run-2", TimerID: "t1", DueAt: b.Add(20 * time.Second)}
		moved := e1
		moved.DueAt = b.Add(10 * time.Second)
		back := e1
		back.DueAt = b.Add(50 * time.Second)
		s := index.SliceOf("t1", b, 2)

		mustAdd(t, x, e1, e2, e1)
		check(t, x, s, e2, e1)
		mustAdd(t, x, moved)
		check(t, x, s, moved, e2)
		mustAdd(t, x, back, e1, moved, back) // within one call too
		check(t, x, s, e2, back)
	})

	t.Run("Remove", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		x := newIndex(t, 1)
		b := base()
		var es []index.Entry
		for i := range 5 {
			es = append(es, index.Entry{RunID: fmt.Sprintf("r%d", i), TimerID: "t", DueAt: b.Add(time.Duration(i) * time.Second)})
		}
		mustAdd(t, x, es...)
		s := index.SliceOf("t", b, 1)
		if err := x.Remove(ctx, s, "r1", "r3", "not-there"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		check(t, x, s, es[0], es[2], es[4])
		if err := x.Remove(ctx, s, "r0", "r2", "r4"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		check(t, x, s) // empty but still known
		if err := x.Remove(ctx, index.Slice{Minute: s.Minute + 5}, "r0"); err != nil {
			t.Fatalf("Remove from an unknown slice: %v", err)
		}
		mustAdd(t, x, es[1])
		check(t, x, s, es[1])
	})

	t.Run("MarkKnownKeepsEntries", func(t *testing.T) {
		t.Parallel()
		x := newIndex(t, 1)
		b := base()
		e := index.Entry{RunID: "r", TimerID: "t", DueAt: b}
		mustAdd(t, x, e)
		s := index.SliceOf("t", b, 1)
		if err := x.MarkKnown(context.Background(), s); err != nil {
			t.Fatalf("MarkKnown: %v", err)
		}
		check(t, x, s, e)
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		x := newIndex(t, 4)
		b := base()
		const workers, per = 8, 50
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range per {
					timer := fmt.Sprintf("t%d", i%5)
					e := index.Entry{RunID: fmt.Sprintf("w%d-r%d", w, i), TimerID: timer, DueAt: b.Add(time.Duration(i) * 100 * time.Millisecond)}
					if err := x.Add(ctx, e); err != nil {
						errs <- err
						return
					}
					s := index.SliceOf(timer, e.DueAt, x.Buckets())
					if _, _, err := x.Range(ctx, s, s.End()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		total := 0
		for bucket := range x.Buckets() {
			s := index.Slice{Minute: b.Unix() / 60, Bucket: bucket}
			got, _ := mustRange(t, x, s, s.End())
			if !slices.IsSortedFunc(got, func(a, b index.Entry) int { return a.DueAt.Compare(b.DueAt) }) {
				t.Errorf("slice %v not ordered", s)
			}
			total += len(got)
		}
		if total != workers*per {
			t.Errorf("got %d entries in all buckets, want %d", total, workers*per)
		}
	})
}

func mustAdd(t *testing.T, x index.Index, es ...index.Entry) {
	t.Helper()
	if err := x.Add(context.Background(), es...); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func mustRange(t *testing.T, x index.Index, s index.Slice, until time.Time) ([]index.Entry, bool) {
	t.Helper()
	got, known, err := x.Range(context.Background(), s, until)
	if err != nil {
		t.Fatalf("Range(%v, %v): %v", s, until, err)
	}
	return got, known
}

// check asserts that slice s is known and holds exactly want, in order.
func check(t *testing.T, x index.Index, s index.Slice, want ...index.Entry) {
	t.Helper()
	got, known := mustRange(t, x, s, s.End())
	if !known {
		t.Fatalf("slice %v unknown", s)
	}
	if !equalEntries(got, want) {
		t.Fatalf("Range(%v) =\n%v\nwant\n%v", s, got, want)
	}
}

func sortEntries(es []index.Entry) {
	slices.SortFunc(es, func(a, b index.Entry) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		if a.RunID < b.RunID {
			return -1
		}
		if a.RunID > b.RunID {
			return 1
		}
		return 0
	})
}

func equalEntries(a, b []index.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y index.Entry) bool {
		return x.RunID == y.RunID && x.TimerID == y.TimerID && x.DueAt.Equal(y.DueAt)
	})
}
