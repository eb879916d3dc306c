// Package indextest is the behaviour suite that every index.Index
// implementation must pass, and its shared benchmarks. Each
// implementation's tests call Run (and its benchmarks Bench) with an Open
// that returns a fresh, empty index for one test.
//
// An index that reads the store instead of holding entries (index.Index's
// second kind, internal/coord/index/storeindex) returns its Source too. The suite then
// does what the index's callers do: it writes each entry to the source
// before adding it, and takes it out of the source before removing it; and
// it expects every slice to read as known.
package indextest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
)

// Open returns a fresh, empty index with the given number of buckets,
// isolated from every other index the suite creates (its own key prefix,
// its own process state, its own store), and registers its own cleanup with
// tb. An index that reads the store returns the Source it reads; any other
// returns a nil Source.
type Open func(tb testing.TB, buckets int) (index.Index, Source)

// Source is the store of pending runs that an index reading the store
// answers from.
type Source interface {
	// Put makes each entry a pending run of its timer due at its DueAt,
	// moving it if it is pending already; for a run given twice, the last
	// DueAt wins.
	Put(ctx context.Context, entries ...index.Entry) error
	// Take moves the runs of runIDs that are pending in slice s out of
	// pending, as a claim does; the others are left as they are.
	Take(ctx context.Context, s index.Slice, runIDs ...string) error
}

// subject is the index under test and its source, if any.
type subject struct {
	index.Index
	src Source
}

func open(tb testing.TB, o Open, buckets int) subject {
	x, src := o(tb, buckets)
	return subject{x, src}
}

// add does what a caller does to add entries: the store first.
func (x subject) add(ctx context.Context, es ...index.Entry) error {
	if x.src != nil {
		if err := x.src.Put(ctx, es...); err != nil {
			return fmt.Errorf("source put: %w", err)
		}
	}
	return x.Add(ctx, es...)
}

// remove does what a caller does to remove runs: the store first.
func (x subject) remove(ctx context.Context, s index.Slice, runIDs ...string) error {
	if x.src != nil {
		if err := x.src.Take(ctx, s, runIDs...); err != nil {
			return fmt.Errorf("source take: %w", err)
		}
	}
	return x.Remove(ctx, s, runIDs...)
}

// base returns the start of the next minute with millisecond precision, so
// that the suite's slices are recent enough to survive any retention and
// their DueAt survive a round trip through Redis unchanged.
func base() time.Time {
	return time.Now().Round(0).Truncate(time.Minute).Add(time.Minute)
}

// Run runs the suite against the indexes o returns, every test in
// parallel.
func Run(t *testing.T, o Open) {
	t.Run("UnknownUntilMarked", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		x := open(t, o, 4)
		// An index that reads the store knows every slice: the store has
		// nothing in s.
		readsStore := x.src != nil
		s := index.Slice{Minute: base().Unix() / 60, Bucket: 3}
		got, known := mustRange(t, x, s, s.End())
		if known != readsStore || len(got) != 0 {
			t.Fatalf("Range of a new slice = %v, known %v; want nothing, known %v", got, known, readsStore)
		}
		if err := x.MarkKnown(ctx, s); err != nil {
			t.Fatalf("MarkKnown: %v", err)
		}
		got, known = mustRange(t, x, s, s.End())
		if !known || len(got) != 0 {
			t.Fatalf("Range after MarkKnown = %v, known %v; want nothing, known", got, known)
		}
		other := index.Slice{Minute: s.Minute, Bucket: 2}
		if _, known := mustRange(t, x, other, other.End()); known != readsStore {
			t.Fatalf("after MarkKnown(%v), %v reads known %v, want %v", s, other, known, readsStore)
		}
	})

	t.Run("Buckets", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int{1, 7} {
			if got := open(t, o, n).Buckets(); got != n {
				t.Errorf("Buckets() = %d, want %d", got, n)
			}
		}
	})

	t.Run("AddRangeOrdered", func(t *testing.T) {
		t.Parallel()
		x := open(t, o, 8)
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
		x := open(t, o, 1)
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
		x := open(t, o, 2)
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
		x := open(t, o, 1)
		b := base()
		var es []index.Entry
		for i := range 5 {
			es = append(es, index.Entry{RunID: fmt.Sprintf("r%d", i), TimerID: "t", DueAt: b.Add(time.Duration(i) * time.Second)})
		}
		mustAdd(t, x, es...)
		s := index.SliceOf("t", b, 1)
		if err := x.remove(ctx, s, "r1", "r3", "not-there"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		check(t, x, s, es[0], es[2], es[4])
		if err := x.remove(ctx, s, "r0", "r2", "r4"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		check(t, x, s) // empty but still known
		if err := x.remove(ctx, index.Slice{Minute: s.Minute + 5}, "r0"); err != nil {
			t.Fatalf("Remove from an unknown slice: %v", err)
		}
		mustAdd(t, x, es[1])
		check(t, x, s, es[1])
	})

	t.Run("MarkKnownKeepsEntries", func(t *testing.T) {
		t.Parallel()
		x := open(t, o, 1)
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
		x := open(t, o, 4)
		b := base()
		const workers, per = 8, 50
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range per {
					timer := fmt.Sprintf("t%d", i%5)
					e := index.Entry{RunID: fmt.Sprintf("w%d-r%d", w, i), TimerID: timer, DueAt: b.Add(time.Duration(i) * 100 * time.Millisecond)}
					if err := x.add(ctx, e); err != nil {
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

func mustAdd(t *testing.T, x subject, es ...index.Entry) {
	t.Helper()
	if err := x.add(context.Background(), es...); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func mustRange(t *testing.T, x subject, s index.Slice, until time.Time) ([]index.Entry, bool) {
	t.Helper()
	got, known, err := x.Range(context.Background(), s, until)
	if err != nil {
		t.Fatalf("Range(%v, %v): %v", s, until, err)
	}
	return got, known
}

// check asserts that slice s is known and holds exactly want, in order.
func check(t *testing.T, x subject, s index.Slice, want ...index.Entry) {
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
