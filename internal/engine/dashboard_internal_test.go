package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store/sqlstore"
)

// TestStatsFlushKeepsEarlierMinutes: an engine whose only write of its
// dashboard minutes is the flush at Stop, in the minute after the one it
// started in, writes both minutes (the first write used to start at its
// own minute and drop the minute before).
func TestStatsFlushKeepsEarlierMinutes(t *testing.T) {
	t.Parallel()
	st, err := sqlstore.Open(context.Background(), "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := clock.NewFake(time.Date(2026, 12, 2, 0, 40, 58, 0, time.UTC))
	clk := clock.NewCorrected(fake)
	m := metrics.New(nil)
	e := &Engine{cfg: Config{Store: st, Metrics: m, NodeID: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, clock: clk}
	w := newStatsWriter(e)
	m.Series.Fire(clk.Now().Add(time.Second), "t1", "succeeded") // 00:40:59
	fake.Advance(2 * time.Second)
	m.Series.Fire(clk.Now(), "t1", "succeeded") // 00:41:00
	w.flush()
	rows, err := st.StatsMinutes(context.Background(), clk.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var fires int64
	for _, r := range rows {
		fires += r.Fires["succeeded"]
	}
	if len(rows) != 2 || fires != 2 {
		t.Errorf("stored %d minutes with %d fires, want 2 minutes with 2: %+v", len(rows), fires, rows)
	}
}
