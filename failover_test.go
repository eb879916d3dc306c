package chime_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/servers"
	"github.com/chimehq/chime/internal/base/testenv"
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
			g := servers.RedisSentinel(t)
			return g.URL(), func() string {
				g.Primary.Kill()
				return g.Primary.Addr()
			}
		}},
		{"cluster", func(t *testing.T) (string, func() string) {
			c := servers.RedisCluster(t)
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
			execs, killedAt, killed := runFailover(t, chime.Config{DB: testenv.PostgresDatabase(t), Redis: url}, kill)
			delay, _ := checkFailover(t, execs, killedAt, false)
			t.Logf("killed Redis primary %s; %d executions, none twice; fires due from 1 s before the kill on: max delay %v", killed, len(execs), delay)
		})
	}
}

// TestPostgresFailover runs three nodes coordinated in the database on a
// PostgreSQL primary with a streaming standby (--db naming both hosts,
// target_session_attrs=read-write), SIGKILLs the primary while
// every-second timers fire and promotes the standby at once, as a failover
// manager would. With synchronous replication no fire is missed or run
// twice. With asynchronous replication a claim or a result the standby had
// not received is lost with the primary: such a fire runs again, never is
// it lost; the test logs how many did.
//
// It takes minutes (two PostgreSQL pairs set up from scratch), so it runs
// only when asked: CHIME_TEST_FAILOVER=1 go test -run TestPostgresFailover -v .
func TestPostgresFailover(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHIME_TEST_FAILOVER") != "1" {
		t.Skip("set CHIME_TEST_FAILOVER=1 to fail a PostgreSQL primary over to its standby")
	}
	for _, synchronous := range []bool{true, false} {
		name := map[bool]string{true: "sync", false: "async"}[synchronous]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pair := servers.PostgresReplicated(t, "chime", synchronous)
			execs, killedAt, _ := runFailover(t, chime.Config{DB: pair.DSN("chime"), Cluster: chime.ClusterConfig{Coordination: "db"}}, func() string {
				pair.Primary.Kill()
				pair.Promote(t)
				return "primary"
			})
			delay, again := checkFailover(t, execs, killedAt, !synchronous)
			t.Logf("%s replication: primary killed and standby promoted; %d executions, %d fires run again; fires due from 1 s before the kill on: max delay %v",
				name, len(execs), again, delay)
		})
	}
}

// TestMariaDBFailoverBehindProxy runs three nodes coordinated in the
// database on a MariaDB primary with an asynchronous replica behind
// HAProxy (--db names the proxy), SIGKILLs the primary while every-second
// timers fire and promotes the replica at once, as a failover manager
// would; HAProxy finds the primary down and sends the nodes' new
// connections to the replica. A claim or a result the replica had not
// received is lost with the primary: such a fire runs again at a higher
// attempt, never is it lost; the test logs how many did and the delay.
//
// It takes a minute or two, so it runs only when asked:
// CHIME_TEST_FAILOVER=1 go test -run TestMariaDBFailoverBehindProxy -v .
func TestMariaDBFailoverBehindProxy(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHIME_TEST_FAILOVER") != "1" {
		t.Skip("set CHIME_TEST_FAILOVER=1 to fail a MariaDB primary over to its replica behind HAProxy")
	}
	m := servers.MariaDBReplicated(t, "chime")
	execs, killedAt, _ := runFailover(t, chime.Config{DB: m.DSN("chime"), Cluster: chime.ClusterConfig{Coordination: "db"}}, func() string {
		m.Primary.Kill()
		m.Promote(t)
		return "primary"
	})
	delay, again := checkFailover(t, execs, killedAt, true)
	t.Logf("MariaDB primary killed and replica promoted behind HAProxy; %d executions, %d fires run again; fires due from 1 s before the kill on: max delay %v",
		len(execs), again, delay)
}

// execution is one call of a failover test's handler.
type execution struct {
	run, timer, node string
	attempt          int
	scheduled        time.Time
	at               time.Time
}

// failoverTimers is how many every-second timers runFailover's cluster
// fires.
const failoverTimers = 10

// runFailover runs three nodes of base (their own node ids and data dirs)
// with failoverTimers every-second handler timers, calls fault once the
// fires flow, lets the cluster run 15 s more, stops it and returns every
// execution, when the fault began and what it says it did.
func runFailover(t *testing.T, base chime.Config, fault func() string) ([]execution, time.Time, string) {
	var (
		mu    sync.Mutex
		execs []execution
	)
	ctx := context.Background()
	var nodes []*chime.Node
	for i := range 3 {
		cfg := base
		cfg.Cluster.NodeID, cfg.App = fmt.Sprintf("ha-%d", i), "ha"
		n := newNode(t, cfg)
		id := n.ID()
		n.HandleFunc("count", func(ctx context.Context, run *chime.Run) ([]byte, error) {
			mu.Lock()
			execs = append(execs, execution{run: run.ID, timer: run.TimerID, node: id, attempt: run.Attempt, scheduled: run.ScheduledAt, at: time.Now()})
			mu.Unlock()
			return nil, nil
		})
		for j := range failoverTimers {
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
	servers.Eventually(t, 30*time.Second, "fires from the cluster", func() (bool, string) {
		return count() >= 5*failoverTimers, fmt.Sprint(count(), " fires")
	})
	faultAt := time.Now()
	did := fault()
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
	return slices.Clone(execs), faultAt, did
}

// checkFailover fails t when a fire of a timer is missing from its first
// fire to 10 s after the fault, or ran twice (with again, a fire may run
// again at a higher attempt: again counts those). It returns the largest
// delay of the fires due from 1 s before the fault on.
func checkFailover(t *testing.T, execs []execution, faultAt time.Time, again bool) (time.Duration, int) {
	t.Helper()
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
	ranAgain := 0
	for id, es := range byRun {
		if len(es) > 1 {
			ranAgain++
			attempts := map[int]bool{}
			for _, e := range es {
				if attempts[e.attempt] || !again {
					t.Errorf("run %s executed %d times: %+v", id, len(es), es)
					break
				}
				attempts[e.attempt] = true
			}
		}
		if d := es[0].at.Sub(es[0].scheduled); !es[0].scheduled.Before(faultAt.Add(-time.Second)) && d > maxDelay {
			maxDelay = d
		}
	}
	if len(seconds) != failoverTimers {
		t.Errorf("%d timers fired, want %d", len(seconds), failoverTimers)
	}
	var missing []string
	for timer, secs := range seconds {
		first := slices.Min(slices.Collect(maps.Keys(secs)))
		for s := first; s <= faultAt.Add(10*time.Second).Unix(); s++ {
			if !secs[s] {
				missing = append(missing, fmt.Sprintf("%s %s", time.Unix(s, 0).UTC().Format("15:04:05"), timer))
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("fires missing after the fault at %s: %v", faultAt.UTC().Format("15:04:05.000"), missing)
	}
	return maxDelay.Round(time.Millisecond), ranAgain
}
