package e2e

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// fireResp is GET /api/v1/runs/{id} of a fire split into shards.
type fireResp struct {
	ID         string      `json:"id"`
	Status     string      `json:"status"`
	FireID     string      `json:"fire_id"`
	ShardTotal int         `json:"shard_total"`
	Shards     []shardResp `json:"shards"`
}

type shardResp struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Attempt    int    `json:"attempt"`
	Node       string `json:"node"`
	FireID     string `json:"fire_id"`
	ShardIndex *int   `json:"shard_index"`
	ShardTotal int    `json:"shard_total"`
}

// TestShardTakenOverAfterKill runs three nodes on MariaDB and Redis and a
// timer whose fire runs as three shards, one per node. The receiver holds
// the callback of n3's shard; n3 is killed with it in flight. The shard is
// taken over like any run (its lease expires, a sweeper requeues it) and
// delivered again, same run id, attempt 2, from another node; the fire
// then succeeds with its three shards.
func TestShardTakenOverAfterKill(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDatabase(t)
	redisURL := testenv.RedisDB(t)
	var (
		once sync.Once
		held = make(chan callback, 1)
	)
	rcv := newReceiver(t, func(c callback, nth int) int {
		if c.Node == "n3" && c.Attempt == 1 {
			once.Do(func() { held <- c })
			<-c.Ctx.Done() // until the sender dies
		}
		return http.StatusOK
	})
	extra := []string{"--lease", "3s"}
	nodes := startFleet(t, dsn, redisURL, extra)

	req := httpTimer("e2e", "sharded", "@at "+time.Now().Add(3*time.Second).UTC().Format(time.RFC3339Nano), "POST", rcv.url("/shard"), "", nil)
	req["shards"] = 3
	tm := createTimer(t, nodes[0].url(""), req)

	var c callback
	select {
	case c = <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("no shard delivered by n3; callbacks: %v", rcv.snapshot())
	}
	nodes[2].stop(syscall.SIGKILL)
	t.Logf("SIGKILL n3 holding shard %s (%s)", c.RunID, c.Header.Get("X-Chime-Shard-Index"))

	var fire fireResp
	waitUntil(t, 30*time.Second, "the sharded fire succeeded", func() (bool, string) {
		for _, r := range timerRuns(t, nodes[0].url(""), tm.ID) {
			var f fireResp
			callJSON(t, "GET", nodes[0].url("/api/v1/runs/"+r.ID), nil, http.StatusOK, &f)
			if f.FireID == f.ID && f.ID != "" {
				fire = f
				return f.Status == "succeeded", "fire " + f.Status
			}
		}
		return false, "no fire yet"
	})
	if fire.ShardTotal != 3 || len(fire.Shards) != 3 {
		t.Fatalf("fire = %+v", fire)
	}
	nodesOf := map[string]bool{}
	for i, sh := range fire.Shards {
		if sh.ShardIndex == nil || *sh.ShardIndex != i || sh.ShardTotal != 3 || sh.Status != "succeeded" {
			t.Errorf("shard %d = %+v", i, sh)
		}
		if sh.ID == c.RunID {
			if sh.Attempt != 2 || sh.Node == "n3" {
				t.Errorf("the shard n3 held = %+v, want attempt 2 on another node", sh)
			}
		} else if sh.Attempt != 1 {
			t.Errorf("shard %d = %+v, want attempt 1", i, sh)
		}
		nodesOf[sh.Node] = true
	}
	var again []callback
	for _, d := range rcv.snapshot() {
		if d.RunID == c.RunID {
			again = append(again, d)
		}
	}
	if len(again) != 2 || again[1].Attempt < 2 || again[1].Node == "n3" ||
		again[1].Header.Get("X-Chime-Shard-Index") != c.Header.Get("X-Chime-Shard-Index") {
		t.Errorf("deliveries of the shard n3 held: %v", again)
	}
}

// TestPlacedShardReplacedWithin5s runs three nodes on MariaDB and Redis and
// SIGKILLs n3 a second before a fire of three shards, one per node: the
// fire is split over the nodes of the splitting node's last heartbeat, n3
// among them, so one shard is placed on a node that will never claim it.
// The sweepers free it once n3's last heartbeat is 3 s old and another node
// runs it: every shard is delivered within 5 s of the kill, none by n3.
func TestPlacedShardReplacedWithin5s(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDatabase(t)
	redisURL := testenv.RedisDB(t)
	rcv := newReceiver(t, func(callback, int) int { return http.StatusOK })
	nodes := startFleet(t, dsn, redisURL, nil)

	at := time.Now().Add(3 * time.Second)
	req := httpTimer("e2e", "sharded", "@at "+at.UTC().Format(time.RFC3339Nano), "POST", rcv.url("/shard"), "", nil)
	req["shards"] = 3
	createTimer(t, nodes[0].url(""), req)
	time.Sleep(time.Until(at.Add(-time.Second))) // behaviour under test: the kill comes a second before the fire
	killed := time.Now()
	nodes[2].stop(syscall.SIGKILL)

	first := map[string]callback{} // by shard index
	waitUntil(t, 20*time.Second, "every shard delivered", func() (bool, string) {
		for _, c := range rcv.snapshot() {
			if i := c.Header.Get("X-Chime-Shard-Index"); i != "" {
				if _, ok := first[i]; !ok {
					first[i] = c
				}
			}
		}
		return len(first) == 3, ""
	})
	for i, c := range first {
		t.Logf("shard %s: delivered by %s, attempt %d, %v after the kill", i, c.Node, c.Attempt, c.Received.Sub(killed).Round(time.Millisecond))
		if c.Node == "n3" {
			t.Errorf("shard %s delivered by the killed node n3", i)
		}
		if d := c.Received.Sub(killed); d > 5*time.Second {
			t.Errorf("shard %s delivered %v after n3's kill (by %s, attempt %d), want within 5s", i, d.Round(time.Millisecond), c.Node, c.Attempt)
		}
	}
}

// startFleet starts nodes n1, n2 and n3 on dsn and redisURL with the extra
// flags, and returns once all three are listed and a heartbeat (2 s) more
// has passed, so that every node's own view of the others (read at its
// heartbeat, which no route shows) holds all three.
func startFleet(t *testing.T, dsn, redisURL string, extra []string) []*node {
	t.Helper()
	var nodes []*node
	for i := 1; i <= 3; i++ {
		id := "n" + string(rune('0'+i))
		nodes = append(nodes, startNode(t, id, nodeConfig{DB: dsn, Redis: redisURL, NodeID: id, Extra: extra}))
	}
	waitUntil(t, 20*time.Second, "three live nodes", func() (bool, string) {
		var list struct {
			Nodes []nodeResp `json:"nodes"`
		}
		callJSON(t, "GET", nodes[0].url("/api/v1/nodes"), nil, http.StatusOK, &list)
		return len(list.Nodes) == 3, ""
	})
	time.Sleep(2500 * time.Millisecond) // behaviour under test: the nodes' views refresh only at their heartbeats
	return nodes
}
