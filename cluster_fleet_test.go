package chime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// fleet starts n nodes on one MariaDB database and one Redis; register,
// when set, registers the handlers of node i before it starts. It returns
// the nodes and the REST API of the first one.
func fleet(t *testing.T, n int, register func(i int, node *chime.Node)) ([]*chime.Node, string) {
	t.Helper()
	db, rds := testenv.MySQLDatabase(t), testenv.RedisDB(t)
	var nodes []*chime.Node
	for i := range n {
		node := newNode(t, chime.Config{DB: db, Redis: rds, App: "fleet", Cluster: chime.ClusterConfig{NodeID: fmt.Sprintf("fleet-%d", i)}})
		if register != nil {
			register(i, node)
		}
		nodes = append(nodes, node)
	}
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Go(func() { start(t, node) })
	}
	wg.Wait()
	n0 := nodes[0]
	srv := httptest.NewServer(api.New(api.Config{Store: nodeparts.Of(n0).Store, Engine: nodeparts.Of(n0).Engine, Clock: nodeparts.Of(n0).Engine.Clock(),
		Logger: quiet(), HandlerExists: n0.HandlerExists, ValidateArgs: n0.ValidateArgs}).Handler())
	t.Cleanup(srv.Close)
	base := srv.URL + "/api/v1"
	// Every node lists every other, with its handlers, before the test
	// begins: each reads the node list at its heartbeat.
	testenv.Eventually(t, 15*time.Second, "every node sees the whole fleet", func() (bool, string) {
		for _, node := range nodes {
			ns, err := nodeparts.Of(node).Engine.Nodes(context.Background())
			if err != nil || len(ns) != n {
				return false, fmt.Sprintf("%s sees %d nodes (%v)", node.ID(), len(ns), err)
			}
		}
		return true, ""
	})
	time.Sleep(2500 * time.Millisecond) // one more heartbeat (2 s): each node's cached view has the others too
	return nodes, base
}

// rest sends a JSON request and decodes the answer into out (when not nil);
// it returns the status.
func rest(t *testing.T, method, url string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func handlerTimer(name, schedule, handler string) map[string]any {
	return map[string]any{"app": "fleet", "name": name, "schedule": schedule,
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": handler}}}
}

// TestFleetHandlerOnOneNode: a handler registered on one node of three is
// advertised in GET /nodes; a timer for it is created through a node that
// lacks it, and its runs are run only where the handler is. A timer whose
// handler no node has is refused (400 on action.handler.name) unless
// ?allow_unknown_handler=true, and then its run ends at once, skipped
// (handler_missing), at its first attempt, though its retry policy allows
// five.
func TestFleetHandlerOnOneNode(t *testing.T) {
	var mu sync.Mutex
	ranOn := map[string]string{} // run id -> node
	nodes, base := fleet(t, 3, func(i int, n *chime.Node) {
		if i != 2 {
			return
		}
		id := n.ID()
		n.HandleFunc("solo", func(ctx context.Context, run *chime.Run) ([]byte, error) {
			mu.Lock()
			ranOn[run.ID] = id
			mu.Unlock()
			return nil, nil
		})
	})
	var list api.NodeList
	if code := rest(t, "GET", base+"/nodes", nil, &list); code != http.StatusOK {
		t.Fatalf("GET /nodes: %d", code)
	}
	for _, n := range list.Nodes {
		want := []string{}
		if n.ID == nodes[2].ID() {
			want = []string{"solo"}
		}
		if !slices.Equal(n.Handlers, want) {
			t.Errorf("GET /nodes: node %s handlers %v, want %v", n.ID, n.Handlers, want)
		}
	}

	var tm api.Timer
	if code := rest(t, "POST", base+"/timers", handlerTimer("solo", "@every 1s", "solo"), &tm); code != http.StatusCreated {
		t.Fatalf("create the solo timer through a node without the handler: %d", code)
	}
	testenv.Eventually(t, 20*time.Second, "six runs of the solo timer succeeded", func() (bool, string) {
		runs, _, err := nodeparts.Of(nodes[0]).Store.ListRuns(context.Background(), store.RunFilter{TimerID: tm.ID, Status: model.RunSucceeded})
		if err != nil || len(runs) < 6 {
			return false, fmt.Sprintf("%d succeeded (%v)", len(runs), err)
		}
		return true, ""
	})
	runs, _, err := nodeparts.Of(nodes[0]).Store.ListRuns(context.Background(), store.RunFilter{TimerID: tm.ID})
	if err != nil {
		t.Fatal(err)
	}
	var late time.Duration // handed over ahead of its instant, a run starts on time on its node
	for _, r := range runs {
		if r.Status == model.RunSucceeded && (r.Node != nodes[2].ID() || r.Attempt != 1) {
			t.Errorf("run %s: node %s attempt %d, want %s at attempt 1", r.ID, r.Node, r.Attempt, nodes[2].ID())
		}
		if r.Status == model.RunSucceeded && r.StartedAt != nil {
			late = max(late, r.StartedAt.Sub(r.ScheduledAt))
		}
		if r.Status == model.RunFailed {
			t.Errorf("run %s failed: %s", r.ID, r.Error)
		}
	}
	t.Logf("handed-off runs started at most %v after their instants", late)
	if late > time.Second {
		t.Errorf("a handed-off run started %v after its instant", late)
	}
	mu.Lock()
	for id, on := range ranOn {
		if on != nodes[2].ID() {
			t.Errorf("run %s ran on %s", id, on)
		}
	}
	mu.Unlock()

	var bad api.ErrorBody
	if code := rest(t, "POST", base+"/timers", handlerTimer("ghost", "@every 1s", "ghost"), &bad); code != http.StatusBadRequest ||
		bad.Error.Field != "action.handler.name" || !strings.Contains(bad.Error.Message, "allow_unknown_handler") {
		t.Errorf("create a timer of a handler no node has: %d %+v", code, bad)
	}
	if code := rest(t, "POST", base+"/timers?allow_unknown_handler=maybe", handlerTimer("ghost", "@every 1s", "ghost"), &bad); code != http.StatusBadRequest ||
		bad.Error.Field != "allow_unknown_handler" {
		t.Errorf("allow_unknown_handler=maybe: %d %+v", code, bad)
	}
	ghost := handlerTimer("ghost", at(2*time.Second), "ghost")
	ghost["retry"] = map[string]any{"max_attempts": 5, "backoff": "1s"}
	if code := rest(t, "POST", base+"/timers?allow_unknown_handler=true", ghost, &tm); code != http.StatusCreated {
		t.Fatalf("create a timer of a handler no node has, allowed: %d", code)
	}
	r := waitRun(t, nodes[0], tm.ID, 15*time.Second)
	if r.Status != model.RunSkipped || r.Reason != model.SkipHandlerMissing || r.Attempt != 1 || !strings.Contains(r.Error, `no such handler "ghost" on any live node`) {
		t.Errorf("run of the ghost handler = %s at attempt %d: %q, want failed at once", r.Status, r.Attempt, r.Error)
	}
}

// TestFleetBroadcast: a broadcast handler timer runs each fire once on
// each of three nodes, each shard with its index and the total in
// run.Shard, under one fire that succeeds when all three did; GET
// /runs/{fire} shows the shards. An HTTP broadcast timer sends each node's
// callback with X-Chime-Shard-Index and X-Chime-Shard-Total.
func TestFleetBroadcast(t *testing.T) {
	type shardRun struct {
		node, fire string
		shard      model.Shard
	}
	var mu sync.Mutex
	var ran []shardRun
	nodes, base := fleet(t, 3, func(i int, n *chime.Node) {
		id := n.ID()
		n.HandleFunc("everywhere", func(ctx context.Context, run *chime.Run) ([]byte, error) {
			if run.Shard == nil {
				return nil, fmt.Errorf("run %s without its shard", run.ID)
			}
			mu.Lock()
			ran = append(ran, shardRun{id, run.FireID, *run.Shard})
			mu.Unlock()
			return []byte(id), nil
		})
	})
	var hooks struct {
		sync.Mutex
		got []http.Header
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks.Lock()
		hooks.got = append(hooks.got, r.Header.Clone())
		hooks.Unlock()
	}))
	t.Cleanup(rcv.Close)

	req := handlerTimer("everywhere", at(2*time.Second), "everywhere")
	req["mode"] = "broadcast"
	var tm api.Timer
	if code := rest(t, "POST", base+"/timers", req, &tm); code != http.StatusCreated || tm.Mode != "broadcast" {
		t.Fatalf("create the broadcast timer: %d, mode %q", code, tm.Mode)
	}
	fire := waitFire(t, nodes[0], base, tm.ID, 20*time.Second)
	if fire.Status != string(model.RunSucceeded) || fire.ShardTotal != 3 || len(fire.Shards) != 3 {
		t.Fatalf("the broadcast fire = %+v", fire)
	}
	seen := map[string]bool{}
	for i, sh := range fire.Shards {
		if sh.ShardIndex == nil || *sh.ShardIndex != i || sh.ShardTotal != 3 || sh.FireID != fire.ID ||
			sh.Status != string(model.RunSucceeded) || !sh.ScheduledAt.Equal(fire.ScheduledAt) || seen[sh.Node] {
			t.Errorf("shard %d = %+v", i, sh)
		}
		seen[sh.Node] = true
	}
	mu.Lock()
	if len(ran) != 3 {
		t.Errorf("the handler ran %d times, want 3: %+v", len(ran), ran)
	}
	for _, r := range ran {
		if r.fire != fire.ID || r.shard.Total != 3 {
			t.Errorf("handler run %+v, want fire %s of 3 shards", r, fire.ID)
		}
	}
	mu.Unlock()

	hook := map[string]any{"app": "fleet", "name": "hook", "schedule": at(2 * time.Second), "mode": "broadcast",
		"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": rcv.URL}}}
	if code := rest(t, "POST", base+"/timers", hook, &tm); code != http.StatusCreated {
		t.Fatalf("create the broadcast callback: %d", code)
	}
	fire = waitFire(t, nodes[0], base, tm.ID, 20*time.Second)
	if fire.Status != string(model.RunSucceeded) || len(fire.Shards) != 3 {
		t.Fatalf("the broadcast callback's fire = %+v", fire)
	}
	hooks.Lock()
	defer hooks.Unlock()
	indexes, senders := map[string]bool{}, map[string]bool{}
	for _, h := range hooks.got {
		if h.Get("X-Chime-Shard-Total") != "3" {
			t.Errorf("callback with X-Chime-Shard-Total %q", h.Get("X-Chime-Shard-Total"))
		}
		indexes[h.Get("X-Chime-Shard-Index")] = true
		senders[h.Get("X-Chime-Node")] = true
	}
	if len(hooks.got) != 3 || len(indexes) != 3 || len(senders) != 3 {
		t.Errorf("%d callbacks, shard indexes %v, senders %v; want 3 of each", len(hooks.got), indexes, senders)
	}
}

// waitFire waits until the timer's split fire has ended and returns GET
// /runs/{id} of it.
func waitFire(t *testing.T, n *chime.Node, base, timerID string, timeout time.Duration) *api.Run {
	t.Helper()
	var out api.Run
	testenv.Eventually(t, timeout, "the fire of timer "+timerID+" ended", func() (bool, string) {
		runs, _, err := nodeparts.Of(n).Store.ListRuns(context.Background(), store.RunFilter{TimerID: timerID})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range runs {
			if r.IsFire() {
				if !r.Status.Terminal() {
					return false, "fire " + string(r.Status)
				}
				if code := rest(t, "GET", base+"/runs/"+r.ID, nil, &out); code != http.StatusOK {
					return false, fmt.Sprintf("GET /runs/%s: %d", r.ID, code)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs, no fire split yet", len(runs))
	})
	return &out
}

// TestFleetEmbeddedShards: on one embedded node (SQLite) a fire of three
// shards runs its three shards there, each seeing its shard, and succeeds.
func TestFleetEmbeddedShards(t *testing.T) {
	t.Parallel()
	n := newNode(t, chime.Config{Cluster: chime.ClusterConfig{NodeID: "solo"}})
	var mu sync.Mutex
	got := map[int]int{} // shard index -> total
	n.HandleFunc("part", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		if run.Shard == nil {
			return nil, fmt.Errorf("run %s without its shard", run.ID)
		}
		mu.Lock()
		got[run.Shard.Index] = run.Shard.Total
		mu.Unlock()
		return nil, nil
	})
	start(t, n)
	id, err := n.Upsert(context.Background(), chime.Timer{Name: "parts", Schedule: at(time.Second),
		Action: chime.HandlerAction("part", nil), Policy: model.Policy{Shards: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var fire *model.Run
	testenv.Eventually(t, 15*time.Second, "the fire succeeded", func() (bool, string) {
		runs, _, err := nodeparts.Of(n).Store.ListRuns(context.Background(), store.RunFilter{TimerID: id})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range runs {
			if r.IsFire() {
				fire = r
				return r.Status == model.RunSucceeded, string(r.Status)
			}
		}
		return false, fmt.Sprintf("%d runs, no fire", len(runs))
	})
	shards, err := nodeparts.Of(n).Store.FireShards(context.Background(), fire.ID)
	if err != nil || len(shards) != 3 {
		t.Fatalf("shards = %v, %v", shards, err)
	}
	for _, sh := range shards {
		if sh.Node != "solo" || sh.Status != model.RunSucceeded {
			t.Errorf("shard %+v", sh)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != 3 || got[2] != 3 {
		t.Errorf("the handler saw shards %v, want 0, 1, 2 of 3", got)
	}
}
