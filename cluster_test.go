package chime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/testenv"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// TestThreeReplicas runs three nodes of one application on one MariaDB
// database and one Redis. Each upserts the same timers at start-up; the
// cluster must hold one timer per name and run each fire exactly once, on
// any replica.
func TestThreeReplicas(t *testing.T) {
	db, rds := testenv.MySQLDatabase(t), testenv.RedisDB(t)
	var (
		mu    sync.Mutex
		fires = map[string][]string{} // run id -> nodes that ran it
	)
	ctx := context.Background()
	var nodes []*chime.Node
	for i := range 3 {
		n := newNode(t, chime.Config{DB: db, Redis: rds, NodeID: fmt.Sprintf("replica-%d", i), App: "billing"})
		id := n.ID()
		n.HandleFunc("count", func(ctx context.Context, run *chime.Run) ([]byte, error) {
			mu.Lock()
			fires[run.ID] = append(fires[run.ID], id)
			mu.Unlock()
			return []byte(id), nil
		})
		for j := range 3 {
			if err := n.Every(fmt.Sprintf("every-second-%d", j), "@every 1s", "count"); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if err := n.Start(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, n := range nodes {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			n.Shutdown(sctx)
			cancel()
		}
	}()
	// The nodes run side by side for a while: the span of fires is the
	// behaviour under test (each fire runs once, on one of the nodes).
	time.Sleep(6 * time.Second) // behaviour under test (see above)

	st := nodes[0].Store()
	timers, _, err := st.ListTimers(ctx, store.TimerFilter{App: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(timers) != 3 {
		t.Fatalf("%d timers, want 3", len(timers))
	}
	succeeded := 0
	for _, tm := range timers {
		runs, _, err := st.ListRuns(ctx, store.RunFilter{TimerID: tm.ID, Status: model.RunSucceeded})
		if err != nil {
			t.Fatal(err)
		}
		succeeded += len(runs)
	}
	mu.Lock()
	defer mu.Unlock()
	ran := map[string]bool{}
	for id, by := range fires {
		if len(by) != 1 {
			t.Errorf("run %s ran %d times, on %v", id, len(by), by)
		}
		for _, n := range by {
			ran[n] = true
		}
	}
	if len(fires) < 9 {
		t.Fatalf("only %d fires in 6s of 3 every-second timers", len(fires))
	}
	if succeeded < len(fires)-3 { // the last few may still be recording
		t.Errorf("%d succeeded runs recorded for %d fires", succeeded, len(fires))
	}
	t.Logf("%d fires, ran on %d replicas", len(fires), len(ran))
}
