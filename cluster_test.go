package chime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// TestThreeReplicas runs three nodes of one application on one database,
// coordinated through Redis or through the database alone. Each upserts the
// same timers at start-up; the cluster must hold one timer per name, run
// each fire exactly once, on any replica, and never let two nodes hold one
// slice.
func TestThreeReplicas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(t *testing.T) chime.Config
		mode string
	}{
		{"mariadb+redis", func(t *testing.T) chime.Config {
			return chime.Config{DB: testenv.MySQLDatabase(t), Redis: testenv.RedisDB(t)}
		}, model.CoordinationRedis},
		{"mariadb", func(t *testing.T) chime.Config { return chime.Config{DB: testenv.MySQLDatabase(t)} }, model.CoordinationDB},
		{"postgres", func(t *testing.T) chime.Config {
			return chime.Config{DB: testenv.PostgresDatabase(t), Cluster: chime.ClusterConfig{Coordination: model.CoordinationDB}}
		}, model.CoordinationDB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testThreeReplicas(t, tt.cfg(t), tt.mode)
		})
	}
}

func testThreeReplicas(t *testing.T, base chime.Config, mode string) {
	var (
		mu    sync.Mutex
		fires = map[string][]string{} // run id -> nodes that ran it
	)
	ctx := context.Background()
	var nodes []*chime.Node
	for i := range 3 {
		cfg := base
		cfg.Cluster.NodeID, cfg.App = fmt.Sprintf("replica-%d", i), "billing"
		n := newNode(t, cfg)
		if n.Coordination() != mode {
			t.Fatalf("coordination %q, want %q", n.Coordination(), mode)
		}
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

	st := nodeparts.Of(nodes[0]).Store
	// The nodes split the slices: a snapshot of the heartbeats in which no
	// slice is held twice and more than one node holds slices comes within
	// a few heartbeats (a heartbeat may lag a handover by one interval).
	var split string
	for deadline := time.Now().Add(15 * time.Second); split == "" && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		live, err := st.ListNodes(ctx, time.Now().Add(-10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		holder, holders := map[string]string{}, map[string]bool{}
		twice := false
		for _, n := range live {
			if n.Coordination != mode {
				t.Fatalf("node %s publishes coordination %q, want %q", n.ID, n.Coordination, mode)
			}
			for _, sl := range n.Slices {
				if _, ok := holder[sl]; ok {
					twice = true
				}
				holder[sl], holders[n.ID] = n.ID, true
			}
		}
		if !twice && len(holders) > 1 {
			split = fmt.Sprint(holder)
		}
	}
	if split == "" {
		t.Errorf("the nodes never split the slices between them")
	}
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
