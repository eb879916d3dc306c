package memindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/indextest"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/model"
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

// TestSuiteWithHorizon runs the suite against an index with a horizon
// longer than the suite's slices are ahead: it behaves as one without.
func TestSuiteWithHorizon(t *testing.T) {
	t.Parallel()
	indextest.Run(t, func(_ testing.TB, buckets int) (index.Index, indextest.Source) {
		return memindex.NewWithOptions(memindex.Options{Buckets: buckets, Horizon: time.Hour}), nil
	})
}

// TestHorizon checks that the entries of slices beyond the horizon are not
// kept, that such a slice reads as unknown until MarkKnown, with what was
// added once it came within the horizon, and that a known slice keeps what
// is added to it whatever its distance.
func TestHorizon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Unix(1_700_000_040, 0) // a minute boundary
	entry := func(run string, at time.Duration) index.Entry {
		return index.Entry{RunID: run, TimerID: "t", DueAt: start.Add(at)}
	}
	tests := []struct {
		name  string
		steps func(t *testing.T, x *memindex.Index, clk *clock.Fake)
		at    time.Duration // the slice read: the one of start+at
		known bool
		want  []string
	}{
		{"within the horizon", func(t *testing.T, x *memindex.Index, _ *clock.Fake) {
			add(t, x, entry("a", 50*time.Second))
		}, 50 * time.Second, true, []string{"a"}},
		{"next minute, within the horizon", func(t *testing.T, x *memindex.Index, _ *clock.Fake) {
			add(t, x, entry("a", 70*time.Second))
		}, 70 * time.Second, true, []string{"a"}},
		{"beyond the horizon", func(t *testing.T, x *memindex.Index, _ *clock.Fake) {
			add(t, x, entry("a", 3*time.Minute))
		}, 3 * time.Minute, false, nil},
		{"dropped, then added within the horizon: still unknown", func(t *testing.T, x *memindex.Index, clk *clock.Fake) {
			add(t, x, entry("a", 3*time.Minute))
			clk.Set(start.Add(2 * time.Minute))
			add(t, x, entry("b", 3*time.Minute+time.Second))
		}, 3 * time.Minute, false, nil},
		{"dropped, added within the horizon, then rebuilt", func(t *testing.T, x *memindex.Index, clk *clock.Fake) {
			add(t, x, entry("a", 3*time.Minute))
			clk.Set(start.Add(2 * time.Minute))
			add(t, x, entry("b", 3*time.Minute+time.Second))
			// The rebuild: the store's runs, then MarkKnown.
			add(t, x, entry("a", 3*time.Minute))
			if err := x.MarkKnown(ctx, index.SliceOf("t", start.Add(3*time.Minute), 1)); err != nil {
				t.Fatal(err)
			}
		}, 3 * time.Minute, true, []string{"a", "b"}},
		{"known beyond the horizon keeps its entries", func(t *testing.T, x *memindex.Index, _ *clock.Fake) {
			if err := x.MarkKnown(ctx, index.SliceOf("t", start.Add(3*time.Minute), 1)); err != nil {
				t.Fatal(err)
			}
			add(t, x, entry("a", 3*time.Minute))
		}, 3 * time.Minute, true, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(start)
			x := memindex.NewWithOptions(memindex.Options{Buckets: 1, Horizon: time.Minute, Clock: clk})
			tc.steps(t, x, clk)
			s := index.SliceOf("t", start.Add(tc.at), 1)
			got, known, err := x.Range(ctx, s, s.End())
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range got {
				ids = append(ids, e.RunID)
			}
			if known != tc.known || fmt.Sprint(ids) != fmt.Sprint(tc.want) {
				t.Errorf("Range = %v, known %v; want %v, known %v", ids, known, tc.want, tc.known)
			}
		})
	}
}

func add(t *testing.T, x *memindex.Index, es ...index.Entry) {
	t.Helper()
	if err := x.Add(context.Background(), es...); err != nil {
		t.Fatal(err)
	}
}

// TestRunIDForms checks that run ids of model.RunID's form (kept as the
// bytes they spell) and others come back as they were added, ordered by id
// at one instant, and are removed by id.
func TestRunIDForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := memindex.New(1)
	due := time.Now().Truncate(time.Minute).Add(time.Minute)
	hexA := model.RunID("t", due)
	hexB := model.RunID("t", due.Add(time.Second))
	ids := []string{hexA, hexB, "odd-run", strings.ToUpper(hexA), "0123"}
	var es []index.Entry
	for _, id := range ids {
		es = append(es, index.Entry{RunID: id, TimerID: "t", DueAt: due})
	}
	add(t, x, es...)
	s := index.SliceOf("t", due, 1)
	read := func() []string {
		got, known, err := x.Range(ctx, s, s.End())
		if err != nil || !known {
			t.Fatalf("Range: known %v, %v", known, err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.RunID)
		}
		return out
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("Range = %v, want %v", got, want)
	}
	if err := x.Remove(ctx, s, hexB, "odd-run"); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == hexB || id == "odd-run" })
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("after Remove, Range = %v, want %v", got, want)
	}
}

// TestRemovedRunsGiveBackMemory: a slice whose runs were removed (the
// trigger removes each run it claims) gives back the memory they held,
// though the slice is kept (known) until its retention ends. Not
// parallel: it measures the heap.
func TestRemovedRunsGiveBackMemory(t *testing.T) {
	ctx := context.Background()
	x := memindex.New(1)
	due := time.Now().Truncate(time.Minute).Add(time.Minute)
	s := index.SliceOf("t", due, 1)
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	const runs = 100_000
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = model.RunID("t", due.Add(time.Duration(i)*time.Microsecond))
	}
	before := heap()
	for i := range ids {
		if err := x.Add(ctx, index.Entry{RunID: ids[i], TimerID: "t", DueAt: due.Add(time.Duration(i) * time.Microsecond)}); err != nil {
			t.Fatal(err)
		}
	}
	full := heap() - before
	// All but the last ten, in the trigger's batches of claims.
	for i := 0; i < runs-10; i += 500 {
		if err := x.Remove(ctx, s, ids[i:min(i+500, runs-10)]...); err != nil {
			t.Fatal(err)
		}
	}
	left := heap() - before
	if left > full/10 {
		t.Errorf("the index holds %d bytes for 10 runs left of %d, which held %d", left, runs, full)
	}
	got, known, err := x.Range(ctx, s, s.End())
	if err != nil || !known || len(got) != 10 || got[0].RunID != ids[runs-10] {
		t.Fatalf("Range = %d entries (known %v, err %v), want the last 10", len(got), known, err)
	}
	if err := x.Remove(ctx, s, ids[runs-10:]...); err != nil {
		t.Fatal(err)
	}
	if got, known, err := x.Range(ctx, s, s.End()); err != nil || !known || len(got) != 0 {
		t.Fatalf("Range after every run removed = %d entries (known %v, err %v), want none, known", len(got), known, err)
	}
	if err := x.Add(ctx, index.Entry{RunID: ids[0], TimerID: "t", DueAt: due}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := x.Range(ctx, s, s.End()); len(got) != 1 {
		t.Fatalf("Range after an add to an emptied slice = %d entries, want 1", len(got))
	}
	runtime.KeepAlive(ids)
}

// BenchmarkPoll is the trigger's use of a slice at 10,000 fires/s over 4
// buckets: a minute of 150,000 runs, polled every 200 ms for the next 3 s,
// the runs due within the next 500 ms removed (claimed) before each poll,
// and the next 200 ms of the minute after it added out of order, as a
// planning pass adds them (by run id, random within a second). One op is
// one poll; the runs/s it reports are the fires it keeps up with. "range"
// reads the next 3 s at every poll, "since" what is beyond the previous
// poll's mark (RangeSince, as the trigger reads).
func BenchmarkPoll(b *testing.B) {
	b.Run("range", func(b *testing.B) { benchPoll(b, false) })
	b.Run("since", func(b *testing.B) { benchPoll(b, true) })
}

func benchPoll(b *testing.B, since bool) {
	ctx := context.Background()
	const (
		perSecond = 2_500
		poll      = 200 * time.Millisecond
		perPoll   = perSecond / 5
	)
	start := time.Now().Truncate(time.Minute).Add(time.Minute)
	s := index.SliceOf("t", start, 1)
	var x *memindex.Index
	var ids []string
	var at []time.Time
	var added, claimed int
	var mark index.Mark
	add := func(n int) {
		es := make([]index.Entry, 0, n)
		for ; n > 0 && added < len(ids); n-- {
			es = append(es, index.Entry{RunID: ids[added], TimerID: "t", DueAt: at[added]})
			added++
		}
		slices.SortFunc(es, func(a, b index.Entry) int { return strings.Compare(a.RunID, b.RunID) })
		if err := x.Add(ctx, es...); err != nil {
			b.Fatal(err)
		}
	}
	reset := func() {
		x = memindex.New(1)
		ids, at = ids[:0], at[:0]
		for i := range 60 * perSecond {
			due := start.Add(time.Duration(i) * time.Second / perSecond).Add(time.Duration(i*7919%1000) * time.Microsecond)
			at = append(at, due)
			ids = append(ids, model.RunID(fmt.Sprint("t", i), due))
		}
		added, claimed, mark = 0, 0, index.Mark{}
		add(15 * perPoll) // the planner is 3 s ahead of the claims
	}
	reset()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if added == len(ids) && claimed >= added {
			b.StopTimer()
			reset()
			b.StartTimer()
		}
		now := start.Add(time.Duration(claimed/perPoll) * poll)
		var got []index.Entry
		var err error
		if since {
			got, mark, _, err = x.RangeSince(ctx, s, now.Add(3*time.Second), mark)
		} else {
			got, _, err = x.Range(ctx, s, now.Add(3*time.Second))
		}
		if err != nil {
			b.Fatal(err)
		}
		// The claims of the poll: the runs due within the next 500 ms, as
		// ids computed here (the reader of "since" was given them earlier).
		var claim []string
		for i := claimed; i < added && len(claim) < perPoll; i++ {
			if at[i].Before(now.Add(500 * time.Millisecond)) {
				claim = append(claim, ids[i])
			}
		}
		_ = got
		if err := x.Remove(ctx, s, claim...); err != nil {
			b.Fatal(err)
		}
		claimed += perPoll
		add(perPoll)
	}
	b.ReportMetric(float64(b.N*perPoll)/b.Elapsed().Seconds(), "runs/s")
}

// TestRangeMatchesModel checks Range against a plain map of the live
// entries through random adds (in order, out of order, re-adds with a new
// due time), removes (mostly of the first entries, as the trigger claims
// them) and ranges: the slice sorts only what was added since its last
// read and drops the removed entries at its front as it reads.
func TestRangeMatchesModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now().Truncate(time.Minute).Add(time.Minute)
	s := index.SliceOf("t", start, 1)
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		x := memindex.New(1)
		if err := x.MarkKnown(ctx, s); err != nil {
			t.Fatal(err)
		}
		live := map[string]time.Time{}
		// offered is what the reader of RangeSince was given and that is
		// unchanged since, mark where it read to.
		offered := map[string]time.Time{}
		var mark index.Mark
		var next int // the next run to add
		at := func() time.Time { return start.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond) }
		for step := range 400 {
			switch op := rng.IntN(10); {
			case op < 3: // a batch of new runs, in time order or not
				var es []index.Entry
				base := start.Add(time.Duration(step) * 100 * time.Millisecond)
				for range rng.IntN(200) {
					due := base.Add(time.Duration(rng.IntN(2_000)) * time.Millisecond)
					if rng.IntN(10) == 0 {
						due = at()
					}
					id := model.RunID(fmt.Sprint("t", next), due)
					if rng.IntN(20) == 0 {
						id = fmt.Sprint("odd-", next) // not of RunID's form
					}
					next++
					es = append(es, index.Entry{RunID: id, TimerID: "t", DueAt: due})
					live[id] = due
				}
				if err := x.Add(ctx, es...); err != nil {
					t.Fatal(err)
				}
			case op < 4: // re-adds, some with the same due time
				for id := range live {
					due := live[id]
					if rng.IntN(2) == 0 {
						due = at()
					}
					if err := x.Add(ctx, index.Entry{RunID: id, TimerID: "t", DueAt: due}); err != nil {
						t.Fatal(err)
					}
					if !due.Equal(live[id]) {
						delete(offered, id)
					}
					live[id] = due
					if rng.IntN(4) == 0 {
						break
					}
				}
			case op < 7: // the first runs claimed, and a few others
				ids := sortedIDs(live)
				n := min(len(ids), rng.IntN(150))
				rm := ids[:n]
				for range rng.IntN(5) {
					if len(ids) > 0 {
						rm = append(rm, ids[rng.IntN(len(ids))])
					}
				}
				if err := x.Remove(ctx, s, rm...); err != nil {
					t.Fatal(err)
				}
				for _, id := range rm {
					delete(live, id)
					delete(offered, id)
				}
			default:
				until := at()
				got, known, err := x.Range(ctx, s, until)
				if err != nil || !known {
					t.Fatalf("seed %d step %d: Range: known %v, err %v", seed, step, known, err)
				}
				var want []string
				for _, id := range sortedIDs(live) {
					if live[id].Before(until) {
						want = append(want, id)
					}
				}
				var ids []string
				for _, e := range got {
					ids = append(ids, e.RunID)
					if !e.DueAt.Equal(live[e.RunID]) {
						t.Fatalf("seed %d step %d: %s due %v, want %v", seed, step, e.RunID, e.DueAt, live[e.RunID])
					}
				}
				if !slices.Equal(ids, want) {
					t.Fatalf("seed %d step %d: Range until %v = %d entries %v\nwant %d %v", seed, step, until, len(ids), ids, len(want), want)
				}
				got, next, known, err := x.RangeSince(ctx, s, until, mark)
				if err != nil || !known {
					t.Fatalf("seed %d step %d: RangeSince: known %v, err %v", seed, step, known, err)
				}
				var wantNew []string
				for _, id := range want {
					if due, ok := offered[id]; !ok || !due.Equal(live[id]) || mark == (index.Mark{}) || due.UnixNano() >= mark.Until {
						wantNew = append(wantNew, id)
					}
				}
				ids = ids[:0]
				for _, e := range got {
					ids = append(ids, e.RunID)
					offered[e.RunID] = e.DueAt
				}
				if !slices.Equal(ids, wantNew) {
					t.Fatalf("seed %d step %d: RangeSince until %v = %d entries %v\nwant %d %v", seed, step, until, len(ids), ids, len(wantNew), wantNew)
				}
				mark = next
			}
		}
	}
}

// sortedIDs returns the ids of live in the index's order: due time, then
// run id.
func sortedIDs(live map[string]time.Time) []string {
	ids := make([]string, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := live[a].Compare(live[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return ids
}

// BenchmarkHeldBytes reports the heap an entry holds in the index, for
// ids of model.RunID's form (kept as the 20 bytes they spell) and for the
// 32-digit ids of nodes before migration 0015 (kept as strings beside
// their hash: the odd path), 100,000 entries of one minute a round.
// docs/performance.md has its figures.
func BenchmarkHeldBytes(b *testing.B) {
	due := time.Now().Truncate(time.Minute).Add(time.Minute)
	forms := []struct {
		name string
		id   func(i int) string
	}{
		{"runid", func(i int) string { return model.RunID("t", due.Add(time.Duration(i)*time.Microsecond)) }},
		{"legacy32", func(i int) string { return model.RunID("t", due.Add(time.Duration(i)*time.Microsecond))[:32] }},
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			const runs = 100_000
			es := make([]index.Entry, runs)
			for i := range es {
				es[i] = index.Entry{RunID: f.id(i), TimerID: "t", DueAt: due.Add(time.Duration(i) * time.Microsecond)}
			}
			var held int64
			for b.Loop() {
				x := memindex.New(1)
				before := heap()
				// Ids as a node reads them: strings of their own, which
				// the index keeps or drops.
				add := slices.Clone(es)
				for i := range add {
					add[i].RunID = strings.Clone(add[i].RunID)
				}
				if err := x.Add(context.Background(), add...); err != nil {
					b.Fatal(err)
				}
				held += heap() - before
				runtime.KeepAlive(x)
			}
			b.ReportMetric(float64(held)/float64(b.N)/runs, "B/entry")
		})
	}
}
