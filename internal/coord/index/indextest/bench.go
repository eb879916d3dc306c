package indextest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/model"
)

// Bench runs the shared benchmarks against the indexes o returns, one
// sub-benchmark each:
//
//   - Add/batch=1 and Add/batch=100: adds of entries spread over a minute,
//     1,000 timers and 16 buckets, reported per entry too (ns/entry);
//   - AddParallel: single adds from GOMAXPROCS goroutines;
//   - Range: half of a slice of 1,000 runs;
//   - AddRange: one Add, then one Range of the same slice, the worst case
//     for an index that sorts a slice lazily.
//
// An index that reads the store (it has a Source) does nothing on Add, so
// only Range is measured for it; the others are skipped.
func Bench(b *testing.B, o Open) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("Add/batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			x := benchOpen(b, o, 16, true)
			es := benchEntries(1 << 16)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := (i * batch) % (len(es) - batch)
				if err := x.Add(ctx, es[j:j+batch]...); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*batch), "ns/entry")
		})
	}

	b.Run("AddParallel", func(b *testing.B) {
		ctx := context.Background()
		x := benchOpen(b, o, 16, true)
		es := benchEntries(1 << 16)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if err := x.Add(ctx, es[i%len(es)]); err != nil {
					b.Error(err)
					return
				}
				i += 7
			}
		})
	})

	b.Run("Range", func(b *testing.B) {
		ctx := context.Background()
		x := benchOpen(b, o, 1, false)
		es := benchEntries(1000)
		if err := x.add(ctx, es...); err != nil {
			b.Fatal(err)
		}
		s := index.SliceOf(es[0].TimerID, es[0].DueAt, 1)
		until := es[500].DueAt
		b.ReportAllocs()
		for b.Loop() {
			got, _, err := x.Range(ctx, s, until)
			if err != nil || len(got) != 500 {
				b.Fatalf("Range = %d, %v", len(got), err)
			}
		}
	})

	b.Run("AddRange", func(b *testing.B) {
		ctx := context.Background()
		x := benchOpen(b, o, 1, true)
		es := benchEntries(1000)
		if err := x.Add(ctx, es...); err != nil {
			b.Fatal(err)
		}
		s := index.SliceOf(es[0].TimerID, es[0].DueAt, 1)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			e := es[i%len(es)]
			e.DueAt = e.DueAt.Add(time.Duration(i%7) * time.Millisecond)
			if err := x.Add(ctx, e); err != nil {
				b.Fatal(err)
			}
			if _, _, err := x.Range(ctx, s, s.Start().Add(time.Second)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// benchOpen opens an index for a benchmark; one that measures Add is
// skipped for an index that reads the store.
func benchOpen(b *testing.B, o Open, buckets int, adds bool) subject {
	b.Helper()
	x := open(b, o, buckets)
	if adds && x.src != nil {
		b.Skip("the index reads the store: Add does nothing")
	}
	return x
}

// benchEntries returns n entries of 1,000 timers due over the next minute,
// one millisecond apart, their run ids of the form the planner gives them
// (model.RunID).
func benchEntries(n int) []index.Entry {
	start := base()
	es := make([]index.Entry, n)
	for i := range es {
		timer := fmt.Sprintf("timer-%d", i%1000)
		due := start.Add(time.Duration(i%60_000) * time.Millisecond)
		es[i] = index.Entry{RunID: model.RunID(timer, due.Add(time.Duration(i/60_000)*time.Minute)), TimerID: timer, DueAt: due}
	}
	return es
}
