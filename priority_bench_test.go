package chime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/testenv"
)

// BenchmarkPrioritySaturated saturates a node's pool with every-second
// timers and measures the fire delay (the handler's start less the run's
// scheduled instant) of each priority, over the runs that start in a 10 s
// window after 2 s of warm-up: 10 priority-9 timers and 250 priority-0
// ones, on a pool of 20 whose handlers take 100 ms each, so 260 fires a
// second meet room for at most 200. With priorities the priority-9 runs
// keep their delay and the priority-0 ones absorb the wait; the "equal"
// case gives every timer the default priority, for comparison. Each
// iteration runs 12 s: run it with -benchtime=1x.
//
//	go test -run '^$' -bench PrioritySaturated -benchtime 1x .
func BenchmarkPrioritySaturated(b *testing.B) {
	for _, tc := range []struct {
		name      string
		high, low int
	}{{"priorities", 9, 0}, {"equal", 5, 5}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				high, low := runSaturated(b, tc.high, tc.low)
				b.ReportMetric(pct(high, 50), "high-p50-ms")
				b.ReportMetric(pct(high, 99), "high-p99-ms")
				b.ReportMetric(pct(low, 50), "low-p50-ms")
				b.ReportMetric(pct(low, 99), "low-p99-ms")
				b.ReportMetric(float64(len(high)+len(low))/10, "fires/s")
				b.Logf("%s: high (priority %d) %d fires p50 %.1f ms p99 %.1f ms; low (priority %d) %d fires p50 %.1f ms p99 %.1f ms",
					tc.name, tc.high, len(high), pct(high, 50), pct(high, 99), tc.low, len(low), pct(low, 50), pct(low, 99))
			}
		})
	}
}

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100]) / float64(time.Millisecond)
}

func runSaturated(b *testing.B, highPrio, lowPrio int) (high, low []time.Duration) {
	const (
		nHigh, nLow = 10, 250
		work        = 100 * time.Millisecond
		warmup      = 2 * time.Second
		window      = 10 * time.Second
	)
	dir := b.TempDir()
	n, err := chime.New(chime.Config{DataDir: dir, DB: "sqlite://" + dir + "/chime.db", Logger: quiet(), Actions: chime.ActionsConfig{PoolSize: 20}})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var from, until time.Time
	n.HandleFunc("work", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		start := time.Now()
		d := start.Sub(run.ScheduledAt)
		mu.Lock()
		if !from.IsZero() && !start.Before(from) && start.Before(until) {
			if run.Timer.Name[0] == 'h' {
				high = append(high, d)
			} else {
				low = append(low, d)
			}
		}
		mu.Unlock()
		time.Sleep(work)
		return nil, nil
	})
	ctx := context.Background()
	for i := range nHigh + nLow {
		name, p := fmt.Sprintf("h%03d", i), highPrio
		if i >= nHigh {
			name, p = fmt.Sprintf("l%03d", i), lowPrio
		}
		if _, err := n.Upsert(ctx, chime.Timer{Name: name, Schedule: "@every 1s", Action: chime.HandlerAction("work", nil), Priority: &p}); err != nil {
			b.Fatal(err)
		}
	}
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer n.Shutdown(context.Background())
	mu.Lock()
	from = time.Now().Add(warmup).Truncate(time.Second)
	until = from.Add(window)
	mu.Unlock()
	testenv.Eventually(b, window+warmup+10*time.Second, "the window's end", func() (bool, string) {
		return time.Now().After(until), ""
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(high), slices.Clone(low)
}
