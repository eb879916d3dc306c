package api_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
)

// BenchmarkStats measures GET /api/v1/stats on a SQLite store of a million
// runs (CHIME_BENCH_STATS_RUNS sets another number) of 1,000 timers, 98%
// succeeded, 1% failed, 1% pending, each with 200 bytes of output:
//
//   - store: Store.Stats, the full count by status that the API once ran
//     on every call;
//   - api: the API's answer, from its counts (statsCache), as every call
//     but one per StatsMaxAge gets it;
//   - prune-1000: one PruneRuns call of store.MaxPruneBatch runs, the
//     retention's unit of work; on SQLite ten statements of 100;
//   - prune-100: one call of 100 runs, one statement: how long claims and
//     results may wait behind retention on SQLite.
//
// The fill takes a while (one INSERT … SELECT over a recursive sequence);
// run it alone: go test ./internal/app/api -run '^$' -bench Stats -benchtime 5x.
func BenchmarkStats(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("CHIME_BENCH_STATS_RUNS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	file := filepath.Join(b.TempDir(), "chime.db")
	st, err := sqlstore.Open(ctx, "sqlite://"+file, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	fill(b, file, n)
	b.Logf("filled %d runs in %v", n, time.Since(start).Round(time.Millisecond))

	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			if _, err := st.Stats(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("api", func(b *testing.B) {
		h := api.New(api.Config{Store: st, Engine: &apitest.FakeEngine{Store: st}, Auth: api.AuthOff, Logger: discardLogger()}).Handler()
		get := func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/stats", nil))
			if w.Code != http.StatusOK {
				b.Fatalf("GET /api/v1/stats: %d %s", w.Code, w.Body)
			}
		}
		get() // the first call of a node counts
		b.ResetTimer()
		for b.Loop() {
			get()
		}
	})
	timer := 0 // each call prunes a timer no call pruned before
	for _, limit := range []int{store.MaxPruneBatch, 100} {
		b.Run(fmt.Sprintf("prune-%d", limit), func(b *testing.B) {
			for b.Loop() {
				p := store.RunPrune{TimerID: "t" + strconv.Itoa(timer%1000), Before: time.Now(), Limit: limit}
				timer++
				if _, err := st.PruneRuns(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fill inserts n finished runs into the SQLite file, directly.
func fill(b *testing.B, file string, n int) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	_, err = db.Exec(`WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < ? - 1)
		INSERT INTO runs (id, timer_id, scheduled_at, due_at, status, attempt, output, created_at)
		SELECT printf('%020d', i), 't' || (i % 1000), ? + i * 1000000, ? + i * 1000000,
			CASE i % 100 WHEN 0 THEN 'failed' WHEN 1 THEN 'pending' ELSE 'succeeded' END, 1, ?, ?
		FROM seq`, n, first, first, strings.Repeat("o", 200), first)
	if err != nil {
		b.Fatal(err)
	}
}
