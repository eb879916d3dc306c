package chime_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/testenv"
)

// TestRedisFailover runs three nodes on one PostgreSQL database that
// coordinate through a highly available Redis, a Sentinel group or a Redis
// Cluster, and SIGKILLs the Redis primary (of the Sentinel group, or one of
// the cluster's) while every-second timers fire. Sentinel promotes the
// replica and the nodes follow it; the cluster promotes the killed
// primary's replica. No fire may be missed or executed twice, and the
// delay of the fires due around the failover is logged (docs/cluster.md
// quotes it).
func TestRedisFailover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start func(t *testing.T) (url string, kill func() string)
	}{
		{"sentinel", func(t *testing.T) (string, func() string) {
			g := testenv.RedisSentinel(t)
			return g.URL(), func() string {
				g.Primary.Kill()
				return g.Primary.Addr()
			}
		}},
		{"cluster", func(t *testing.T) (string, func() string) {
			c := testenv.RedisCluster(t)
			return c.URL(), func() string {
				ps, err := c.Primaries()
				if err != nil || len(ps) == 0 {
					t.Fatalf("cluster primaries: %v", err)
				}
				ps[0].Kill()
				return ps[0].Addr()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, kill := tt.start(t)
			testRedisFailover(t, url, kill)
		})
	}
}

type execution struct {
	run, timer, node string
	attempt          int
	scheduled        time.Time
	at               time.Time
}

func testRedisFailover(t *testing.T, redisURL string, kill func() string) {
	db := testenv.PostgresDatabase(t)
	const timers = 10
	var (
		mu    sync.Mutex
		execs []execution
	)
	ctx := context.Background()
	var nodes []*chime.Node
	for i := range 3 {
		n := newNode(t, chime.Config{DB: db, Redis: redisURL, NodeID: fmt.Sprintf("ha-%d", i), App: "ha"})
		id := n.ID()
		n.HandleFunc("count", func(ctx context.Context, run *chime.Run) ([]byte, error) {
			mu.Lock()
			execs = append(execs, execution{run: run.ID, timer: run.TimerID, node: id, attempt: run.Attempt, scheduled: run.ScheduledAt, at: time.Now()})
			mu.Unlock()
			return nil, nil
		})
		for j := range timers {
			if err := n.Every(fmt.Sprintf("every-second-%d", j), "@every 1s", "count"); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		start(t, n)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(execs) }
	testenv.Eventually(t, 30*time.Second, "fires from the cluster", func() (bool, string) {
		return count() >= 5*timers, fmt.Sprint(count(), " fires")
	})
	killedAt := time.Now()
	killed := kill()
	// The cluster runs on through the failover and after it: the span of
	// fires is the behaviour under test.
	time.Sleep(15 * time.Second) // behaviour under test (see above)
	for _, n := range nodes {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n.Shutdown(sctx)
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	byRun := map[string][]execution{}
	seconds := map[string]map[int64]bool{} // timer -> seconds with an execution
	for _, e := range execs {
		byRun[e.run] = append(byRun[e.run], e)
		if seconds[e.timer] == nil {
			seconds[e.timer] = map[int64]bool{}
		}
		seconds[e.timer][e.scheduled.Unix()] = true
	}
	var maxDelay time.Duration
	for id, es := range byRun {
		if len(es) > 1 {
			t.Errorf("run %s executed %d times: %+v", id, len(es), es)
		}
		if d := es[0].at.Sub(es[0].scheduled); !es[0].scheduled.Before(killedAt.Add(-time.Second)) && d > maxDelay {
			maxDelay = d
		}
	}
	// Every timer fires every second: each second from its first fire to
	// 10 s after the kill has one execution.
	if len(seconds) != timers {
		t.Errorf("%d timers fired, want %d", len(seconds), timers)
	}
	var missing []string
	for timer, secs := range seconds {
		first := slices.Min(slices.Collect(maps.Keys(secs)))
		for s := first; s <= killedAt.Add(10*time.Second).Unix(); s++ {
			if !secs[s] {
				missing = append(missing, fmt.Sprintf("%s %s", time.Unix(s, 0).UTC().Format("15:04:05"), timer))
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("fires missing after killing the Redis primary %s at %s: %v", killed, killedAt.UTC().Format("15:04:05.000"), missing)
	}
	t.Logf("killed Redis primary %s; %d fires, none twice; fires due from 1 s before the kill on: max delay %v",
		killed, len(byRun), maxDelay.Round(time.Millisecond))
}
