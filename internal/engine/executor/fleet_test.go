package executor

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// fleetEnv is an executor of node n1, which has the handler "local", in a
// fleet whose node n2 advertises "remote" and n3 nothing; n4 has both
// handlers but stands by (its clock is off): it claims nothing, and gets
// no work.
type fleetEnv struct {
	t     *testing.T
	clock *clock.Fake
	store store.Store
	exec  *Executor
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Parallel()
	st, err := sqlstore.Open(context.Background(), "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	ok := action.RunnerFunc(func(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) { return nil, nil })
	e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "n1",
		Runners: map[string]action.Runner{model.ActionHTTP: ok, model.ActionHandler: ok}, Clock: clk, Local: clk,
		HasHandler: func(name string) bool { return name == "local" },
		Nodes: func() []model.Node {
			return []model.Node{{ID: "n1", Handlers: []string{"local"}}, {ID: "n2", Handlers: []string{"remote"}}, {ID: "n3"},
				{ID: "n4", Handlers: []string{"local", "remote"}, Standby: true}}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go e.rec.loop()
	t.Cleanup(func() { e.rec.close(context.Background()) })
	return &fleetEnv{t: t, clock: clk, store: st, exec: e}
}

// timer creates a timer whose action is handler (or HTTP when "").
func (env *fleetEnv) timer(name, handler string, p model.Policy) *model.Timer {
	env.t.Helper()
	tm := &model.Timer{ID: name, App: "a", Name: name, Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action:  model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://127.0.0.1:9/"}},
		Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 5, Backoff: time.Second}, Policy: p,
		CreatedAt: env.clock.Now(), UpdatedAt: env.clock.Now()}
	if handler != "" {
		tm.Action = model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: handler}}
	}
	if _, err := env.store.SaveTimer(context.Background(), store.TimerWrite{Timer: tm, Create: true}); err != nil {
		env.t.Fatal(err)
	}
	return tm
}

// claim plans a run of tm at at and claims it.
func (env *fleetEnv) claim(tm *model.Timer, at time.Time) (*model.Run, []store.ClaimedRun) {
	env.t.Helper()
	r := &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at}
	if _, err := env.store.InsertRuns(context.Background(), []*model.Run{r}); err != nil {
		env.t.Fatal(err)
	}
	won, err := env.exec.Claim(context.Background(), []index.Entry{{RunID: r.ID, TimerID: r.TimerID, DueAt: at}})
	if err != nil {
		env.t.Fatal(err)
	}
	return r, won
}

func (env *fleetEnv) run(id string) *model.Run {
	env.t.Helper()
	r, err := env.store.GetRun(context.Background(), id)
	if err != nil {
		env.t.Fatal(err)
	}
	return r
}

// TestHandOffAhead: a run of a handler this node lacks is handed, at its
// claim, to the node that advertises it; a run of its own handler stays.
func TestHandOffAhead(t *testing.T) {
	env := newFleetEnv(t)
	at := env.clock.Now().Add(500 * time.Millisecond)
	r, won := env.claim(env.timer("remote", "remote", model.Policy{}), at)
	if len(won) != 0 {
		t.Fatalf("Claim returned the misplaced run: %+v", won)
	}
	testenv.Eventually(t, 5*time.Second, "the run handed to n2", func() (bool, string) {
		got := env.run(r.ID)
		return got.Status == model.RunPending && got.TargetNode == "n2" && got.Attempt == 0 && got.DueAt.Equal(at), string(got.Status) + " " + got.TargetNode
	})
	if _, won := env.claim(env.timer("local", "local", model.Policy{}), at); len(won) != 1 {
		t.Errorf("Claim of a run of this node's handler = %d runs", len(won))
	}
}

// TestNoHandlerSkippedAtOnce: a run whose handler no live node has ends
// at its first attempt, skipped (handler_missing), whatever its retry
// policy.
func TestNoHandlerSkippedAtOnce(t *testing.T) {
	env := newFleetEnv(t)
	r, won := env.claim(env.timer("ghost", "ghost", model.Policy{}), env.clock.Now())
	if len(won) != 1 {
		t.Fatalf("claimed %d", len(won))
	}
	env.exec.execute(won[0])
	testenv.Eventually(t, 5*time.Second, "the run skipped", func() (bool, string) {
		got := env.run(r.ID)
		return got.Status == model.RunSkipped && got.Reason == model.SkipHandlerMissing && got.Attempt == 1 && strings.Contains(got.Error, `no such handler "ghost" on any live node`), string(got.Status) + " " + got.Error
	})
}

// TestSplit: a broadcast fire is split into one shard per node that can
// run it, a sharded one into its shards on distinct nodes, and a
// broadcast of a handler only n2 has into one shard, on n2.
func TestSplit(t *testing.T) {
	env := newFleetEnv(t)
	for _, tc := range []struct {
		name, handler string
		policy        model.Policy
		want          []string // the node of each shard
	}{
		{"broadcast-http", "", model.Policy{Mode: model.ModeBroadcast}, []string{"n1", "n2", "n3"}},
		{"broadcast-remote", "remote", model.Policy{Mode: model.ModeBroadcast}, []string{"n2"}},
		{"shards", "", model.Policy{Shards: 2}, nil},
	} {
		r, won := env.claim(env.timer(tc.name, tc.handler, tc.policy), env.clock.Now())
		if len(won) != 1 {
			t.Fatalf("%s: claimed %d", tc.name, len(won))
		}
		env.exec.execute(won[0])
		fire := env.run(r.ID)
		if !fire.IsFire() || fire.Status != model.RunRunning || fire.LeaseUntil != nil {
			t.Errorf("%s: fire = %+v", tc.name, fire)
		}
		shards, err := env.store.FireShards(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := len(tc.want)
		if tc.policy.Shards > 0 {
			want = tc.policy.Shards
		}
		if len(shards) != want {
			t.Fatalf("%s: %d shards, want %d", tc.name, len(shards), want)
		}
		seen := map[string]bool{}
		for i, sh := range shards {
			if tc.want != nil && sh.TargetNode != tc.want[i] {
				t.Errorf("%s: shard %d on %q, want %q", tc.name, i, sh.TargetNode, tc.want[i])
			}
			if seen[sh.TargetNode] {
				t.Errorf("%s: two shards on %s", tc.name, sh.TargetNode)
			}
			seen[sh.TargetNode] = true
		}
	}
}
