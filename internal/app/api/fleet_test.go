package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// TestFleetAPI: GET /nodes shows the handlers each node advertises; a
// handler timer is created when this server or a live node has the
// handler, refused on action.handler.name otherwise unless
// ?allow_unknown_handler=true, and updated without the check while it
// keeps its handler name; mode and shards round-trip; GET /runs/{id} of a
// split fire shows its shards.
func TestFleetAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.engine.Handlers = []string{"remote"}

	var nodes api.NodeList
	e.doJSON(t, "GET", "/api/v1/nodes", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) != 1 || !slices.Equal(nodes.Nodes[0].Handlers, []string{"remote"}) {
		t.Errorf("GET /nodes = %+v", nodes.Nodes)
	}

	handler := func(name, handler string) map[string]any {
		m := validTimer(name)
		m["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": handler}}
		return m
	}
	e.createTimer(t, handler("local", "cleanup")) // this server's
	e.createTimer(t, handler("remote", "remote")) // a live node's
	code, body := e.do(t, "POST", "/api/v1/timers", handler("ghost", "ghost"))
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"field":"action.handler.name"`) ||
		!strings.Contains(string(body), "allow_unknown_handler") {
		t.Errorf("a handler no node has: %d %s", code, body)
	}
	var ghost api.Timer
	e.doJSON(t, "POST", "/api/v1/timers?allow_unknown_handler=true", handler("ghost", "ghost"), http.StatusCreated, &ghost)
	upd := handler("ghost", "ghost")
	upd["description"] = "still waiting for its deploy"
	e.doJSON(t, "PUT", "/api/v1/timers/"+ghost.ID, upd, http.StatusOK, nil)
	upd = handler("ghost", "phantom")
	if code, body := e.do(t, "PUT", "/api/v1/timers/"+ghost.ID, upd); code != http.StatusBadRequest {
		t.Errorf("an update to another unknown handler: %d %s", code, body)
	}

	b := validTimer("broadcast")
	b["mode"] = "broadcast"
	if tm := e.createTimer(t, b); tm.Mode != "broadcast" || tm.Shards != 0 {
		t.Errorf("broadcast timer: mode %q shards %d", tm.Mode, tm.Shards)
	}
	s := validTimer("sharded")
	s["shards"] = 4
	sharded := e.createTimer(t, s)
	if sharded.Mode != "single" || sharded.Shards != 4 {
		t.Errorf("sharded timer: mode %q shards %d", sharded.Mode, sharded.Shards)
	}

	// A fire of the sharded timer, split into its shards in the store.
	at := testNow.Add(time.Hour)
	fireID := model.RunID(sharded.ID, at)
	if _, err := e.store.InsertRuns(t.Context(), []*model.Run{{ID: fireID, TimerID: sharded.ID, ScheduledAt: at, DueAt: at}}); err != nil {
		t.Fatal(err)
	}
	won, err := e.store.ClaimRuns(t.Context(), []store.Claim{{RunID: fireID, Node: "n1", LeaseUntil: at.Add(time.Minute), Now: at}})
	if err != nil || len(won) != 1 {
		t.Fatalf("claim the fire: %v %v", won, err)
	}
	shards := make([]*model.Run, 4)
	for i := range shards {
		shards[i] = &model.Run{Shard: &model.Shard{Index: i, Total: 4}, DueAt: at, TargetNode: "n1"}
	}
	if err := e.store.StartFire(t.Context(), won[0].Run, shards); err != nil {
		t.Fatal(err)
	}
	var fire api.Run
	e.doJSON(t, "GET", "/api/v1/runs/"+fireID, nil, http.StatusOK, &fire)
	if fire.FireID != fireID || fire.ShardTotal != 4 || fire.ShardIndex != nil || len(fire.Shards) != 4 || fire.Status != "running" {
		t.Fatalf("GET /runs/{fire} = %+v", fire)
	}
	for i, sh := range fire.Shards {
		if sh.ShardIndex == nil || *sh.ShardIndex != i || sh.ShardTotal != 4 || sh.FireID != fireID || !sh.ScheduledAt.Equal(at) {
			t.Errorf("shard %d = %+v", i, sh)
		}
	}
	var one api.Run
	e.doJSON(t, "GET", "/api/v1/runs/"+fire.Shards[2].ID, nil, http.StatusOK, &one)
	if one.ShardIndex == nil || *one.ShardIndex != 2 || one.Shards != nil {
		t.Errorf("GET /runs/{shard} = %+v", one)
	}
}
